"""Hostile uploads to ``POST /agent/attachments``: what the form holds besides the file is bounded too.

The size limit must hold for the whole body, not only for the ``file`` part: a chunked body
whose other parts never end is answered (and the connection closed) long before it ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import RefusalLog

from .conftest import ALICE, token_for


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Iterator[RefusalLog]:
    caplog.set_level(logging.INFO)
    caplog.clear()
    yield RefusalLog(caplog, route="/agent/attachments", ignore=("gateway.runtime", "gateway.threads"))


async def _stream_endless_part(port: int, part_head: bytes) -> tuple[bytes, int]:
    """Send a chunked form whose part ``part_head`` starts and never ends; the answer's head and bytes sent."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = b""
    sent = 0
    try:
        writer.write(
            b"POST /agent/attachments HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + token_for(ALICE).encode() + b"\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        writer.write(b"%x\r\n%s\r\n" % (len(part_head), part_head))
        chunk = b"A" * 16_384
        async with asyncio.timeout(10):
            answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
            while not answer.done() and sent < 20_000_000:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                try:
                    await asyncio.wait_for(writer.drain(), 1)
                except (ConnectionError, TimeoutError):
                    break
                await asyncio.sleep(0)
            head = await answer
    finally:
        writer.close()
    return head, sent


async def test_an_endless_field_other_than_the_file_is_refused_before_it_ends(
    make_client: Any, refusals: RefusalLog
) -> None:
    client = await make_client(attachment_max_bytes=100_000)
    head, sent = await _stream_endless_part(
        client.server.port, b'--b\r\nContent-Disposition: form-data; name="padding"\r\n\r\n'
    )
    assert head.startswith(b"HTTP/1.1 413"), head
    assert sent < 5_000_000  # the gateway did not read (and drop) a body of any size
    refusals.one("413", "attachment_too_large")


async def test_an_endless_thread_id_field_is_refused_before_it_ends(make_client: Any, refusals: RefusalLog) -> None:
    client = await make_client(attachment_max_bytes=100_000)
    head, sent = await _stream_endless_part(
        client.server.port, b'--b\r\nContent-Disposition: form-data; name="thread_id"\r\n\r\n'
    )
    assert head.startswith(b"HTTP/1.1 413"), head
    assert sent < 5_000_000
    refusals.one("413", "attachment_too_large")
