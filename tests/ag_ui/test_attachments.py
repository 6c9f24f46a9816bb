"""AG-UI input content: inline image and document parts of the user message (``ag_ui.core``
``ImagePart`` / ``DocumentPart`` with a ``data`` source) become the turn's attachments."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import DocumentPart, ImagePart, InputContentDataSource, RunAgentInput, TextPart, UserMessage

from gateway import Agent, Runtime, create_app
from gateway.models import OpenAIModel
from tests.attachment_parts import PDF, PNG, Seen, image_part, photo_tool, script_photo_run
from tests.conftest import RefusalLog
from tests.models.fake_openai import FakeOpenAI

from .conftest import new_id, post, run, settings


def body(*parts: Any) -> dict[str, Any]:
    message = UserMessage(id=new_id("msg"), content=list(parts))
    run_input = RunAgentInput(thread_id=new_id("t"), run_id=new_id("run"), messages=[message])
    dumped: dict[str, Any] = run_input.model_dump(by_alias=True, mode="json")
    return dumped


def data(raw: bytes, mime: str) -> InputContentDataSource:
    return InputContentDataSource(type="data", value=base64.b64encode(raw).decode(), mime_type=mime)


@pytest.fixture
async def seen_client(
    aiohttp_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> AsyncIterator[tuple[Any, Seen]]:
    seen: Seen = []
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model)
    client = await aiohttp_client(create_app(settings(), runtime=runtime))
    yield client, seen
    await runtime.aclose()


async def test_an_inline_image_reaches_the_tool_and_the_model(seen_client: tuple[Any, Seen], fake: FakeOpenAI) -> None:
    client, seen = seen_client
    script_photo_run(fake)
    frames = await run(client, body(TextPart(text="Which part is this?"), ImagePart(source=data(PNG, "image/png"))))
    assert frames[-1].type == "RUN_FINISHED"
    assert seen == [("", "image/png", len(PNG), PNG)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": "Which part is this?"},
        image_part(PNG, "image/png"),
    ]


async def test_a_document_whose_bytes_are_not_its_type_is_415(
    seen_client: tuple[Any, Seen], fake: FakeOpenAI, refusal_log: RefusalLog
) -> None:
    client, _ = seen_client
    response = await post(client, body(DocumentPart(source=data(PNG, "application/pdf"))))
    assert response.status == 415
    assert (await response.json())["code"] == "attachment_type"
    refusal_log.one("415", "attachment_type")
    assert fake.requests == []


async def test_a_pdf_document_reaches_the_tool_and_is_named_to_the_model(
    seen_client: tuple[Any, Seen], fake: FakeOpenAI
) -> None:
    client, seen = seen_client
    script_photo_run(fake)
    document = DocumentPart(source=data(PDF, "application/pdf"), metadata={"filename": "invoice.pdf"})
    await run(client, body(document))
    assert seen == [("invoice.pdf", "application/pdf", len(PDF), PDF)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": f"[attached file: invoice.pdf (application/pdf, {len(PDF)} bytes)]"}
    ]


async def test_a_rate_limited_message_keeps_none_of_its_files(
    aiohttp_client: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    from gateway import SERVICES

    runtime = Runtime(tools=[], agents=[Agent(name="default")], model=openai_model)
    app = create_app(settings(turn_burst=1, turn_rate_per_minute=1), runtime=runtime)
    client = await aiohttp_client(app)
    try:
        script_photo_run(fake)
        first = await post(client, body(TextPart(text="one"), ImagePart(source=data(PNG, "image/png"))))
        await first.read()
        assert first.status == 200
        backend = app[SERVICES].attachments.backend
        kept = len(backend._items)
        refused = await post(client, body(TextPart(text="two"), ImagePart(source=data(PNG, "image/png"))))
        assert refused.status == 429
        assert len(backend._items) == kept, "the refused message's file was not kept"
    finally:
        await runtime.aclose()
