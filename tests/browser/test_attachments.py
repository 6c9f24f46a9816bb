"""Attachments in Chromium: a file chosen with the attach button, or dropped on the panel, is
uploaded over HTTP, shown as a chip, then sent with the message; the tool reads its bytes."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest, UserMessage
from gateway.stores import MemoryStore
from tests.attachment_parts import PNG, Seen, photo_tool

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, record_sent

pytestmark = BROWSER_TESTS


def _runtime(seen: Seen) -> Runtime:
    def script(request: ModelRequest, index: int) -> ScriptStep:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return ScriptStep(tool_calls=[ToolCallRequest(name="look_at_photo", args={})])
        return ScriptStep(text="A fine photo.")

    return Runtime(
        tools=[photo_tool(seen)], agents=[Agent(name="assistant")], model=ScriptedModel(script), store=MemoryStore()
    )


async def test_a_file_from_the_attach_button_reaches_the_tool(
    make_gateway: MakeGateway, open_page: OpenPage, tmp_path: Path
) -> None:
    seen: Seen = []
    url = await make_gateway(_runtime(seen))
    page = await open_page()
    sent = record_sent(page)
    await page.goto(url)
    chat = Chat(page)
    await chat.ready()
    photo = tmp_path / "receipt.png"
    photo.write_bytes(PNG)

    async with page.expect_file_chooser() as chooser:
        await chat.root.locator(".ac-attach").click()
    await (await chooser.value).set_files(str(photo))
    chip = chat.root.locator("ul.ac-files .ac-file")
    await expect(chip).to_have_attribute("data-state", "ready")
    await expect(chip.locator(".ac-file__name")).to_have_text("receipt.png")
    await expect(chip.locator("img.ac-file__thumb")).to_have_count(1)

    await chat.say("what is on this receipt?")
    await chat.turn_ends(0)
    await expect(chat.assistant_texts.last).to_have_text("A fine photo.")
    assert seen == [("receipt.png", "image/png", len(PNG), PNG)]
    [send] = [frame for frame in sent if frame["type"] == "send"]
    assert send["text"] == "what is on this receipt?" and len(send["attachments"]) == 1
    await expect(chat.root.locator("ul.ac-files")).to_be_hidden()  # the chips went with the message
    await expect(chat.user_messages.last.locator(".ac-file")).to_have_text("receipt.png")


async def test_a_dropped_file_is_uploaded_and_sent_without_text(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    seen: Seen = []
    page = await open_page(await make_gateway(_runtime(seen)))
    chat = Chat(page)
    await chat.ready()
    transfer = await page.evaluate_handle(
        """bytes => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([new Uint8Array(bytes)], "dropped.png", { type: "image/png" }));
            return transfer;
        }""",
        list(PNG),
    )
    panel = chat.root.locator(".ac")
    await panel.dispatch_event("dragover", {"dataTransfer": transfer})
    await panel.dispatch_event("drop", {"dataTransfer": transfer})
    await expect(chat.root.locator("ul.ac-files .ac-file")).to_have_attribute("data-state", "ready")
    await expect(chat.send_button).to_be_enabled()
    await chat.send_button.click()
    await chat.turn_ends(0)
    assert seen == [("dropped.png", "image/png", len(PNG), PNG)]
