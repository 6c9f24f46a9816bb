"""``WebhookGate``: the secret token, the size limit and the body, before anything is recorded."""

from __future__ import annotations

import io
import json
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import SecretStr

from channels.telegram import MAX_UPDATE_BYTES, SECRET_HEADER, TelegramWebhookError, WebhookGate

from .updates import message

SECRET = "s3cret_-token"


async def gate_client(aiohttp_client: Any) -> tuple[TestClient[web.Request, web.Application], list[Any]]:
    gate = WebhookGate(SecretStr(SECRET))
    seen: list[Any] = []

    async def handler(request: web.Request) -> web.Response:
        try:
            update = await gate.read(request)
        except TelegramWebhookError as exc:
            return web.json_response({"code": exc.code}, status=exc.status)
        seen.append(update)
        return web.json_response({"kind": update.kind})

    app = web.Application(client_max_size=4 * MAX_UPDATE_BYTES)
    app.router.add_post("/hook", handler)
    return await aiohttp_client(app), seen


async def test_secret_checked_before_anything(aiohttp_client: Any) -> None:
    client, seen = await gate_client(aiohttp_client)
    body = json.dumps(message("hi"))
    for headers in ({}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: SECRET + "x"}, {SECRET_HEADER: ""}):
        response = await client.post("/hook", data=body, headers=headers)
        assert response.status == 403 and (await response.json())["code"] == "forbidden"
    big = io.BytesIO(b"x" * (MAX_UPDATE_BYTES + 10))
    assert (await client.post("/hook", data=big, headers={SECRET_HEADER: "nope"})).status == 403
    assert seen == []
    ok = await client.post("/hook", data=body, headers={SECRET_HEADER: SECRET})
    assert ok.status == 200 and (await ok.json()) == {"kind": "message"}


async def test_body_limits_and_shape(aiohttp_client: Any) -> None:
    client, seen = await gate_client(aiohttp_client)
    headers = {SECRET_HEADER: SECRET}
    big = io.BytesIO(json.dumps(message("x" * (MAX_UPDATE_BYTES + 1))).encode())
    assert (await client.post("/hook", data=big, headers=headers)).status == 413

    async def chunks() -> Any:
        for _ in range(20):
            yield b" " * (64 * 1024)

    assert (await client.post("/hook", data=chunks(), headers=headers)).status == 413
    for bad in (b"not json", b'{"update_id": NaN}', b"\xff\xfe", b"[1, 2]", b'{"message": {}}'):
        response = await client.post("/hook", data=bad, headers=headers)
        assert response.status == 400, bad
    assert seen == []
