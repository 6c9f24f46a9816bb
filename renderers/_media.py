r"""``MediaStore``: rendered bytes behind HMAC-signed, expiring, URL-safe tokens.

Twilio fetches WhatsApp media from a public URL, ``GET /media/{token}``, maybe from another
gateway process than the one that rendered it: the Redis backend makes the bytes reachable from
every process; the token alone proves the URL was issued by a holder of the secret.

Token layout (then base64url, no padding; 76 characters)::

    version (1 byte, 1) | expires_at (8 bytes, unix seconds, big-endian) | media id (16 random bytes)
    | HMAC-SHA256(key, "agora-media\\0" + the 25 bytes before)   (32 bytes)

``key`` is derived from the secret (``HMAC(secret, "agora-gateway/media/v1")``), so a token
cannot be confused with anything else the same secret signs (cookies, actor tokens).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
import struct
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools import UserError

from ._errors import MediaTokenError, MediaUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

__all__ = ["MediaBackend", "MediaItem", "MediaStore", "MemoryMediaBackend", "RedisMediaBackend"]

_VERSION = 1
_PAYLOAD = struct.Struct("!BQ16s")
_MAC_SIZE = 32
_TOKEN_SIZE = _PAYLOAD.size + _MAC_SIZE
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9_-]{76}$")
_DOMAIN = b"agora-media\x00"
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")
_FILENAME_UNSAFE = re.compile(r"[^A-Za-z0-9._ ()-]+")


@dataclass(frozen=True)
class MediaItem:
    """Stored media: the bytes, their MIME type and an optional download name."""

    data: bytes
    mime: str
    filename: str | None = None
    """A safe file name (letters, digits, ``._ ()-``) for ``Content-Disposition``; ``None`` when not given."""


class MediaBackend(ABC):
    """Where ``MediaStore`` keeps bytes, by media id, until they expire.

    Media rendered for a conversation name its thread (``put(..., thread_id=...)``): erasing the
    thread erases them (``forget_thread``) before they would expire.
    """

    @abstractmethod
    async def put(self, media_id: str, item: MediaItem, expires_at: float, *, thread_id: str | None = None) -> None:
        """Keep ``item`` until ``expires_at`` (unix seconds), as one of ``thread_id``'s media when given."""

    @abstractmethod
    async def get(self, media_id: str) -> MediaItem | None:
        """The item, or ``None`` when it expired, was evicted or never was."""

    @abstractmethod
    async def forget_thread(self, thread_id: str) -> int:
        """Delete every item put for ``thread_id`` now; answer how many were still kept."""


class MemoryMediaBackend(MediaBackend):
    """Media kept in this process's memory, least-recently-stored first out past ``max_bytes``.

    Only this process can serve its media: behind several gateway processes use Redis.

    Args:
        max_bytes: Total bytes kept.
        clock: Unix time source (tests pass a fake one).
    """

    def __init__(self, *, max_bytes: int = 256 * 1024 * 1024, clock: Callable[[], float] = time.time) -> None:
        self.max_bytes = max_bytes
        self._clock = clock
        self._items: OrderedDict[str, tuple[MediaItem, float, str | None]] = OrderedDict()
        self._threads: dict[str, set[str]] = {}
        """Media ids by the thread they were put for."""
        self._bytes = 0

    async def put(self, media_id: str, item: MediaItem, expires_at: float, *, thread_id: str | None = None) -> None:
        """Keep ``item``, evicting expired items, then the oldest, to stay under ``max_bytes``."""
        if len(item.data) > self.max_bytes:
            raise UserError(f"Media of {len(item.data):,} bytes is larger than the store's {self.max_bytes:,}.")
        self._drop(media_id)
        self._items[media_id] = (item, expires_at, thread_id)
        self._bytes += len(item.data)
        if thread_id is not None:
            self._threads.setdefault(thread_id, set()).add(media_id)
        now = self._clock()
        for key in [k for k, (_, expiry, _) in self._items.items() if expiry <= now]:
            self._drop(key)
        while self._bytes > self.max_bytes:
            self._drop(next(iter(self._items)))

    def _drop(self, media_id: str) -> bool:
        entry = self._items.pop(media_id, None)
        if entry is None:
            return False
        item, _, thread_id = entry
        self._bytes -= len(item.data)
        if thread_id is not None and thread_id in self._threads:
            owned = self._threads[thread_id]
            owned.discard(media_id)
            if not owned:
                del self._threads[thread_id]
        return True

    async def get(self, media_id: str) -> MediaItem | None:
        """The item, unless it expired or was evicted."""
        entry = self._items.get(media_id)
        if entry is None:
            return None
        item, expires_at, _ = entry
        if expires_at <= self._clock():
            self._drop(media_id)
            return None
        return item

    async def forget_thread(self, thread_id: str) -> int:
        """Delete the thread's items now."""
        return sum(self._drop(media_id) for media_id in list(self._threads.get(thread_id, ())))


class RedisMediaBackend(MediaBackend):
    """Redis or a Redis Cluster, shared by every gateway process: one hash per item, expiring with its token.

    Key layout (``P`` is the prefix; every script and write touches one hash slot, so it runs on a
    Cluster as on one server)::

        P<media id>                 an item without a thread: a hash (data, mime, filename)
                                    an item of a thread: a pointer, a hash (thread)
        P{<thread id>}:<media id>   an item of a thread, beside its thread's set
        P{<thread id>}              the thread's set of media ids (as long-lived as its longest item)

    A thread's items share the thread's hash tag (the store's tag for its keys too), so
    ``forget_thread`` is one script over the set and its items: no item put meanwhile escapes.
    ``get`` knows only the media id: it reads ``P<media id>`` and, for a pointer, the item it
    names. The pointer is written before the item: a failure between them leaves a pointer to
    nothing (a miss), never an item that ``forget_thread`` cannot find. Pointers expire with
    their items; ``forget_thread`` removes those of the items it erased afterwards (each in its
    own slot, so not in the script: one left behind is a miss until it expires). Media ids hold
    no ``{``.

    On one server, ``forget_thread`` also erases what an earlier layout kept for the thread
    (``P thread:<thread id>`` and the items it lists).

    Args:
        redis: A ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster`` client created
            with ``decode_responses=False``.
        prefix: Key prefix (use one per deployment; tests use one per test). No ``{`` in it.
    """

    def __init__(self, redis: Redis | RedisCluster, *, prefix: str = "agora:media:") -> None:
        if _decodes(redis):
            raise UserError("RedisMediaBackend needs a Redis client with decode_responses=False (media are bytes).")
        if "{" in prefix or "}" in prefix:
            raise UserError("RedisMediaBackend's prefix holds no braces (its keys carry the thread's hash tag).")
        self._redis = redis
        self._prefix = prefix
        self._cluster = _is_cluster(redis)

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        """Redis's failures (and the socket's) as ``MediaUnavailableError``, the cause kept."""
        from redis.exceptions import RedisError  # here: importing renderers must not load redis

        try:
            yield
        except (RedisError, OSError) as exc:
            raise MediaUnavailableError(f"the media backend (Redis) is unavailable: {exc}") from exc

    def _thread_key(self, thread_id: str) -> str:
        return f"{self._prefix}{{{thread_id}}}"

    def _item_key(self, media_id: str, thread_id: str | None) -> str:
        if thread_id is None:
            return self._prefix + media_id
        return f"{self._thread_key(thread_id)}:{media_id}"

    async def put(self, media_id: str, item: MediaItem, expires_at: float, *, thread_id: str | None = None) -> None:
        """Store ``item`` as a hash that Redis deletes at ``expires_at``.

        An item of a thread is written in two steps, each one script: the pointer, then the item
        and its place in the thread's set (which lives as long as its longest-lived item).

        Raises:
            MediaUnavailableError: Redis cannot be reached.
        """
        at_ms = int(expires_at * 1000)
        filename = (item.filename or "").encode()
        with self._unavailable():
            if thread_id is None:
                await self._redis.eval(
                    _PUT_ITEM, 1, self._prefix + media_id, at_ms, item.data, item.mime.encode(), filename
                )
                return
            await self._redis.eval(_POINT, 1, self._prefix + media_id, at_ms, thread_id.encode())
            item_key, set_key = self._item_key(media_id, thread_id), self._thread_key(thread_id)
            await self._redis.eval(
                _PUT_ITEM, 2, item_key, set_key, at_ms, item.data, item.mime.encode(), filename, media_id
            )

    async def get(self, media_id: str) -> MediaItem | None:
        """The item, or ``None`` once Redis has expired it (or its thread was forgotten).

        Raises:
            MediaUnavailableError: Redis cannot be reached.
        """
        with self._unavailable():
            fields = await self._redis.hgetall(self._prefix + media_id)
            thread = fields.get(b"thread")
            if isinstance(thread, bytes):
                fields = await self._redis.hgetall(self._item_key(media_id, thread.decode()))
        data, mime, filename = fields.get(b"data"), fields.get(b"mime"), fields.get(b"filename")
        if not isinstance(data, bytes) or not isinstance(mime, bytes):
            return None
        return MediaItem(data, mime.decode(), filename.decode() if isinstance(filename, bytes) else None)

    async def forget_thread(self, thread_id: str) -> int:
        """Delete the thread's items and their set, at once (a script: no item put meanwhile escapes).

        Then the pointers of the erased items, each only while it still names this thread.

        Raises:
            MediaUnavailableError: Redis cannot be reached.
        """
        keys = [self._thread_key(thread_id)]
        if not self._cluster:
            keys.append(f"{self._prefix}thread:{thread_id}")
        with self._unavailable():
            reply = await self._redis.eval(_FORGET_THREAD, len(keys), *keys, self._prefix)
            erased, media_ids = int(reply[0]), [bytes(m).decode() for m in reply[1:]]
            if media_ids:
                async with self._redis.pipeline(transaction=False) as pipe:
                    for media_id in media_ids:
                        pipe.eval(_UNPOINT, 1, self._prefix + media_id, thread_id.encode())
                    await pipe.execute()
        return erased


def _is_cluster(client: object) -> bool:
    from redis.asyncio.cluster import RedisCluster  # here: importing renderers must not load redis

    return isinstance(client, RedisCluster)


def _decodes(client: Redis | RedisCluster) -> bool:
    """Whether ``client`` answers str rather than bytes (a Cluster's node options, or the pool's)."""
    from redis.asyncio.cluster import RedisCluster  # here: importing renderers must not load redis

    if isinstance(client, RedisCluster):
        return bool(client.get_connection_kwargs().get("decode_responses"))
    return bool(client.connection_pool.connection_kwargs.get("decode_responses"))


# Every script names only keys of one slot: KEYS[1]'s, and the keys it computes share its tag.
_POINT = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'thread', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
"""

# KEYS[1] the item; KEYS[2] (an item of a thread) the thread's set, beside it.
_PUT_ITEM = """
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'data', ARGV[2], 'mime', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'filename', ARGV[4])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
if KEYS[2] then
  redis.call('SADD', KEYS[2], ARGV[5])
  local ttl = redis.call('PTTL', KEYS[2])
  local now = redis.call('TIME')
  local at = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  if ttl < 0 or at + ttl < tonumber(ARGV[1]) then
    redis.call('PEXPIREAT', KEYS[2], ARGV[1])
  end
end
return 1
"""

# KEYS[1] the thread's set (its items are KEYS[1] .. ':' .. id); KEYS[2], on one server only,
# the set of the earlier layout (its items: ARGV[1] .. id).
_FORGET_THREAD = """
local erased = 0
local ids = {}
for _, media_id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  erased = erased + redis.call('DEL', KEYS[1] .. ':' .. media_id)
  ids[#ids + 1] = media_id
end
redis.call('DEL', KEYS[1])
if KEYS[2] then
  for _, media_id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
    erased = erased + redis.call('DEL', ARGV[1] .. media_id)
  end
  redis.call('DEL', KEYS[2])
end
table.insert(ids, 1, erased)
return ids
"""

_UNPOINT = """
if redis.call('HGET', KEYS[1], 'thread') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class MediaStore:
    """Keeps rendered media and issues signed, expiring tokens for ``GET /media/{token}``.

    Args:
        secret: The gateway's secret (``Settings.secret``), at least 16 bytes.
        ttl: Seconds a token (and its bytes) stays valid.
        backend: Where bytes are kept; default ``MemoryMediaBackend()``. Use
            ``RedisMediaBackend`` when more than one gateway process serves ``/media``.
        clock: Unix time source (tests pass a fake one to expire tokens without waiting).
    """

    def __init__(
        self,
        secret: str | bytes,
        *,
        ttl: float = 3600.0,
        backend: MediaBackend | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        raw = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(raw) < 16:
            raise UserError("MediaStore secret must be at least 16 bytes.")
        if ttl <= 0:
            raise UserError("MediaStore ttl must be positive.")
        self._key = hmac.new(raw, b"agora-gateway/media/v1", hashlib.sha256).digest()
        self.ttl = ttl
        """Default seconds a token stays valid."""
        self.backend = backend if backend is not None else MemoryMediaBackend(clock=clock)
        """Where the bytes are."""
        self._clock = clock

    async def put(
        self,
        data: bytes,
        mime: str,
        *,
        filename: str | None = None,
        ttl: float | None = None,
        thread_id: str | None = None,
    ) -> str:
        """Store ``data`` and return a token for it.

        Args:
            data: The bytes (a PNG page, a PDF...).
            mime: Their type, e.g. ``"image/png"``.
            filename: A download name; unsafe characters are replaced.
            ttl: Seconds this token lives, default the store's.
            thread_id: The conversation the media were made for: ``forget_thread`` erases them.

        Returns:
            A URL-safe token that ``get`` (on any process sharing the backend and secret) accepts
            until it expires.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise UserError("MediaStore.put takes bytes.")
        mime = mime.strip().lower()
        if not _MIME.match(mime):
            raise UserError(f"Not a MIME type: {mime!r}.")
        expires_at = int(self._clock() + (self.ttl if ttl is None else ttl)) + 1
        media_id = secrets.token_bytes(16)
        token = self._sign(expires_at, media_id)
        item = MediaItem(bytes(data), mime, _safe_filename(filename))
        await self.backend.put(media_id.hex(), item, expires_at, thread_id=thread_id)
        return token

    async def forget_thread(self, thread_id: str) -> int:
        """Erase every media item put for ``thread_id`` (its tokens then answer ``not_found``).

        Raises:
            MediaUnavailableError: The backend cannot be reached.
        """
        return await self.backend.forget_thread(thread_id)

    async def get(self, token: str) -> MediaItem:
        """The media behind ``token``.

        Raises:
            MediaTokenError: ``reason`` ``"invalid"`` (malformed, tampered, other secret),
                ``"expired"`` or ``"not_found"``.
            MediaUnavailableError: The backend cannot be reached (try again later).
        """
        media_id, _ = self.verify(token)
        item = await self.backend.get(media_id)
        if item is None:
            raise MediaTokenError("not_found")
        return item

    def verify(self, token: str) -> tuple[str, int]:
        """Check ``token``'s signature and expiry without reading the backend.

        Returns:
            The media id (hex) and the expiry (unix seconds).

        Raises:
            MediaTokenError: ``"invalid"`` or ``"expired"``.
        """
        if not isinstance(token, str) or not _TOKEN_CHARS.match(token):
            raise MediaTokenError("invalid")
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (binascii.Error, ValueError):
            raise MediaTokenError("invalid") from None
        if len(raw) != _TOKEN_SIZE:
            raise MediaTokenError("invalid")
        payload, mac = raw[: _PAYLOAD.size], raw[_PAYLOAD.size :]
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise MediaTokenError("invalid")
        version, expires_at, media_id = _PAYLOAD.unpack(payload)
        if version != _VERSION:
            raise MediaTokenError("invalid")
        if expires_at <= self._clock():
            raise MediaTokenError("expired")
        return media_id.hex(), expires_at

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + payload, hashlib.sha256).digest()

    def _sign(self, expires_at: int, media_id: bytes) -> str:
        payload = _PAYLOAD.pack(_VERSION, expires_at, media_id)
        return base64.urlsafe_b64encode(payload + self._mac(payload)).rstrip(b"=").decode("ascii")


def _safe_filename(name: str | None) -> str | None:
    if not name:
        return None
    cleaned = _FILENAME_UNSAFE.sub("_", name.replace("/", "_").replace("\\", "_")).strip(" ._")
    return cleaned[:100] or None
