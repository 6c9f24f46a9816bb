"""``Attachments``: files people send, kept in the media store under an owner's record.

Every channel stores what a person attached the same way (an HTTP upload, a provider's media
fetched with its credentials): ``store_upload`` counts the bytes as they stream in and stops at
the size limit, sniffs the type from the bytes themselves (a header or a file name is only a
claim), and keeps two items in the media backend: the bytes (``att_<32 hex>``) and the record
(``att_<32 hex>.meta``: the uploading actor's key, name, type and size). Both name the thread
when it is known, so erasing the thread erases them; both expire after ``ttl`` seconds.

A turn carries only ``Attachment`` references; ``resolve`` checks each against the actor who
sends it (another actor's: 403; unknown or expired: 404), ``read`` gives the bytes back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

from renderers import MediaBackend, MediaItem
from tools import Actor

from ._errors import AttachmentForbiddenError, AttachmentNotFoundError, AttachmentTooLargeError, AttachmentTypeError
from .events import MAX_ATTACHMENTS, Attachment

__all__ = ["DEFAULT_ATTACHMENT_TTL", "AttachmentReader", "Attachments", "sniff_mime"]

logger = logging.getLogger("gateway.attachments")

AttachmentReader = Callable[[Attachment], Awaitable[bytes]]
"""Reads a stored attachment's bytes (``Attachments.read``): how the runtime's tools and models get them."""

DEFAULT_ATTACHMENT_TTL = 30 * 86_400.0
"""Seconds an attachment is kept when no retention is configured (``AGORA_RETENTION_DAYS``)."""

_SNIFF_BYTES = 16
"""Bytes the signatures below need."""

_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "application/x-pdf": "application/pdf"}
_UNCLAIMED = frozenset({"", "application/octet-stream", "binary/octet-stream"})
"""Claims that say nothing: the bytes decide alone."""


def sniff_mime(head: bytes) -> str | None:
    """The type a file's first bytes show (PNG, JPEG, GIF, WebP, PDF), or ``None``."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    return None


def _normal(mime: str | None) -> str:
    bare = (mime or "").split(";", 1)[0].strip().lower()
    return _ALIASES.get(bare, bare)


async def _chunks(source: bytes | AsyncIterable[bytes]) -> AsyncIterable[bytes]:
    if isinstance(source, bytes | bytearray | memoryview):
        yield bytes(source)
        return
    async for chunk in source:
        yield chunk


@dataclass(kw_only=True, eq=False)
class Attachments:
    """Stores, resolves and reads attachments, in one media backend shared by the app's channels.

    Args:
        backend: The media store's backend (memory, Redis or the SQL store's table).
        accepted: Media types accepted (``Settings.attachment_types``).
        max_bytes: Largest file (``Settings.attachment_max_bytes``).
        ttl: Seconds a file is kept (the retention, else ``DEFAULT_ATTACHMENT_TTL``).
        clock: Unix time source.
        max_concurrent: Files read at once on this process; more wait their turn. A file is held
            whole in memory while it is read and stored (twice, briefly), so this bounds the
            memory uploads and provider downloads take: ``2 * max_concurrent * max_bytes``.
    """

    backend: MediaBackend
    accepted: Sequence[str] = ("image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf")
    max_bytes: int = 10 * 1024 * 1024
    ttl: float = DEFAULT_ATTACHMENT_TTL
    clock: Callable[[], float] = field(default=time.time)
    max_concurrent: int = 16
    _slots: asyncio.Semaphore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.max_concurrent)

    def check_size(self, declared: int | None) -> None:
        """Refuse a file whose declared length (a ``Content-Length``) is already over the limit.

        Raises:
            AttachmentTooLargeError: ``declared`` is larger than ``max_bytes``.
        """
        if declared is not None and declared > self.max_bytes:
            raise AttachmentTooLargeError(self._too_large())

    def _too_large(self) -> str:
        return f"Files may be at most {self.max_bytes:,} bytes"

    def _check_type(self, sniffed: str | None, claimed: str) -> str:
        if sniffed is None or sniffed not in self.accepted:
            kinds = ", ".join(self.accepted) or "none"
            said = sniffed or (claimed if claimed not in _UNCLAIMED else "unknown")
            raise AttachmentTypeError(f"Files of type {said} are not accepted (accepted: {kinds})")
        if claimed not in _UNCLAIMED and claimed != sniffed:
            raise AttachmentTypeError(f"The file says it is {claimed} but its bytes are {sniffed}")
        return sniffed

    async def store_upload(
        self,
        actor: Actor,
        thread_id: str | None,
        name: str,
        claimed_mime: str | None,
        source: bytes | AsyncIterable[bytes],
    ) -> Attachment:
        """Keep one file for ``actor``: read while under the size limit, type-sniffed, stored.

        Args:
            actor: Who sent it (the owner: only their turns may carry it).
            thread_id: The conversation it was sent in, when known (its erasure erases the file).
            name: The file name the person gave it (may be empty).
            claimed_mime: The type the sender claimed (a header); the bytes must agree.
            source: The bytes, or their chunks as they arrive (reading stops at the limit).

        Raises:
            AttachmentTooLargeError: More than ``max_bytes`` arrived (reading stopped there).
            AttachmentTypeError: The bytes are no accepted type, or not the claimed one.
            MediaUnavailableError: The media backend cannot be reached.
        """
        async with self._slots:
            return await self._store(actor, thread_id, name, claimed_mime, source)

    async def _store(
        self,
        actor: Actor,
        thread_id: str | None,
        name: str,
        claimed_mime: str | None,
        source: bytes | AsyncIterable[bytes],
    ) -> Attachment:
        claimed = _normal(claimed_mime)
        parts: list[bytes] = []
        size = 0
        mime: str | None = None
        async for chunk in _chunks(source):
            size += len(chunk)
            if size > self.max_bytes:
                raise AttachmentTooLargeError(self._too_large())
            parts.append(chunk)
            if mime is None and (size >= _SNIFF_BYTES):
                mime = self._check_type(sniff_mime(b"".join(parts)[:_SNIFF_BYTES]), claimed)
        data = b"".join(parts)
        if mime is None:
            mime = self._check_type(sniff_mime(data), claimed)
        attachment = Attachment(id=f"att_{secrets.token_hex(16)}", name=name[:255], mime=mime, size=size)
        await self._keep(attachment, data, owner=actor.key, thread_id=thread_id)
        return attachment

    async def _keep(self, attachment: Attachment, data: bytes, *, owner: str, thread_id: str | None) -> None:
        expires_at = self.clock() + self.ttl
        record = {"owner": owner, "thread_id": thread_id, **attachment.model_dump()}
        meta = MediaItem(json.dumps(record).encode(), "application/json")
        # The bytes first: a record is never found without them.
        await self.backend.put(attachment.id, MediaItem(data, attachment.mime), expires_at, thread_id=thread_id)
        await self.backend.put(f"{attachment.id}.meta", meta, expires_at, thread_id=thread_id)

    async def resolve(
        self, actor: Actor, ids: Iterable[str], *, thread_id: str | None = None
    ) -> tuple[Attachment, ...]:
        """The attachments ``ids`` name, each checked to be ``actor``'s own.

        A file uploaded before its conversation was known joins ``thread_id`` here: erasing
        that thread erases it.

        Raises:
            AttachmentNotFoundError: An id names nothing kept (never uploaded, or expired).
            AttachmentForbiddenError: An id names another actor's file.
            AttachmentTypeError: More than ``MAX_ATTACHMENTS`` ids.
        """
        wanted = list(dict.fromkeys(ids))
        if len(wanted) > MAX_ATTACHMENTS:
            raise AttachmentTypeError(f"A message may carry at most {MAX_ATTACHMENTS} attachments")
        found: list[Attachment] = []
        for attachment_id in wanted:
            record = await self._record(attachment_id)
            if record is None:
                raise AttachmentNotFoundError(f"No attachment {attachment_id!r} (it may have expired)")
            if record.get("owner") != actor.key:
                raise AttachmentForbiddenError(f"Attachment {attachment_id!r} is not yours")
            attachment = Attachment.model_validate({k: record[k] for k in ("id", "name", "mime", "size")})
            if thread_id is not None and record.get("thread_id") is None:
                await self._keep(attachment, await self.read(attachment), owner=actor.key, thread_id=thread_id)
            found.append(attachment)
        return tuple(found)

    async def _record(self, attachment_id: str) -> dict[str, object] | None:
        if not attachment_id.startswith("att_") or len(attachment_id) > 100:
            return None
        item = await self.backend.get(f"{attachment_id}.meta")
        if item is None:
            return None
        record = json.loads(item.data)
        return record if isinstance(record, dict) else None

    async def read(self, attachment: Attachment) -> bytes:
        """The bytes of a stored attachment.

        Raises:
            AttachmentNotFoundError: It expired, or its thread was erased.
            MediaUnavailableError: The media backend cannot be reached.
        """
        item = await self.backend.get(attachment.id)
        if item is None:
            raise AttachmentNotFoundError(f"Attachment {attachment.id!r} is no longer kept")
        return item.data
