"""A2A file parts: inline bytes become the turn's attachments (sniffed, size-limited); a file by
URL is never fetched (it stays a link in the text)."""

from __future__ import annotations

import base64
from typing import Any

from a2a.types import Part, SendMessageConfiguration, SendMessageRequest

from gateway import Agent, Runtime
from gateway._services import SERVICES
from gateway.models import OpenAIModel
from tests.attachment_parts import PDF, PNG, Seen, image_part, photo_tool, script_photo_run
from tests.conftest import RefusalLog
from tests.models.fake_openai import FakeOpenAI, finish, role, text

from .conftest import BOB, collect, user_message


async def test_an_inline_image_reaches_the_tool_and_the_model(
    make_gateway: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    gw = await make_gateway(Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model))
    client = await gw.sdk(streaming=True)
    message = user_message(
        Part(text="What is this?"),
        Part(raw=PNG, media_type="image/png", filename="part.png"),
        Part(url="http://127.0.0.1:9/never-fetched.png", filename="link.png", media_type="image/png"),
    )
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration())
    await collect(client.send_message(request))

    assert seen == [("part.png", "image/png", len(PNG), PNG)]
    content = fake.requests[0].body["messages"][-1]["content"]
    assert content == [
        {"type": "text", "text": "What is this?\n[link.png](http://127.0.0.1:9/never-fetched.png)"},
        image_part(PNG, "image/png"),
    ]


async def test_bytes_that_are_not_their_type_are_invalid_params(
    make_gateway: Any, fake: FakeOpenAI, openai_model: OpenAIModel, refusal_log: RefusalLog
) -> None:
    gw = await make_gateway(Runtime(agents=[Agent(name="default")], model=openai_model))
    raw = base64.b64encode(PDF).decode()
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"raw": raw, "mediaType": "image/png"}]}
    answer = await gw.rpc("SendMessage", {"message": message})
    assert answer["error"]["code"] == -32602
    assert "bytes are application/pdf" in answer["error"]["message"]
    assert fake.requests == []
    refusal_log.one("-32602")


async def test_a_file_sent_into_another_actors_context_is_refused_and_not_kept(
    make_gateway: Any, fake: FakeOpenAI, openai_model: OpenAIModel, refusal_log: RefusalLog
) -> None:
    fake.script(fake.sse(role(), text("Hello."), finish()))
    gw = await make_gateway(Runtime(agents=[Agent(name="default")], model=openai_model))
    alices = {"messageId": "m-a", "role": "ROLE_USER", "contextId": "ctx-alice", "parts": [{"text": "hi"}]}
    assert "error" not in await gw.rpc(
        "SendMessage", {"message": alices, "configuration": {"returnImmediately": False}}
    )
    refusal_log.caplog.clear()

    raw = base64.b64encode(PNG).decode()
    bobs = {
        "messageId": "m-b",
        "role": "ROLE_USER",
        "contextId": "ctx-alice",
        "parts": [{"raw": raw, "mediaType": "image/png"}],
    }
    answer = await gw.rpc("SendMessage", {"message": bobs}, actor=BOB)
    assert "error" in answer, answer
    refusal_log.one(str(answer["error"]["code"]))
    # Nothing of Bob's was kept under Alice's conversation (erasing it finds only her own files: none).
    assert await gw.app[SERVICES].attachments.backend.forget_thread("ctx-alice") == 0
