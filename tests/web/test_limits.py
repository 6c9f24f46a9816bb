"""Behind a trusted proxy: connections per forwarded address (the last X-Forwarded-For hop).

Without a proxy the limit counts TCP connections where ``serve`` accepts them
(``tests/cli/test_slow_clients.py``); behind one every connection is the proxy's, so the app
counts what it can see per client: requests in flight, a web socket being one for its life.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gateway import SERVICES

from .conftest import Socket

CLIENT = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7"}
"""The first hop is whatever the client claimed; the last is what our proxy saw."""
OTHER = {"X-Forwarded-For": "203.0.113.8"}


async def test_web_sockets_behind_a_proxy_count_per_forwarded_address(make_client: Any) -> None:
    client = await make_client(trust_forwarded=True, max_connections_per_address=2)
    sockets = [Socket(await client.ws_connect("/agent/ws", headers=CLIENT)) for _ in range(2)]
    for ws in sockets:
        await ws.hello()
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/agent/ws", headers={"X-Forwarded-For": "203.0.113.7"})
    assert refused.value.status == 429
    answer = await client.get("/healthz", headers=CLIENT)  # any request from that client, while it holds two
    assert answer.status == 429 and (await answer.json())["code"] == "too_many_connections"
    assert (await client.get("/healthz", headers=OTHER)).status == 200  # another client behind the same proxy
    metrics = client.app[SERVICES].metrics.render().decode()
    assert 'agora_http_requests_total{route="/healthz",status="429"} 1.0' in metrics

    await sockets.pop().ws.close()
    async with asyncio.timeout(5):  # its place is free once the server has seen the close
        while (await client.get("/healthz", headers=CLIENT)).status == 429:
            await asyncio.sleep(0.02)  # a bounded poll of the server's view
    again = Socket(await client.ws_connect("/agent/ws", headers=CLIENT))
    assert (await again.hello())["type"] == "welcome"
    for ws in (*sockets, again):
        await ws.ws.close()


async def test_a_refusal_is_logged_by_its_route_template_never_its_token(make_client: Any, json_log: Any) -> None:
    client = await make_client(trust_forwarded=True, max_connections_per_address=1)
    token = await client.app[SERVICES].media.put(b"\x89PNG...", "image/png")
    socket = Socket(await client.ws_connect("/agent/ws", headers=CLIENT))
    await socket.hello()
    answer = await client.get(f"/media/{token}", headers=CLIENT)
    assert answer.status == 429
    [line] = [line for line in json_log.lines("gateway.http") if line["message"].startswith("refused 429")]
    assert line["message"].startswith("refused 429 too_many_connections GET /media/{token}: Too many connections")
    assert (line["method"], line["path"], line["status"], line["code"]) == (
        "GET",
        "/media/{token}",
        429,
        "too_many_connections",
    )
    assert token not in json_log.text
    await socket.ws.close()
