"""``TelegramApi`` against a recording Bot API: paths, JSON and multipart bodies, and error mapping."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from channels.telegram import InputFile, TelegramApi
from gateway import PushSendError

from .botapi import TOKEN, BotApi, Raw


@pytest.fixture
async def bot() -> AsyncIterator[tuple[BotApi, TelegramApi]]:
    recorder = BotApi()
    server = TestServer(recorder.app())
    await server.start_server()
    api = TelegramApi(SecretStr(TOKEN), api_base=str(server.make_url("")).rstrip("/"))
    yield recorder, api
    await api.aclose()
    await server.close()


async def test_json_call_posts_to_the_method_path(bot: tuple[BotApi, TelegramApi]) -> None:
    recorder, api = bot
    result = await api.call("sendMessage", {"chat_id": 42, "text": "hi", "parse_mode": "MarkdownV2"})
    assert result["chat"]["id"] == 42 and isinstance(result["message_id"], int)
    [call] = recorder.calls
    assert call.path == f"/bot{TOKEN}/sendMessage"
    assert call.content_type == "application/json"
    assert call.json == {"chat_id": 42, "text": "hi", "parse_mode": "MarkdownV2"}


async def test_upload_is_multipart_with_a_named_typed_file(bot: tuple[BotApi, TelegramApi]) -> None:
    recorder, api = bot
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 100
    await api.upload(
        "sendPhoto",
        InputFile(data=png, filename="receipt.png", mime="image/png"),
        {"chat_id": "42", "caption": "Receipt", "parse_mode": "MarkdownV2"},
    )
    [call] = recorder.calls
    assert call.path == f"/bot{TOKEN}/sendPhoto" and call.content_type == "multipart/form-data"
    assert call.form == {"chat_id": "42", "caption": "Receipt", "parse_mode": "MarkdownV2"}
    assert call.files["photo"].filename == "receipt.png"
    assert call.files["photo"].content_type == "image/png"
    assert call.files["photo"].data == png


@pytest.mark.parametrize(
    ("answer", "retryable", "retry_after", "code"),
    [((429, 7), True, 7.0, 429), (500, True, None, 500), (502, True, None, 502), (400, False, None, 400)],
)
async def test_errors_map_to_retryable_or_not(
    bot: tuple[BotApi, TelegramApi],
    answer: int | tuple[int, float],
    retryable: bool,
    retry_after: float | None,
    code: int,
) -> None:
    recorder, api = bot
    recorder.script("sendMessage", answer)
    with pytest.raises(PushSendError) as caught:
        await api.call("sendMessage", {"chat_id": 1, "text": "x"})
    assert caught.value.retryable is retryable
    assert caught.value.retry_after == retry_after
    assert caught.value.provider_code == code and caught.value.http_status == code


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("answer", "retryable"),
    [
        (Raw(200, DEEP), False),  # it may have been sent: never sent again
        (Raw(500, DEEP), True),
        (Raw(429, b'{"ok": false, "error_code": 429, "parameters": {"retry_after": 1' + b"0" * 400 + b"}}"), True),
        (Raw(429, b'{"ok": false, "error_code": 429, "parameters": {"retry_after": Infinity}}'), True),
        (Raw(200, b'{"ok": true, "result": NaN}'), False),
    ],
    ids=["nested-200", "nested-500", "huge-retry-after", "infinite-retry-after", "nan-result"],
)
async def test_a_garbled_answer_is_a_send_error(bot: tuple[BotApi, TelegramApi], answer: Raw, retryable: bool) -> None:
    recorder, api = bot
    recorder.script("sendMessage", answer)
    with pytest.raises(PushSendError) as caught:
        await api.call("sendMessage", {"chat_id": 1, "text": "x"})
    assert caught.value.retryable is retryable and caught.value.http_status == answer.status
    assert caught.value.retry_after is None


async def test_forbidden_is_final(bot: tuple[BotApi, TelegramApi]) -> None:
    recorder, api = bot
    recorder.script("sendMessage", 403)
    with pytest.raises(PushSendError) as caught:
        await api.call("sendMessage", {"chat_id": 1, "text": "x"})
    assert not caught.value.retryable and "403" in str(caught.value)


async def test_network_failure_is_retryable_and_never_shows_the_token(
    bot: tuple[BotApi, TelegramApi], caplog: pytest.LogCaptureFixture
) -> None:
    recorder, api = bot
    recorder.script("sendMessage", "drop")
    caplog.set_level(logging.DEBUG)
    with pytest.raises(PushSendError) as caught:
        await api.call("sendMessage", {"chat_id": 1, "text": "x"})
    assert caught.value.retryable and caught.value.http_status is None
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    secret = TOKEN.partition(":")[2]
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("aiohttp.")]  # the recorder's own
    assert secret not in str(caught.value) and not any(secret in line for line in ours)


async def test_unreachable_host_is_retryable() -> None:
    api = TelegramApi(SecretStr(TOKEN), api_base="http://127.0.0.1:9", timeout=2)
    try:
        with pytest.raises(PushSendError) as caught:
            await api.call("getMe")
        assert caught.value.retryable and TOKEN not in str(caught.value)
    finally:
        await api.aclose()


async def test_a_given_session_is_left_open(bot: tuple[BotApi, TelegramApi]) -> None:
    recorder, _ = bot
    async with aiohttp.ClientSession() as session:
        api = TelegramApi(SecretStr(TOKEN), api_base="http://127.0.0.1:9", session=session)
        await api.aclose()
        assert not session.closed
