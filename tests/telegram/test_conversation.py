"""Whole conversations over Telegram: updates in through the webhook, Bot API calls out, all recorded."""

from __future__ import annotations

from typing import Any

from gateway import sign_actor_token
from gateway.stores import Store
from tools import Actor

from .botapi import TOKEN
from .conftest import SECRET, Gateway, MakeGateway, refund_runtime, thread_of
from .updates import ALICE_ID, callback, message


def keyboard(gw: Gateway) -> list[dict[str, Any]]:
    [card] = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    buttons: list[dict[str, Any]] = card.json["reply_markup"]["inline_keyboard"][0]
    return buttons


async def test_a_refund_approved_by_a_button_tap(make_gateway: MakeGateway, any_store: Store) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed, store=any_store))
    await gw.send(message("refund order 1042"))

    # The card: a MarkdownV2 message with the approve (verb) and reject buttons.
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    assert card.path == f"/bot{TOKEN}/sendMessage" and card.content_type == "application/json"
    assert card.json["chat_id"] == ALICE_ID and card.json["parse_mode"] == "MarkdownV2"
    assert (
        card.json["text"]
        == "*Refund order 1042?*\nBack to the card \\(4242\\)\\.\nTap a button, or reply *yes* or *no*\\."
    )
    approve, reject, always = keyboard(gw)
    assert approve["text"] == "Refund" and reject["text"] == "Reject" and always["text"] == "Always"
    assert approve["callback_data"].startswith("agora:") and reject["callback_data"].startswith("agora:")
    assert len(approve["callback_data"].encode()) <= 64 and approve["callback_data"] != reject["callback_data"]
    [pending] = await gw.runtime.pending_approvals(thread_of(ALICE_ID))
    assert pending.tool_call_id not in approve["callback_data"]  # opaque
    assert executed == []

    # The tap: answered at once (no text: it decided), the tool runs, the card is edited, the reply.
    await gw.send(callback(approve["callback_data"], message_id=gw.bot.message_ids[id(card)]))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.settle()
    assert executed == ["1042"]
    [answer] = gw.bot.of("answerCallbackQuery")
    assert answer.path == f"/bot{TOKEN}/answerCallbackQuery"
    assert answer.json == {"callback_query_id": answer.json["callback_query_id"]}  # no text: it decided
    [edit] = gw.bot.of("editMessageText")
    assert edit.path == f"/bot{TOKEN}/editMessageText"
    assert edit.json == {
        "chat_id": ALICE_ID,
        "message_id": gw.bot.message_ids[id(card)],
        "text": "*Refund order 1042?*\nBack to the card \\(4242\\)\\.\n\n✅ Approved",
        "parse_mode": "MarkdownV2",
        "reply_markup": {"inline_keyboard": []},
    }
    methods = [c.method for c in gw.bot.calls if c.method not in ("sendChatAction", "setWebhook")]
    assert methods == ["sendMessage", "answerCallbackQuery", "editMessageText"] + ["sendMessage"] * 3
    assert gw.bot.texts()[1:] == ["✓ Refunded order 1042", "Refund receipt for order 1042", "Refund done\\."]


async def test_an_approval_asked_on_telegram_decided_on_the_web(make_gateway: MakeGateway, any_store: Store) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed, store=any_store))
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [pending] = await gw.runtime.pending_approvals(thread_of(ALICE_ID))

    token = sign_actor_token(Actor(id=f"telegram:{ALICE_ID}", roles=["member"]), SECRET)
    response = await gw.client.post(
        "/agent/tool-call/approve",
        json={"tool_call_id": pending.tool_call_id},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status == 200, await response.text()
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.settle()
    assert executed == ["1042"]
    [edit] = gw.bot.of("editMessageText")
    assert edit.json["text"].endswith("\n\nApproved \\(on the web\\)\\.")
    assert edit.json["reply_markup"] == {"inline_keyboard": []}
    assert gw.bot.of("answerCallbackQuery") == []
