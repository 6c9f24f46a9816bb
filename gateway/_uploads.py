"""``POST /agent/attachments``: a person's file, uploaded before the message that carries it.

The body is ``multipart/form-data`` with the file in the ``file`` field (and, optionally, the
conversation in a ``thread_id`` field before it, or in the query). A declared length over the
limit is refused before a byte of the body is read; otherwise the file is counted as it
streams and refused the moment it passes the limit (413), so a client cannot make the gateway
read more than the limit. The type comes from the bytes (415 when they are no accepted type, or
not the one claimed). The answer is ``201 {id, name, mime, size}``; ``send {attachments: [id]}``
then carries it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from aiohttp import BodyPartReader, MultipartReader, web
from aiohttp.http_exceptions import BadHttpMessage
from aiohttp.multipart import BadContentDispositionHeader, BadContentDispositionParam

from ._errors import AttachmentTooLargeError, GatewayError, ThreadNotFoundError
from ._services import SERVICES

__all__ = ["UPLOAD_MIN_RATE", "upload_allowance", "upload_attachment"]

_CHUNK = 64 * 1024
_MULTIPART_OVERHEAD = 16 * 1024
"""Bytes a multipart body may hold besides the file (boundaries, part headers, a thread id)."""
_THREAD_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


UPLOAD_MIN_RATE = 64 * 1024
"""Bytes a second an upload must keep up on average: the largest file's time to arrive is set by it."""


def upload_allowance(read_timeout: float, max_bytes: int) -> float:
    """Seconds an upload's body may take: the read timeout, plus the largest file at ``UPLOAD_MIN_RATE``.

    A steady phone connection sends a 10 MB photo well within it (about 2.5 min); a client that
    trickles is cut there all the same (408).
    """
    return read_timeout + (max_bytes + _MULTIPART_OVERHEAD) / UPLOAD_MIN_RATE


class _BadUpload(GatewayError):
    status, code = 400, "invalid_request"


async def _part_chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(_CHUNK):
        yield chunk


_MALFORMED = (ValueError, BadHttpMessage, BadContentDispositionHeader, BadContentDispositionParam)
"""What aiohttp raises (or warns, where warnings are errors) for a form it cannot read."""


async def _next_part(reader: MultipartReader) -> MultipartReader | BodyPartReader | None:
    """The form's next part (``None`` after the last).

    Raises:
        _BadUpload: A part whose boundary or headers cannot be read (400, not aiohttp's 500).
    """
    try:
        return await reader.next()
    except _MALFORMED as exc:
        raise _BadUpload(f"The form cannot be read ({type(exc).__name__})") from None


async def _read_field(part: BodyPartReader, budget: int) -> tuple[bytes, int]:
    """A field besides the file, read whole while ``budget`` (the bytes left for fields) lasts.

    Raises:
        AttachmentTooLargeError: The form's fields together pass ``_MULTIPART_OVERHEAD`` bytes.
    """
    value = bytearray()
    while chunk := await part.read_chunk(_CHUNK):
        budget -= len(chunk)
        if budget < 0:
            raise AttachmentTooLargeError(
                f"The form's fields besides the file may be at most {_MULTIPART_OVERHEAD:,} bytes"
            )
        value.extend(chunk)
    return bytes(value), budget


def _valid_thread_id(value: str) -> str:
    if not _THREAD_ID.match(value):
        raise _BadUpload("Bad thread id")
    return value


async def upload_attachment(request: web.Request) -> web.Response:
    """``POST /agent/attachments`` (multipart ``file``, optional ``thread_id``): 201 ``{id, name, mime, size}``.

    Raises:
        AttachmentTooLargeError: The body declares, or streams, more than the limit (413).
        AttachmentTypeError: The file is no accepted type, or not what it claims (415).
        ThreadForbiddenError: ``thread_id`` names another person's thread (403).
    """
    try:
        return await _upload(request)
    except AttachmentTooLargeError as exc:
        from ._http import json_error  # here: _http mounts this route

        # The answer is sent now and the connection closed after it: aiohttp would otherwise
        # read (and drop) the rest of the body for up to its lingering time to keep the
        # connection alive, which is the reading the limit is there to stop.
        response = json_error(exc.status, exc.code, str(exc))
        response.force_close()
        await response.prepare(request)
        await response.write_eof()
        request.protocol.force_close()
        return response


async def _upload(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    actor = await services.resolve_actor(request)
    attachments = services.attachments
    if request.content_length is not None:
        attachments.check_size(request.content_length - _MULTIPART_OVERHEAD)
    if request.content_type != "multipart/form-data":
        raise _BadUpload("Send multipart/form-data with the file in the 'file' field")
    thread_id = _valid_thread_id(request.query["thread_id"]) if "thread_id" in request.query else None
    try:
        reader = await request.multipart()
    except _MALFORMED as exc:
        raise _BadUpload(f"The form cannot be read ({type(exc).__name__})") from None
    budget = _MULTIPART_OVERHEAD  # the other fields are counted too: none is read (or dropped) unbounded
    while (part := await _next_part(reader)) is not None:
        if not isinstance(part, BodyPartReader):
            raise _BadUpload("Nested multipart bodies are not accepted")
        if part.name != "file":
            value, budget = await _read_field(part, budget)
            if part.name == "thread_id":
                thread_id = _valid_thread_id(value.decode("utf-8", "replace").strip())
            continue
        if thread_id is not None:
            try:
                await services.runtime.check_thread_access(thread_id, actor)
            except ThreadNotFoundError:
                pass  # a conversation not started yet: the file joins it when the message does
        attachment = await attachments.store_upload(
            actor, thread_id, part.filename or "", part.headers.get("Content-Type"), _part_chunks(part)
        )
        return web.json_response(attachment.model_dump(), status=201)
    raise _BadUpload("No 'file' field in the form")
