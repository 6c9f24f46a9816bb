"""Bad input on the Telegram webhook: refused or ignored with one log line, nothing recorded or decided."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from gateway.stores import MemoryStore, Store
from tests.conftest import RefusalLog

from .conftest import Gateway, MakeGateway, refund_runtime, text_runtime, thread_of
from .updates import ALICE_ID, BRUNA_ID, GROUP_ID, callback, command, message

IGNORED = ("aiohttp.access", "aiohttp.server", "channels.whatsapp", "gateway.push", "channels.telegram.api")


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> RefusalLog:
    caplog.set_level(logging.INFO)
    return RefusalLog(caplog, route="/channels/telegram", ignore=IGNORED)


async def nothing_happened(gw: Gateway, chat_id: int = ALICE_ID) -> None:
    await gw.settle()
    assert [c.method for c in gw.bot.calls if c.method != "setWebhook"] == []
    assert await gw.runtime.last_seq(thread_of(chat_id)) == 0


async def test_a_missing_or_forged_secret_is_403_and_nothing_is_recorded(
    make_gateway: MakeGateway, refusals: RefusalLog
) -> None:
    gw = await make_gateway(text_runtime("Hello."))
    update = message("hello")
    refusals.caplog.clear()
    for secret in (None, "", "forged", "hook_secret-1234"):
        response = await gw.post(update, secret=secret)
        assert response.status == 403
        assert (await response.json())["code"] == "forbidden"
        refusals.one(403, "forbidden", "X-Telegram-Bot-Api-Secret-Token")
    await nothing_happened(gw)
    # The update_id was not claimed by the forgeries: the real delivery of it is served.
    await gw.send(update)
    await gw.bot.wait_for(lambda b: b.texts() == ["Hello\\."])


async def test_a_replayed_update_is_ignored(make_gateway: MakeGateway, any_store: Store) -> None:
    gw = await make_gateway(text_runtime("Hello.", "Again.", store=any_store))
    update = message("hello")
    await gw.send(update)
    await gw.bot.wait_for(lambda b: b.texts() == ["Hello\\."])
    await gw.settle()
    await gw.send(update)
    await gw.settle()
    assert gw.bot.texts() == ["Hello\\."]
    assert len(await gw.runtime.thread_runs(thread_of(ALICE_ID))) == 1


async def test_a_replay_to_another_process_is_ignored_too(make_gateway: MakeGateway) -> None:
    store = MemoryStore()
    first = await make_gateway(text_runtime("Hello.", store=store))
    second = await make_gateway(text_runtime("Hello.", store=store))
    update = message("hello")
    responses = await asyncio.gather(first.post(update), second.post(update))
    assert [r.status for r in responses] == [200, 200]
    await first.bot.wait_for(lambda b: len(b.texts()) + len(second.bot.texts()) >= 1)
    await first.settle()
    await second.settle()
    assert first.bot.texts() + second.bot.texts() == ["Hello\\."]
    assert len(await first.runtime.thread_runs(thread_of(ALICE_ID))) == 1
    await store.aclose()


async def test_non_json_oversized_and_malformed_bodies(make_gateway: MakeGateway, refusals: RefusalLog) -> None:
    gw = await make_gateway(text_runtime("Hello."))
    refusals.caplog.clear()
    response = await gw.post(b"not json")
    assert response.status == 400 and (await response.json())["code"] == "invalid_json"
    refusals.one(400, "invalid_json")
    response = await gw.post(b'{"message": {"text": "no update_id"}}')
    assert response.status == 400 and (await response.json())["code"] == "invalid_update"
    refusals.one(400, "invalid_update")
    big = io.BytesIO(json.dumps(message("x" * (1024 * 1024))).encode())
    response = await gw.client.post(
        "/channels/telegram", data=big, headers={"X-Telegram-Bot-Api-Secret-Token": "hook_secret-123"}
    )
    assert response.status == 413
    refusals.one(413, "payload_too_large")
    await nothing_happened(gw)


async def test_unknown_update_kinds_are_answered_200_and_logged(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    gw = await make_gateway(text_runtime("Hello."))
    caplog.set_level(logging.INFO, "channels.telegram")
    edited = {"update_id": 7001, "edited_message": message("hi")["message"]}
    response = await gw.post(edited)
    assert response.status == 200 and await response.json() == {}
    lines = [r.getMessage() for r in caplog.records if r.name == "channels.telegram"]
    assert lines == ["Telegram update 7001 of kind edited_message: ignored"]
    await nothing_happened(gw)


async def refund_card(gw: Gateway, chat_id: int = ALICE_ID) -> tuple[str, str, int]:
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = [c for c in gw.bot.of("sendMessage") if "reply_markup" in c.json]
    assert card.json["chat_id"] == chat_id
    approve, reject, _always = card.json["reply_markup"]["inline_keyboard"][0]
    return approve["callback_data"], reject["callback_data"], gw.bot.message_ids[id(card)]


def answers(gw: Gateway) -> list[str | None]:
    return [c.json.get("text") for c in gw.bot.of("answerCallbackQuery")]


async def test_a_tap_from_another_chat_or_user_decides_nothing(make_gateway: MakeGateway, any_store: Store) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed, store=any_store))
    await gw.send(message("refund order 1042"))
    approve, _, card_id = await refund_card(gw)
    # Bruna taps in her own chat (a forwarded card), then in Alice's chat with Alice's card.
    await gw.send(callback(approve, sender=BRUNA_ID, message_id=card_id))
    await gw.send(callback(approve, sender=BRUNA_ID, chat_id=ALICE_ID, message_id=card_id))
    await gw.bot.wait_for(lambda b: len(b.of("answerCallbackQuery")) == 2)
    await gw.settle()
    assert answers(gw) == ["That button is not for you.", "That button is not for you."]
    assert len(await gw.runtime.pending_approvals(thread_of(ALICE_ID))) == 1
    assert executed == [] and gw.bot.of("editMessageText") == []
    # The button still works for Alice.
    await gw.send(callback(approve, message_id=card_id))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    assert executed == ["1042"]


async def test_a_used_button_and_a_stale_one_say_so(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed))
    await gw.send(message("refund order 1042"))
    approve, reject, card_id = await refund_card(gw)
    await gw.send(callback(approve, message_id=card_id))
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    await gw.send(callback(approve, message_id=card_id))
    await gw.send(callback(reject, message_id=card_id))
    await gw.send(callback("agora:no-such-token-at-all", message_id=card_id))
    await gw.send(callback("someone-else:payload", message_id=card_id))
    await gw.bot.wait_for(lambda b: len(b.of("answerCallbackQuery")) == 5)
    await gw.settle()
    assert answers(gw) == [
        None,
        "That was already decided.",
        "That was already decided.",
        "That approval has expired.",
        "That approval has expired.",
    ]
    assert executed == ["1042"] and len(gw.bot.of("editMessageText")) == 1


async def test_an_expired_approval_edits_its_card_and_its_button_says_expired(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed, ttl=0.3))
    await gw.send(message("refund order 1042"))
    approve, _, card_id = await refund_card(gw)
    await gw.bot.wait_for(lambda b: bool(b.of("editMessageText")))
    [edit] = gw.bot.of("editMessageText")
    assert edit.json["message_id"] == card_id and edit.json["text"].endswith("\n\n⌛ Expired")
    assert edit.json["reply_markup"] == {"inline_keyboard": []}
    await gw.send(callback(approve, message_id=card_id))
    await gw.bot.wait_for(lambda b: bool(b.of("answerCallbackQuery")))
    assert answers(gw) == ["That approval has expired."]
    assert executed == []


async def test_unknown_users_are_refused_once_an_hour(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(text_runtime("Hello."), options={"allow_unknown": False, "roles": {str(BRUNA_ID): ["x"]}})
    await gw.send(message("hello"))
    await gw.send(message("hello again"))
    await gw.bot.wait_for(lambda b: len(b.texts()) >= 1)
    await gw.settle()
    assert gw.bot.texts() == ["Sorry, you are not set up to talk to the assistant\\."]
    assert await gw.runtime.last_seq(thread_of(ALICE_ID)) == 0


async def test_a_channel_without_credentials_answers_503(make_gateway: MakeGateway, refusals: RefusalLog) -> None:
    gw = await make_gateway(text_runtime("Hello."), options={"bot_token": None})
    refusals.caplog.clear()
    response = await gw.post(message("hello"))
    assert response.status == 503 and (await response.json())["code"] == "telegram_not_configured"
    refusals.one(503, "telegram_not_configured", "AGORA_TELEGRAM_BOT_TOKEN")


async def test_a_group_message_not_for_the_bot_is_ignored(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(text_runtime("Hello, group."))
    await gw.send(message("refund order 1042", chat_id=GROUP_ID))
    await gw.settle()
    assert [c.method for c in gw.bot.calls if c.method != "setWebhook"] == []
    await gw.send(command("help", chat_id=GROUP_ID))
    await gw.bot.wait_for(lambda b: bool(b.texts()))
    [sent] = gw.bot.of("sendMessage")
    assert sent.json == {"chat_id": GROUP_ID, "text": "Hello, group\\.", "parse_mode": "MarkdownV2"}
    runs = await gw.runtime.thread_runs(thread_of(GROUP_ID, ALICE_ID))
    assert [r.turn.text for r in runs] == ["/help"]
