"""Options from ``AGORA_TELEGRAM_*``, start-up (``getMe``, ``setWebhook``), languages and groups end to end."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from channels.telegram import TelegramOptions
from tools import UiCapabilities

from .botapi import BOT_USERNAME, TOKEN
from .conftest import HOOK_SECRET, PUBLIC, MakeGateway, refund_runtime, text_runtime, thread_of
from .updates import ALICE_ID, BRUNA_ID, GROUP_ID, bot_message, callback, mention, message


def test_options_read_their_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("AGORA_TELEGRAM_WEBHOOK_SECRET", HOOK_SECRET)
    monkeypatch.setenv("AGORA_TELEGRAM_ROLES", "123=admin|ops, 456=member")
    monkeypatch.setenv("AGORA_TELEGRAM_DEFAULT_ROLES", "guest,reader")
    monkeypatch.setenv("AGORA_TELEGRAM_LANGUAGES", "123=pt-BR")
    monkeypatch.setenv("AGORA_TELEGRAM_ALLOW_UNKNOWN", "false")
    monkeypatch.setenv("AGORA_TELEGRAM_BOT_USERNAME", "@Some_Bot")
    options = TelegramOptions(_env_file=None)  # type: ignore[call-arg]
    assert options.bot_token is not None and options.bot_token.get_secret_value() == TOKEN
    assert options.roles == {"123": ["admin", "ops"], "456": ["member"]}
    assert options.default_roles == ["guest", "reader"] and options.languages == {"123": ["pt-BR"]}
    assert options.allow_unknown is False and options.bot_username == "Some_Bot"
    assert options.disabled_reason is None and options.bot_id == 123456789
    assert TOKEN not in repr(options) and HOOK_SECRET not in repr(options)


def test_options_say_what_is_missing_and_refuse_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGORA_TELEGRAM_BOT_TOKEN", "AGORA_TELEGRAM_WEBHOOK_SECRET"):
        monkeypatch.delenv(name, raising=False)
    off = TelegramOptions(_env_file=None)  # type: ignore[call-arg]
    assert off.disabled_reason == (
        "Telegram is not configured: set AGORA_TELEGRAM_BOT_TOKEN and AGORA_TELEGRAM_WEBHOOK_SECRET"
    )
    for bad in ("has space", "x" * 257, "é", ""):
        with pytest.raises(ValidationError):
            TelegramOptions(_env_file=None, webhook_secret=bad)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        TelegramOptions(_env_file=None, bot_token="not-a-token")  # type: ignore[call-arg]


async def test_start_learns_the_name_and_sets_the_webhook(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(text_runtime("Hi, group."), options={"bot_username": None})
    [me] = gw.bot.of("getMe")
    assert me.path == f"/bot{TOKEN}/getMe"
    [hook] = gw.bot.of("setWebhook")
    assert hook.path == f"/bot{TOKEN}/setWebhook"
    assert hook.json == {
        "url": f"{PUBLIC}/channels/telegram",
        "secret_token": HOOK_SECRET,
        "allowed_updates": ["message", "callback_query"],
    }
    assert gw.channel.bot_username == BOT_USERNAME
    await gw.send(mention("hello", chat_id=GROUP_ID))
    await gw.bot.wait_for(lambda b: b.texts() == ["Hi, group\\."])
    [run] = await gw.runtime.thread_runs(thread_of(GROUP_ID, ALICE_ID))
    assert run.turn.text == "hello" and run.turn.channel == "telegram"


async def test_no_public_url_no_webhook(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(text_runtime("x"), public_base_url=None)
    assert gw.bot.of("setWebhook") == []


async def test_portuguese_speakers_read_portuguese(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(refund_runtime([]))
    await gw.send(message("reembolsar pedido 1042", language="pt-br"))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = gw.bot.of("sendMessage")
    assert card.json["text"].endswith("\nToque num botão, ou responda *sim* ou *não*\\.")
    assert [b["text"] for b in card.json["reply_markup"]["inline_keyboard"][0]] == ["Refund", "Recusar", "Sempre"]


async def test_in_a_group_another_member_cannot_decide(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    gw = await make_gateway(refund_runtime(executed))
    await gw.send(mention("refund order 1042", chat_id=GROUP_ID))
    await gw.bot.wait_for(lambda b: any("reply_markup" in c.json for c in b.of("sendMessage")))
    [card] = gw.bot.of("sendMessage")
    assert card.json["chat_id"] == GROUP_ID
    approve = card.json["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    card_id = gw.bot.message_ids[id(card)]
    await gw.send(callback(approve, sender=BRUNA_ID, chat_id=GROUP_ID, message_id=card_id))
    await gw.bot.wait_for(lambda b: bool(b.of("answerCallbackQuery")))
    assert gw.bot.of("answerCallbackQuery")[0].json["text"] == "That button is not for you."
    # A reply to the bot's card is addressed to it: Alice types "yes".
    reply: dict[str, Any] = message("yes", chat_id=GROUP_ID, reply_to=bot_message(GROUP_ID, card_id))
    await gw.send(reply)
    await gw.bot.wait_for(lambda b: "Refund done\\." in b.texts())
    assert executed == ["1042"]
    [edit] = gw.bot.of("editMessageText")
    assert edit.json["chat_id"] == GROUP_ID and edit.json["text"].endswith("\n\n✅ Approved")


def test_capabilities() -> None:
    from channels.telegram import TELEGRAM_CAPABILITIES, TelegramChannel

    assert TelegramChannel.capabilities == TELEGRAM_CAPABILITIES == UiCapabilities(formats=["image", "pdf", "text"])
