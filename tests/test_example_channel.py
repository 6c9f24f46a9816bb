"""The minimal channel of docs/channels.md (examples/relay_channel.py) works as written.

A refund asked through the relay and approved by a tap, over real HTTP both ways: the gateway on
an aiohttp test server, and a loopback outbox that checks every post's signature and records it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from channels.web import WebChannel
from gateway import Agent, PushSendError, Runtime, Settings, create_app
from gateway.demo import DemoModel, demo_tools
from gateway.stores import MemoryStore

SECRET = b"relay-test-secret"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "relay_channel.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("relay_channel_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def signed(message: dict[str, Any], secret: bytes = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(message).encode()
    mac = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return body, {"X-Relay-Signature": mac, "Content-Type": "application/json"}


class Outbox:
    """The relay's other end: refuses unsigned posts, records the signed ones."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.changed = asyncio.Condition()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get("X-Relay-Signature", ""), expected):
            return web.Response(status=403)
        async with self.changed:
            self.received.append(json.loads(body))
            self.changed.notify_all()
        return web.Response(status=204)

    async def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool]) -> None:
        async with asyncio.timeout(15), self.changed:
            await self.changed.wait_for(lambda: predicate(self.received))


@pytest.fixture
async def relay(aiohttp_client: Any) -> AsyncIterator[tuple[TestClient[web.Request, web.Application], Outbox, Runtime]]:
    example = load_example()
    outbox = Outbox()
    outbox_app = web.Application()
    outbox_app.router.add_post("/outbox", outbox.handle)
    server = TestServer(outbox_app)
    await server.start_server()
    runtime = Runtime(
        tools=demo_tools(SECRET),
        agents=[Agent(name="assistant", instructions="demo")],
        model=DemoModel(),
        store=MemoryStore(),
    )
    settings = Settings(_env_file=None, secret="x" * 32, turn_burst=100)  # type: ignore[call-arg]
    channel = example.RelayChannel(str(server.make_url("/outbox")), SECRET)
    app = create_app(settings, runtime=runtime, channels=[WebChannel(), channel])
    client: TestClient[web.Request, web.Application] = await aiohttp_client(app)
    yield client, outbox, runtime
    await server.close()
    await runtime.aclose()


async def test_a_refund_asked_through_the_relay_is_approved_by_a_tap(relay: Any) -> None:
    client, outbox, runtime = relay
    body, headers = signed({"id": "m-1", "from": "ana", "text": "refund order 1042"})
    answer = await client.post("/channels/relay", data=body, headers=headers)
    assert answer.status == 202
    await outbox.wait_for(lambda got: any(m.get("buttons") for m in got))
    card = next(m for m in outbox.received if m.get("buttons"))
    assert card["to"] == "ana" and "1042" in card["text"]
    approve, reject = (b["payload"] for b in card["buttons"])
    assert approve.startswith("agora:") and approve != reject

    # Bob replays Ana's button: not his, and nothing is decided.
    body, headers = signed({"id": "m-2", "from": "bob", "button": approve})
    assert (await client.post("/channels/relay", data=body, headers=headers)).status == 202
    await outbox.wait_for(lambda got: any(m["to"] == "bob" for m in got))
    assert [m["text"] for m in outbox.received if m["to"] == "bob"] == ["That button is not for you."]
    thread = f"relay-{hashlib.sha256(b'ana').hexdigest()[:24]}"
    assert len(await runtime.pending_approvals(thread)) == 1

    body, headers = signed({"id": "m-3", "from": "ana", "button": approve})
    assert (await client.post("/channels/relay", data=body, headers=headers)).status == 202
    await outbox.wait_for(lambda got: any(m.get("text", "").startswith("✓") for m in got))
    await outbox.wait_for(lambda got: any("Done" in m.get("text", "") for m in got))
    assert await runtime.pending_approvals(thread) == []

    # The same tap again (a replayed id, then a new id): once seen, then "already decided".
    before = len(outbox.received)
    assert await (await client.post("/channels/relay", data=body, headers=headers)).text() == "seen"
    body, headers = signed({"id": "m-4", "from": "ana", "button": approve})
    await client.post("/channels/relay", data=body, headers=headers)
    await outbox.wait_for(lambda got: len(got) > before)
    assert outbox.received[-1]["text"] == "That was already decided."


async def test_a_forged_or_malformed_post_changes_nothing(relay: Any) -> None:
    client, outbox, runtime = relay
    body, headers = signed({"id": "m-9", "from": "ana", "text": "refund order 1042"}, secret=b"wrong")
    forged = await client.post("/channels/relay", data=body, headers=headers)
    assert forged.status == 403
    assert await forged.json() == {"code": "http_error", "message": "bad signature"}  # the channel's own words
    body, headers = signed({"id": "m-9", "from": "ana", "text": "refund order 1042"})
    assert (await client.post("/channels/relay", data=body[:-1], headers=headers)).status == 403
    raw = b"{not json"
    mac = "sha256=" + hmac.new(SECRET, raw, hashlib.sha256).hexdigest()
    assert (await client.post("/channels/relay", data=raw, headers={"X-Relay-Signature": mac})).status == 400
    # The forged id was not claimed: the genuine message with it still goes through.
    assert (await client.post("/channels/relay", data=body, headers=headers)).status == 202
    await outbox.wait_for(lambda got: any(m.get("buttons") for m in got))
    assert all(m["to"] == "ana" for m in outbox.received)


async def test_a_garbled_signature_or_sender_is_a_4xx_and_claims_nothing(relay: Any) -> None:
    client, outbox, runtime = relay
    # A signature header that is not ASCII (sent as raw bytes, as a hostile client can).
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    writer.write(b"POST /channels/relay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-Relay-Signature: \xff\r\n\r\n{}")
    await writer.drain()
    status_line = (await reader.readline()).decode()
    writer.close()
    assert status_line.split()[1] == "403"
    # A sender no actor can be made of (a control character, an id too long), or none: 400.
    for sender in ("an\na", "x" * 100_000, ""):
        body, headers = signed({"id": "m-5", "from": sender, "text": "hi"})
        assert (await client.post("/channels/relay", data=body, headers=headers)).status == 400
    # The refused id was not claimed: the genuine message with it goes through.
    body, headers = signed({"id": "m-5", "from": "ana", "text": "hi"})
    assert (await client.post("/channels/relay", data=body, headers=headers)).status == 202
    await outbox.wait_for(lambda got: any(m["to"] == "ana" for m in got))


async def test_an_outbox_that_times_out_is_a_retryable_send_error() -> None:
    example = load_example()

    async def stall(request: web.Request) -> web.Response:
        await asyncio.Event().wait()  # never answers: the client's 0.2 s timeout is what is tested
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/outbox", stall)
    server = TestServer(app)
    await server.start_server()
    port = example.RelayPort(str(server.make_url("/outbox")), SECRET)
    port.http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2))
    try:
        with pytest.raises(PushSendError) as caught:  # the delivery tries it again, a round later
            await port.send(None, example.RelayPart(to="ana", text="hi"))
        assert caught.value.retryable
    finally:
        await port.http.close()
        await server.close()


def test_the_docs_give_the_example_s_true_length() -> None:
    lines = len(EXAMPLE.read_text(encoding="utf-8").splitlines())
    root = EXAMPLE.parents[1]
    for doc in (root / "docs" / "channels.md", root / "README.md"):
        assert f"{lines} lines" in " ".join(doc.read_text(encoding="utf-8").split()), doc
