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

from tests.attachment_parts import PNG
from tests.conftest import RefusalLog

from .conftest import ALICE, connect, token_for


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


def _form(disposition: bytes, *, mime: bytes = b"image/png", data: bytes = PNG) -> bytes:
    return (
        b"--b\r\nContent-Disposition: "
        + disposition
        + b"\r\nContent-Type: "
        + mime
        + b"\r\n\r\n"
        + data
        + b"\r\n--b--\r\n"
    )


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (_form(b'form-data; name="file"; filename="a\x01b.png"'), "multipart/form-data; boundary=b"),
        (_form(b"form-data; name=\"file\"; filename*=UTF-8''%ED%A0%80x.png"), "multipart/form-data; boundary=b"),
        (_form(b"form-data; name=\"file\"; filename*=UTF-8''%FF%FEx.png"), "multipart/form-data; boundary=b"),
        (_form(b'form-data; name="file"; filename="caf\xe9.png"'), "multipart/form-data; boundary=b"),
        (_form(b'form-data; name="file"; filename="x.png"', mime=b"image/\xffpng"), "multipart/form-data; boundary=b"),
        (_form(b'form-data; name="file"; filename="x.png"'), "multipart/form-data"),
        (_form(b'form-data; name="file"; filename="x.png"'), "multipart/form-data; boundary=other"),
        (b'--b\r\nContent-Disposition: form-data; name="file"\r\n\r\n' + PNG, "multipart/form-data; boundary=b"),
        (b"garbage", "multipart/form-data; boundary=b"),
    ],
    ids=[
        "control-char",
        "rfc2231-surrogate",
        "rfc2231-bad-utf8",
        "latin-1-name",
        "bad-part-type",
        "no-boundary",
        "wrong-boundary",
        "unterminated",
        "garbage",
    ],
)
async def test_malformed_forms_are_refused_or_kept_clean_never_a_500(
    make_client: Any, refusals: RefusalLog, body: bytes, content_type: str
) -> None:
    client = await make_client()
    answer = await client.post(
        "/agent/attachments",
        data=body,
        headers={"Authorization": f"Bearer {token_for(ALICE)}", "Content-Type": content_type},
    )
    assert answer.status in (201, 400, 415), (answer.status, await answer.text())
    if answer.status == 201:
        name = (await answer.json())["name"]
        name.encode("utf-8")  # no lone surrogate
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in name)
        refusals.none()
    else:
        refusals.one(str(answer.status))


async def _paced_upload(port: int, size: int, *, chunk: int, pause: float) -> bytes:
    """Upload a ``size``-byte PNG in ``chunk``-byte writes ``pause`` seconds apart; the answer's head."""
    part = b'--b\r\nContent-Disposition: form-data; name="file"; filename="slow.png"\r\nContent-Type: image/png\r\n\r\n'
    body = part + PNG + b"\x00" * (size - len(PNG)) + b"\r\n--b--\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            b"POST /agent/attachments HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + token_for(ALICE).encode() + b"\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        async with asyncio.timeout(20):
            answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
            for start in range(0, len(body), chunk):
                if answer.done():
                    break
                writer.write(body[start : start + chunk])
                await writer.drain()
                await asyncio.sleep(pause)  # the pace of a slow phone connection, not a wait for something
            return await answer
    finally:
        writer.close()


async def test_an_upload_slower_than_the_read_timeout_but_steady_is_accepted(make_client: Any) -> None:
    # 256 KiB at about 128 KiB/s takes 2 s: twice the read timeout, well within the upload's allowance.
    client = await make_client(read_timeout=1.0, attachment_max_bytes=1_000_000)
    head = await _paced_upload(client.server.port, 256 * 1024, chunk=16 * 1024, pause=0.125)
    assert head.startswith(b"HTTP/1.1 201"), head


async def test_a_trickling_upload_is_still_cut(make_client: Any, refusals: RefusalLog) -> None:
    # 64 KiB at about 1 KiB/s would take a minute: cut at the allowance (1 s + 64 KiB at 64 KiB/s).
    client = await make_client(read_timeout=1.0, attachment_max_bytes=64 * 1024)
    head = await _paced_upload(client.server.port, 60 * 1024, chunk=256, pause=0.25)
    assert head.startswith(b"HTTP/1.1 408"), head
    refusals.one("408", "request_timeout")


@pytest.mark.parametrize("bad", ["att_\x00", "x" * 7000, "att_\u202e", "att_a b", ""])
async def test_a_malformed_attachment_id_in_send_is_an_invalid_frame(make_client: Any, bad: str) -> None:
    client = await make_client()
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.send({"type": "send", "id": "f1", "text": "look", "attachments": [bad]})
    [error] = await ws.until_type("error")
    assert (error["code"], error["id"]) == ("invalid_frame", "f1")
    assert len(error["message"]) < 500  # the id is not echoed back whole
