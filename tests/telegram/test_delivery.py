"""Delivery to Telegram: 429 / 5xx retried and sent once, refusals recorded, components, long text, typing."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

import pytest
from pydantic import BaseModel

from channels.telegram import PREFIX, TELEGRAM_CAPABILITIES
from gateway import Agent, PushState, RetryPolicy, Runtime
from gateway._push._mdv2 import MAX_TELEGRAM_TEXT, split_telegram, telegram_length
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import ToolContext, ToolPresentation, UiCapabilities, define_tool

from .botapi import TOKEN, BotApi, Raw
from .conftest import FAST_PUSH, Gateway, MakeGateway, refund_runtime, text_runtime, thread_of
from .updates import ALICE_ID, callback, message


async def hello(gw: Gateway) -> None:
    await gw.send(message("hi"))
    await gw.bot.wait_for(lambda b: len(b.texts()) >= 1)
    await gw.settle()


async def failures(gw: Gateway) -> list[dict[str, Any]]:
    return await PushState(gw.runtime.store, PREFIX).failures(thread_of(ALICE_ID))


async def test_a_429_is_retried_after_retry_after_and_sent_once(make_gateway: MakeGateway, any_store: Store) -> None:
    bot = BotApi()
    bot.script("sendMessage", (429, 1))
    gw = await make_gateway(text_runtime("Hello.", store=any_store), bot=bot)
    started = asyncio.get_running_loop().time()
    await hello(gw)
    tries = gw.bot.of("sendMessage", ok=False)
    assert [t.status for t in tries] == [429, 200]
    assert tries[0].json == tries[1].json == {"chat_id": ALICE_ID, "text": "Hello\\.", "parse_mode": "MarkdownV2"}
    assert asyncio.get_running_loop().time() - started >= 1.0  # retry_after honoured
    assert gw.bot.texts() == ["Hello\\."] and await failures(gw) == []


async def test_a_long_retry_after_waits_for_the_next_round_and_is_not_lost(make_gateway: MakeGateway) -> None:
    bot = BotApi()
    bot.script("sendMessage", (429, 1), 502, 500)
    gw = await make_gateway(text_runtime("Hello."), bot=bot)
    gw.channel.delivery.port.retry = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.5)  # type: ignore[attr-defined]
    await hello(gw)
    assert [t.status for t in gw.bot.of("sendMessage", ok=False)] == [429, 502, 500, 200]
    assert gw.bot.texts() == ["Hello\\."] and await failures(gw) == []


async def test_a_network_failure_is_retried(make_gateway: MakeGateway) -> None:
    bot = BotApi()
    bot.script("sendMessage", "drop")
    gw = await make_gateway(text_runtime("Hello."), bot=bot)
    await hello(gw)
    assert gw.bot.texts() == ["Hello\\."] and len(gw.bot.of("sendMessage", ok=False)) == 2


@pytest.mark.parametrize(
    "garbled",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"ok": true, "result": {"message_id": "abc"}}',
        b'{"ok": true, "result": {"message_id": {"id": 1}}}',
    ],
    ids=["nested", "text-message-id", "object-message-id"],
)
async def test_a_garbled_answer_to_a_card_never_sends_it_twice(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture, garbled: bytes
) -> None:
    caplog.set_level(logging.INFO)
    bot = BotApi()
    bot.script("sendMessage", Raw(200, garbled))
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed), bot=bot)
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    await gw.settle()
    # Settled at once, so no later round can send the card again: an unreadable answer is recorded
    # as refused (it may have gone), one with an unusable message_id counts as sent.
    recorded = [(f["reason"], f["event"]) for f in await failures(gw)]
    assert recorded == ([("refused", "approval-requested")] if garbled.startswith(b"[") else [])
    cards = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    assert len(cards) == 1
    assert not [r.getMessage() for r in caplog.records if r.exc_info]


async def test_a_refusal_is_recorded_and_the_next_message_still_goes(make_gateway: MakeGateway) -> None:
    bot = BotApi()
    bot.script("sendMessage", 400)
    gw = await make_gateway(text_runtime("First.", "Second."), bot=bot)
    await gw.send(message("hi"))
    await gw.bot.wait_for(lambda b: bool(b.of("sendMessage", ok=False)))
    await gw.settle()
    assert gw.bot.texts() == [] and len(gw.bot.of("sendMessage", ok=False)) == 1
    [failure] = await failures(gw)
    assert failure["reason"] == "refused" and failure["provider_code"] == 400
    assert failure["message"]["payload"]["text"] == "First\\."
    await gw.send(message("again"))
    await gw.bot.wait_for(lambda b: b.texts() == ["Second\\."])


async def test_long_text_is_split_at_4096_after_conversion(make_gateway: MakeGateway) -> None:
    paragraph = "This sentence (about coffee) ends with a dot. " * 40
    text = "## Summary\n\n" + "\n\n".join([paragraph.strip()] * 6)
    gw = await make_gateway(text_runtime(text))
    await hello(gw)
    texts = gw.bot.texts()
    assert len(texts) == 3 and all(telegram_length(t) <= MAX_TELEGRAM_TEXT for t in texts)
    assert texts == split_telegram(text)
    assert texts[0].startswith("*Summary*\n\nThis sentence \\(about coffee\\) ends with a dot\\.")


async def test_a_component_goes_as_a_photo_upload(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    push = replace(FAST_PUSH, capabilities=TELEGRAM_CAPABILITIES)
    gw = await make_gateway(refund_runtime(executed), push=push)
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    approve = card.json["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    await gw.send(callback(approve, message_id=gw.bot.message_ids[id(card)]))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts(), timeout=60)
    await gw.settle()
    [photo] = gw.bot.of("sendPhoto")
    assert photo.path == f"/bot{TOKEN}/sendPhoto" and photo.content_type == "multipart/form-data"
    assert photo.form == {
        "chat_id": str(ALICE_ID),
        "caption": "Refund receipt for order 1042",
        "parse_mode": "MarkdownV2",
    }
    upload = photo.files["photo"]
    assert upload.content_type == "image/png" and upload.filename and upload.filename.endswith(".png")
    assert upload.data.startswith(b"\x89PNG\r\n\x1a\n") and len(upload.data) > 1000
    methods = [c.method for c in gw.bot.calls if c.method not in ("sendChatAction", "setWebhook")]
    assert methods[-3:] == ["sendMessage", "sendPhoto", "sendMessage"]  # ✓ done, the receipt, the reply


class WaitInput(BaseModel):
    seconds: float


async def test_typing_while_the_run_works(make_gateway: MakeGateway, monkeypatch: Any) -> None:
    import channels.telegram._port as port_module

    monkeypatch.setattr(port_module, "TYPING_EVERY", 0.05)
    release = asyncio.Event()

    @define_tool(
        name="wait_a_bit",
        description="Wait.",
        input=WaitInput,
        presentation=ToolPresentation(label="Wait", running="Waiting", done="Waited"),
    )
    async def wait_a_bit(input: WaitInput, ctx: ToolContext) -> dict[str, Any]:
        async with asyncio.timeout(10):
            await release.wait()
        return {"ok": True}

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="wait_a_bit", args={"seconds": 1})]), ScriptStep(text="Done.")]
    )
    gw = await make_gateway(Runtime(tools=[wait_a_bit], agents=[Agent(name="assistant")], model=model))
    await gw.send(message("wait"))
    await gw.bot.wait_for(lambda b: len(b.of("sendChatAction")) >= 3)
    release.set()
    await gw.bot.wait_for(lambda b: "Done\\." in b.texts())
    await gw.settle()
    typing = gw.bot.of("sendChatAction")
    assert all(c.json == {"chat_id": ALICE_ID, "action": "typing"} for c in typing)
    assert all(c.path == f"/bot{TOKEN}/sendChatAction" for c in typing)
    # settle() waited for the typing task too: it saw the run end and stopped for good.
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("agora-tg-typing-")]


class InvoiceInput(BaseModel):
    order_id: str


async def test_a_document_goes_as_a_pdf_upload(make_gateway: MakeGateway) -> None:
    @define_tool(
        name="invoice",
        description="The invoice of an order.",
        input=InvoiceInput,
        presentation=ToolPresentation(label="Invoice", running="Writing the invoice", done="Invoice ready"),
    )
    async def invoice(input: InvoiceInput, ctx: ToolContext) -> dict[str, Any]:
        ctx.emit_ui(
            "Document",
            {"title": f"Invoice {input.order_id}", "sections": [{"heading": "Items", "text": "Burr grinder"}]},
            fallback_text=f"Invoice for order {input.order_id}",
        )
        return {"order_id": input.order_id}

    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="invoice", args={"order_id": "1042"})]), ScriptStep(text="Here.")]
    )
    push = replace(FAST_PUSH, capabilities=UiCapabilities(formats=["pdf", "text"]))
    gw = await make_gateway(Runtime(tools=[invoice], agents=[Agent(name="assistant")], model=model), push=push)
    await gw.send(message("invoice for 1042"))
    await gw.bot.wait_for(lambda b: "Here\\." in b.texts(), timeout=60)
    [document] = gw.bot.of("sendDocument")
    assert document.path == f"/bot{TOKEN}/sendDocument" and document.content_type == "multipart/form-data"
    assert document.form == {"chat_id": str(ALICE_ID), "caption": "Invoice for order 1042", "parse_mode": "MarkdownV2"}
    upload = document.files["document"]
    assert upload.content_type == "application/pdf" and (upload.filename or "").endswith(".pdf")
    assert upload.data.startswith(b"%PDF-")
