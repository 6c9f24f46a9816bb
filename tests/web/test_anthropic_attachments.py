"""A photo uploaded through the widget's path reaches ``AnthropicModel`` as a base64 ``image`` block."""

from __future__ import annotations

import base64
from typing import Any

from gateway import Agent, Runtime
from gateway.models import AnthropicModel
from tests.attachment_parts import PNG, Seen, photo_tool
from tests.models.fake_anthropic import FakeAnthropic, delta, end, message, start, stop, tool_start

from .conftest import ALICE, connect, token_for
from .test_attachments import upload


async def test_a_photo_uploaded_then_sent_reaches_claude_as_an_image_block(
    make_client: Any, fake_anthropic: FakeAnthropic, anthropic_model: AnthropicModel
) -> None:
    seen: Seen = []
    fake_anthropic.script(
        fake_anthropic.sse(start(9), tool_start(0, "toolu_p", "look_at_photo"), stop(0), delta("tool_use", 3), end()),
        fake_anthropic.sse(*message("A fine receipt.")),
    )
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=anthropic_model)
    client = await make_client(runtime)
    body = await (await upload(client, PNG, name="receipt.png")).json()

    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    frames = await ws.turn("What is on this receipt?", attachments=[body["id"]])
    assert frames[-1]["status"] == "completed"

    assert seen == [("receipt.png", "image/png", len(PNG), PNG)]
    image = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    turn = {
        "role": "user",
        "content": [{"type": "text", "text": "What is on this receipt?"}, {"type": "image", "source": image}],
    }
    first, second = fake_anthropic.requests
    assert first.body["messages"] == [turn]
    # The history keeps the turn's files: the next step shows the model the image again.
    assert second.body["messages"][0] == turn
