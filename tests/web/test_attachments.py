"""Attachments through the widget's path: ``POST /agent/attachments``, then ``send {attachments}``.

A photo uploaded over HTTP reaches a tool as bytes (``ctx.attachments[0].read()``) and the model
request as an ``image_url`` part (the OpenAI-compatible fake server's recorded body); refusals
(413 before the body is read, 415, another actor's id, an unknown one) each log one line, and
erasing the thread erases its files.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

import tools
from gateway import Agent, AttachmentNotFoundError, Runtime
from gateway._services import SERVICES
from gateway.events import Attachment
from gateway.models import OpenAIModel
from tests.attachment_parts import PDF, PNG, Seen, image_part, photo_tool, script_photo_run
from tests.conftest import RefusalLog
from tests.models.fake_openai import FakeOpenAI, finish, role, text

from .conftest import ALICE, BOB, connect, token_for

Client = Any


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Iterator[RefusalLog]:
    caplog.set_level(logging.INFO)
    caplog.clear()
    yield RefusalLog(caplog, route="/agent/attachments", ignore=("gateway.runtime", "gateway.threads"))


async def upload(
    client: Client, data: bytes, *, name: str = "photo.png", mime: str = "image/png", actor: tools.Actor = ALICE
) -> aiohttp.ClientResponse:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type=mime)
    response: aiohttp.ClientResponse = await client.post(
        "/agent/attachments", data=form, headers={"Authorization": f"Bearer {token_for(actor)}"}
    )
    return response


async def test_a_photo_uploaded_then_sent_reaches_the_tool_and_the_model(
    make_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model)
    client = await make_client(runtime)

    answer = await upload(client, PNG, name="receipt.png")
    assert answer.status == 201
    body = await answer.json()
    assert body == {"id": body["id"], "name": "receipt.png", "mime": "image/png", "size": len(PNG)}

    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    frames = await ws.turn("What is on this receipt?", attachments=[body["id"]])
    assert frames[-1]["status"] == "completed"

    assert seen == [("receipt.png", "image/png", len(PNG), PNG)]
    first = fake.requests[0].body["messages"]
    assert first[-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is on this receipt?"},
            image_part(PNG, "image/png"),
        ],
    }
    # The history keeps the turn's files: the next step shows the model the image again.
    assert fake.requests[1].body["messages"][1] == first[-1]


async def test_a_pdf_is_named_to_the_model_not_inlined(
    make_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    fake.script(fake.sse(role(), text("Got it."), finish()))
    client = await make_client(Runtime(agents=[Agent(name="default")], model=openai_model))
    body = await (await upload(client, PDF, name="invoice.pdf", mime="application/pdf")).json()
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.turn("", attachments=[body["id"]])
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": f"[attached file: invoice.pdf (application/pdf, {len(PDF)} bytes)]"}
    ]


async def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(
    make_client: Any, refusals: RefusalLog
) -> None:
    client = await make_client(attachment_max_bytes=100_000)
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    try:
        # A 1 GB body is announced; 10 bytes of it are sent, and the answer comes anyway.
        writer.write(
            b"POST /agent/attachments HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + token_for(ALICE).encode() + b"\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000000000\r\n\r\n--b\r\nContent"
        )
        await writer.drain()
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
            rest = await reader.read()  # the server closes the connection: nothing more is read
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"Connection: close" in head
    assert b"attachment_too_large" in rest
    refusals.one("413", "attachment_too_large")


async def test_a_streamed_body_is_stopped_at_the_limit(make_client: Any, refusals: RefusalLog) -> None:
    client = await make_client(attachment_max_bytes=100_000)
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    head = b""
    sent = 0
    try:
        writer.write(
            b"POST /agent/attachments HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + token_for(ALICE).encode() + b"\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        part = (
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\nContent-Type: image/png\r\n\r\n'
        )
        first = part + PNG
        writer.write(b"%x\r\n%s\r\n" % (len(first), first))
        # Keep streaming (never ending the body) until the answer arrives: the server stops at the limit.
        chunk = b"\x00" * 16_384
        async with asyncio.timeout(10):
            answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
            while not answer.done() and sent < 50_000_000:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                try:
                    await asyncio.wait_for(writer.drain(), 1)
                except (ConnectionError, TimeoutError):
                    break
            head = await answer
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.1 413"), head
    assert sent < 5_000_000  # the answer came long before a body of any size ended
    refusals.one("413", "attachment_too_large")


@pytest.mark.parametrize(
    ("data", "mime", "said"),
    [
        (b"just some text, not a picture", "text/plain", "not accepted"),
        (PDF, "image/png", "says it is image/png but its bytes are application/pdf"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/png", "not accepted"),
    ],
)
async def test_a_type_outside_the_list_or_bytes_not_matching_are_415(
    make_client: Any, refusals: RefusalLog, data: bytes, mime: str, said: str
) -> None:
    client = await make_client()
    answer = await upload(client, data, mime=mime)
    assert answer.status == 415
    body = await answer.json()
    assert body["code"] == "attachment_type" and said in body["message"]
    refusals.one("415", "attachment_type")


async def test_a_type_left_out_of_the_settings_is_refused(make_client: Any, refusals: RefusalLog) -> None:
    client = await make_client(attachment_types="application/pdf")
    assert (await upload(client, PNG)).status == 415
    refusals.one("415", "attachment_type")
    assert (await upload(client, PDF, mime="application/pdf")).status == 201


async def test_another_actors_attachment_in_send_is_403_and_an_unknown_one_404(
    make_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    client = await make_client(Runtime(agents=[Agent(name="default")], model=openai_model))
    bobs = await (await upload(client, PNG, actor=BOB)).json()
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.send({"type": "send", "id": "f1", "text": "look", "attachments": [bobs["id"]]})
    [error] = await ws.until_type("error")
    assert (error["code"], error["id"]) == ("attachment_forbidden", "f1")
    await ws.send({"type": "send", "id": "f2", "text": "look", "attachments": ["att_" + "0" * 32]})
    [error] = await ws.until_type("error")
    assert (error["code"], error["id"]) == ("attachment_not_found", "f2")
    assert fake.requests == []  # no run started


async def test_erasing_the_thread_erases_its_attachments(
    make_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    fake.script(fake.sse(role(), text("Nice."), finish()))
    client = await make_client(Runtime(agents=[Agent(name="default")], model=openai_model))
    body = await (await upload(client, PNG)).json()
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello()
    await ws.turn("look", attachments=[body["id"]])
    attachments = client.app[SERVICES].attachments
    kept = Attachment.model_validate(body)
    assert await attachments.read(kept) == PNG

    erased = await client.delete(
        f"/agent/threads/{welcome['thread_id']}", headers={"Authorization": f"Bearer {token_for(ALICE)}"}
    )
    assert erased.status == 204
    with pytest.raises(AttachmentNotFoundError):
        await attachments.read(kept)
    with pytest.raises(AttachmentNotFoundError):
        await attachments.resolve(ALICE, [kept.id])
