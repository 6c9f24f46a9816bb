"""Staff approvers on Telegram: a refund that needs role ``staff`` goes to a staff user's chat, with buttons."""

from __future__ import annotations

from gateway import ApprovalPolicy, ApprovalRule

from .conftest import MakeGateway, refund_runtime, thread_of
from .updates import ALICE_ID, BRUNA_ID, callback, message

STAFF_ID = 5559999
"""A staff member's Telegram user id: ``AGORA_TELEGRAM_ROLES="5559999=staff"``."""


async def test_a_staff_user_gets_the_card_and_their_tap_completes_the_customers_run(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    runtime = refund_runtime(executed)
    runtime.approval_policy = ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="staff")})
    gw = await make_gateway(runtime, options={"roles": {str(STAFF_ID): ["staff"], str(BRUNA_ID): ["support"]}})
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    await gw.settle()

    # The customer: one line, no keyboard. The staff member: the card with its buttons, and who asked.
    to_alice = [c.json for c in gw.bot.of("sendMessage") if c.json["chat_id"] == ALICE_ID]
    assert [c.get("reply_markup") for c in to_alice] == [None]
    assert to_alice[0]["text"] == "Waiting for a person at Assistant to approve: Refund order 1042?"
    [card] = [c for c in gw.bot.of("sendMessage") if c.json["chat_id"] == STAFF_ID]
    assert card.json["text"] == (
        "*Refund order 1042?*\nBack to the card \\(4242\\)\\.\nAsked by telegram:5550001 \\(telegram\\)\\.\n"
        "Tap a button, or reply *yes* or *no*\\."
    )
    approve, reject = card.json["reply_markup"]["inline_keyboard"][0]
    message_id = gw.bot.message_ids[id(card)]

    # Another user taps the staff's button (a support role): not theirs, nothing decided.
    await gw.send(callback(approve["callback_data"], sender=BRUNA_ID, chat_id=STAFF_ID, message_id=message_id))
    await gw.settle()
    answers = gw.bot.of("answerCallbackQuery")
    assert answers[-1].json["text"] == "That button is not for you."
    assert executed == []
    [pending] = await runtime.pending_approvals(thread_of(ALICE_ID))

    # The staff member taps: the run completes once, the staff card shows it, the customer is told.
    await gw.send(callback(approve["callback_data"], sender=STAFF_ID, message_id=message_id))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.settle()
    assert executed == ["1042"]
    [edit] = gw.bot.of("editMessageText")
    assert edit.json["chat_id"] == STAFF_ID and edit.json["message_id"] == message_id
    assert edit.json["text"].endswith("✅ Approved") and edit.json["reply_markup"] == {"inline_keyboard": []}
    to_alice = [c.json["text"] for c in gw.bot.of("sendMessage") if c.json["chat_id"] == ALICE_ID]
    assert to_alice[1:3] == ["A person at Assistant approved: Refund order 1042?", "✓ Refunded order 1042"]
    assert to_alice[-1] == "Refund done\\."
    assert [r.status for r in await runtime.thread_runs(thread_of(ALICE_ID))] == ["completed"]
    assert pending.approver == "staff"


async def test_the_always_button_approves_and_remembers(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    runtime = refund_runtime(executed)
    gw = await make_gateway(runtime)
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    approve, reject, always = card.json["reply_markup"]["inline_keyboard"][0]
    assert always["text"] == "Always" and always["callback_data"].startswith("agora:")
    await gw.send(callback(always["callback_data"], message_id=gw.bot.message_ids[id(card)]))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.settle()
    [settled] = await runtime.store.thread_approvals(thread_of(ALICE_ID))
    assert (settled.status, settled.remember, executed) == ("approved", True, ["1042"])
    assert await runtime.store.is_remembered(thread_of(ALICE_ID), "refund_order")
    assert approve["callback_data"] != reject["callback_data"]


async def test_a_staff_user_who_replies_yes_as_the_card_says_decides_it(make_gateway: MakeGateway) -> None:
    # The staff card says "Tap a button, or reply yes or no": the reply, typed in the staff
    # member's own chat, decides what waits for them (not a message to the agent in that chat).
    executed: list[str] = []
    runtime = refund_runtime(executed)
    runtime.approval_policy = ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="staff")})
    gw = await make_gateway(runtime, options={"roles": {str(STAFF_ID): ["staff"]}})
    await gw.send(message("refund order 1042"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    await gw.settle()
    [card] = [c.json for c in gw.bot.of("sendMessage") if c.json["chat_id"] == STAFF_ID]
    assert card["text"].endswith("Tap a button, or reply *yes* or *no*\\.")

    await gw.send(message("yes", sender=STAFF_ID))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.settle()
    assert executed == ["1042"]
    [settled] = await runtime.store.thread_approvals(thread_of(ALICE_ID))
    assert (settled.status, settled.decided_by, settled.via) == ("approved", f"telegram:{STAFF_ID}", "telegram")
    assert await runtime.thread_runs(thread_of(STAFF_ID)) == []  # no turn in the staff's own chat
