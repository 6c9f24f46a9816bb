"""A loopback Bot API that records every request and answers as Telegram does (or as scripted).

``BotApi`` is an aiohttp app serving ``POST /bot<token>/<method>``. Each request is kept as a
``Call``: the method, the exact path, the content type, and the body (JSON, or the multipart
fields with each file's name, content type and bytes). Answers follow the Bot API's shape
(``{"ok": true, "result": ...}``); ``script(method, ...)`` queues failures for the next calls of
a method: ``(429, retry_after)``, a status, ``"drop"`` (the connection closes: a network
failure), or ``Raw(status, body)`` (exactly these bytes: a garbled answer).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

TOKEN = "123456789:AAtest-token_for_the_telegram_tests0"
BOT_ID = 123456789
BOT_USERNAME = "agora_test_bot"


@dataclass
class Upload:
    filename: str | None
    content_type: str
    data: bytes


@dataclass
class Call:
    method: str
    path: str
    content_type: str
    json: dict[str, Any] = field(default_factory=dict)
    form: dict[str, str] = field(default_factory=dict)
    files: dict[str, Upload] = field(default_factory=dict)
    status: int = 200

    @property
    def body(self) -> dict[str, Any]:
        """The JSON body, or the multipart text fields (``reply_markup`` parsed)."""
        if self.json:
            return self.json
        return {k: json.loads(v) if k == "reply_markup" else v for k, v in self.form.items()}


@dataclass(frozen=True)
class Raw:
    """An answer of exactly ``body`` with ``status`` (the method is recorded as if it ran)."""

    status: int
    body: bytes


Scripted = int | tuple[int, float] | str | Raw


@dataclass
class BotApi:
    token: str = TOKEN
    calls: list[Call] = field(default_factory=list)
    scripts: dict[str, list[Scripted]] = field(default_factory=dict)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1000)
        self.message_ids: dict[int, int] = {}
        """The message id answered to each call (by ``id(call)``)."""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=20 * 1024 * 1024)
        app.router.add_post("/bot{token}/{method}", self._handle)
        return app

    def script(self, method: str, *answers: Scripted) -> None:
        self.scripts.setdefault(method, []).extend(answers)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        call = Call(method=method, path=request.path, content_type=request.content_type)
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            async for part in reader:
                assert isinstance(part, BodyPartReader)
                data = bytes(await part.read())
                if part.filename is not None:
                    call.files[part.name or ""] = Upload(part.filename, part.headers.get("Content-Type", ""), data)
                else:
                    call.form[part.name or ""] = data.decode()
        else:
            call.json = await request.json()
        answer = self.scripts.get(method, []).pop(0) if self.scripts.get(method) else None
        async with self.changed:
            self.calls.append(call)
            self.changed.notify_all()
        if request.match_info["token"] != self.token:
            call.status = 401
            return web.json_response({"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401)
        if answer == "drop":
            call.status = 0  # no answer came back: refused before the method ran
            assert request.transport is not None
            request.transport.close()
            raise ConnectionResetError("dropped by the script")
        if isinstance(answer, Raw):
            call.status = answer.status
            return web.Response(status=answer.status, body=answer.body, content_type="application/json")
        if isinstance(answer, tuple):
            call.status = 429
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": f"Too Many Requests: retry after {answer[1]}",
                    "parameters": {"retry_after": answer[1]},
                },
                status=429,
            )
        if isinstance(answer, int):
            call.status = answer
            return web.json_response(
                {"ok": False, "error_code": answer, "description": f"Error {answer}"}, status=answer
            )
        result = self._result(call)
        if isinstance(result, dict) and "message_id" in result:
            self.message_ids[id(call)] = result["message_id"]
        return web.json_response({"ok": True, "result": result})

    def _result(self, call: Call) -> Any:
        body = call.body
        if call.method == "getMe":
            return {"id": BOT_ID, "is_bot": True, "first_name": "Agora", "username": BOT_USERNAME}
        if call.method in ("sendMessage", "sendPhoto", "sendDocument", "editMessageText"):
            message_id = int(body.get("message_id") or next(self._ids))
            chat_id = int(body["chat_id"])
            return {
                "message_id": message_id,
                "date": 1_700_000_000,
                "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
                "from": {"id": BOT_ID, "is_bot": True, "first_name": "Agora", "username": BOT_USERNAME},
                "text": body.get("text", ""),
            }
        return True

    # -- reading what was sent -------------------------------------------------------------------

    def of(self, *methods: str, ok: bool = True) -> list[Call]:
        return [c for c in self.calls if c.method in methods and (not ok or c.status == 200)]

    def texts(self) -> list[str]:
        return [str(c.json["text"]) for c in self.of("sendMessage")]

    async def wait_for(self, predicate: Callable[[BotApi], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: predicate(self))
