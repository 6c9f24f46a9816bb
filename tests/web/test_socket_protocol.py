"""The web socket's protocol: reconnect and replay, heartbeat, and every kind of bad input."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from aiohttp import WSMsgType
from pydantic import BaseModel

from gateway import SERVICES, ApprovalPolicy, ApprovalRule, Runtime
from gateway.events import TextDeltaEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Batch, MemoryStore
from tools import Actor, ConfirmTemplate, ToolPresentation, define_tool

from .conftest import ALICE, BOB, SECRET, connect, token_for, until_no_sockets

OLGA = Actor(id="olga", roles=["ops"])


class KeyInput(BaseModel):
    key: str


def gated_runtime(gate: asyncio.Event, started: asyncio.Event) -> Runtime:
    @define_tool(name="slow_read", description="Waits for the test.", input=KeyInput)
    async def slow_read(input: KeyInput, ctx: Any) -> dict[str, str]:
        started.set()
        await gate.wait()
        ctx.emit_ui("Callout", {"tone": "info", "text": f"read {input.key}"})
        return {"key": input.key}

    @define_tool(
        name="purge",
        description="Purge a key.",
        input=KeyInput,
        kind="action",
        presentation=ToolPresentation(confirm=ConfirmTemplate(title="Purge {key}?", verb="Purge")),
    )
    async def purge(input: KeyInput, ctx: Any) -> dict[str, str]:
        return {"purged": input.key}

    def script(request: Any, index: int) -> ScriptStep:
        text = request.last_user_text
        if request.step == 0 and text.startswith("read"):
            return ScriptStep(tool_calls=[ToolCallRequest(name="slow_read", args={"key": "k1"})])
        if request.step == 0 and text.startswith("purge"):
            return ScriptStep(tool_calls=[ToolCallRequest(name="purge", args={"key": text.split()[-1]})])
        return ScriptStep(deltas=["All ", "done."])

    return Runtime(tools=[slow_read, purge], model=ScriptedModel(script), store=MemoryStore())


async def test_reconnect_mid_run_replays_exactly_the_missed_events(make_client: Any) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    runtime = gated_runtime(gate, started)
    client = await make_client(runtime)
    first = await connect(client, token=token_for(ALICE))
    thread_id = (await first.hello())["thread_id"]
    await first.send({"type": "send", "text": "read it"})
    seen = await first.until_type("tool-started")
    last_seq = max(f["seq"] for f in seen if "seq" in f)
    await first.ws.close()
    async with asyncio.timeout(5):
        await started.wait()
    gate.set()  # the run goes on while nobody is connected
    run_id = next(f["run_id"] for f in seen if f["type"] == "ack")
    assert await runtime.wait(run_id, timeout=5) == "completed"

    second = await connect(client, token=token_for(ALICE))
    welcome = await second.hello(thread_id=thread_id, after_seq=last_seq)
    assert welcome["thread_id"] == thread_id
    replayed = await second.until_type("run-finished")
    stored = [e async for e in runtime.events(thread_id, last_seq)]
    assert [(f["seq"], f["type"]) for f in replayed] == [(e.seq, e.type) for e in stored]
    assert [f["type"] for f in replayed] == [
        "ui",
        "tool-completed",
        "text-delta",
        "text-delta",
        "text-end",
        "run-finished",
    ]
    assert replayed[0]["form"] == "html" and "read k1" in replayed[0]["html"]
    await second.ws.close()


async def test_bad_frames_get_error_frames_and_the_socket_stays_usable(make_client: Any) -> None:
    client = await make_client(ws_frame_limit=2048)
    ws = await connect(client, token=token_for(ALICE))
    await ws.ws.send_str("{not json")
    assert (await ws.recv())["code"] == "bad_frame"
    await ws.ws.send_str("[1, 2]")
    assert (await ws.recv())["code"] == "bad_frame"
    await ws.ws.send_str("[" * 1000 + "]" * 1000)  # deeper than any frame: an error frame, not a closed socket
    assert (await ws.recv())["code"] == "bad_frame"
    await ws.send({"type": "teleport", "id": "x1"})
    assert await ws.recv() == {
        "type": "error",
        "id": "x1",
        "code": "unknown_frame",
        "message": "Unknown frame type 'teleport'",
    }
    await ws.send({"type": "send", "text": "hi", "id": "x2"})
    assert (await ws.recv())["code"] == "hello_required"
    await ws.ws.send_bytes(b"\x00\x01")
    assert (await ws.recv())["code"] == "binary_not_supported"
    await ws.send({"type": "hello", "ui_capabilities": {"formats": ["html"], "bogus": 1}, "id": "h0"})
    error = await ws.recv()
    assert (error["code"], error["id"]) == ("invalid_frame", "h0") and "bogus" in error["message"]
    await ws.send({"type": "hello", "ui_capabilities": {"components": [{"name": "A"}, {"name": "A"}]}})
    assert (await ws.recv())["code"] == "invalid_frame"
    await ws.send({"type": "hello", "thread_id": "bad id with spaces"})
    assert (await ws.recv())["code"] == "invalid_frame"
    assert (await ws.hello())["type"] == "welcome"
    await ws.send({"type": "hello"})
    assert (await ws.recv())["code"] == "already_welcomed"
    await ws.send({"type": "send", "text": "x" * 3000})
    assert (await ws.recv())["code"] == "frame_too_large"
    await ws.ws.send_str(json.dumps({"type": "send", "text": "€" * 800}, ensure_ascii=False))  # 2,400+ bytes
    assert (await ws.recv())["code"] == "frame_too_large"
    await ws.send({"type": "send", "text": ""})
    assert (await ws.recv())["code"] == "invalid_frame"
    await ws.send({"type": "send", "text": " \n\t "})  # only whitespace: nothing to answer
    assert (await ws.recv())["code"] == "invalid_frame"
    await ws.send({"type": "approve", "tool_call_id": "tc_nope", "id": "x3"})
    assert await ws.recv() == {
        "type": "error",
        "id": "x3",
        "code": "approval_not_found",
        "message": "No approval 'tc_nope'",
    }
    await ws.send({"type": "cancel", "run_id": "run_nope"})
    assert (await ws.recv())["code"] == "run_not_found"
    # Still usable: a real turn goes through.
    frames = await ws.turn("hello there")
    assert frames[-1]["status"] == "completed"
    await ws.ws.close()


async def test_a_frame_beyond_the_hard_limit_closes_the_socket(make_client: Any) -> None:
    client = await make_client(ws_frame_limit=1024)
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.ws.send_str(json.dumps({"type": "send", "text": "x" * 10_000}))
    message = await ws.closed()
    assert message.type is WSMsgType.CLOSE and message.data == 1009


async def test_decisions_on_someone_elses_call_and_replays_change_nothing(make_client: Any) -> None:
    runtime = gated_runtime(asyncio.Event(), asyncio.Event())
    client = await make_client(runtime)
    alice = await connect(client, token=token_for(ALICE))
    thread_id = (await alice.hello())["thread_id"]
    frames = await alice.turn("purge k9")
    request = next(f for f in frames if f["type"] == "approval-requested")
    bob = await connect(client, token=token_for(BOB))
    await bob.hello()
    await bob.send({"type": "approve", "tool_call_id": request["tool_call_id"]})
    assert (await bob.recv())["code"] == "approval_forbidden"
    assert (await runtime.store.get_approval(request["tool_call_id"])).status == "pending"
    assert len([e async for e in runtime.events(thread_id)]) == frames[-1]["seq"]
    await alice.send({"type": "approve", "tool_call_id": request["tool_call_id"]})
    await alice.until(lambda f: f.get("type") == "run-finished")
    await alice.send({"type": "reject", "tool_call_id": request["tool_call_id"], "id": "r"})
    error = await alice.recv()
    assert (error["code"], error["id"]) == ("approval_settled", "r")
    assert (await runtime.store.get_approval(request["tool_call_id"])).status == "approved"
    for peer in (alice, bob):
        await peer.ws.close()


async def test_identity_failures_close_the_socket_with_a_code(make_client: Any) -> None:
    client = await make_client(anonymous=False)
    ws = await connect(client)
    await ws.send({"type": "hello"})
    assert (await ws.recv())["code"] == "unauthenticated"
    assert (await ws.closed()).data == 4401

    ws = await connect(client)
    await ws.send({"type": "hello", "token": "not.a.token"})
    assert (await ws.recv())["code"] == "invalid_token"
    assert (await ws.closed()).data == 4401

    from gateway import sign_actor_token

    forged = sign_actor_token(ALICE, "another-secret", 60)
    response = await client.get("/agent/ws", headers={"Authorization": f"Bearer {forged}", "Upgrade": "websocket"})
    assert response.status == 401 and (await response.json())["code"] == "invalid_token"

    alice = await connect(client, token=token_for(ALICE))
    thread_id = (await alice.hello())["thread_id"]
    await alice.turn("hello")
    bob = await connect(client, token=token_for(BOB))
    await bob.send({"type": "hello", "thread_id": thread_id})
    assert (await bob.recv())["code"] == "thread_forbidden"
    assert (await bob.closed()).data == 4403
    # A token in hello works where the upgrade carried none.
    carol = await connect(client)
    assert (await carol.hello(token=sign_actor_token(BOB, SECRET, 60)))["actor"]["id"] == "bob"
    await alice.ws.close()
    await carol.ws.close()


async def test_origin_check(make_client: Any) -> None:
    client = await make_client(allowed_origins="https://app.example.com")
    response = await client.get("/agent/ws", headers={"Origin": "https://evil.example.com", "Upgrade": "websocket"})
    assert response.status == 403 and (await response.json())["code"] == "origin_forbidden"
    ws = await connect(client, headers={"Origin": "https://app.example.com"}, token=token_for(ALICE))
    assert (await ws.hello())["type"] == "welcome"
    await ws.ws.close()


async def test_turns_are_rate_limited_per_actor(make_client: Any) -> None:
    client = await make_client(turn_burst=2, turn_rate_per_minute=1)
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.turn("hi")
    await ws.turn("hi again")
    await ws.send({"type": "send", "text": "and again", "id": "r3"})
    error = await ws.recv()
    assert (error["code"], error["id"]) == ("rate_limited", "r3") and error["retry_after"] > 0
    await ws.ws.close()


@pytest.mark.parametrize(("size", "count"), [(60_000, 300), (3_000_000, 3)])
async def test_a_slow_reader_is_disconnected_instead_of_buffering_forever(
    make_client: Any, size: int, count: int
) -> None:
    # The heartbeat would close the socket too, later: it must not be what does it here.
    client = await make_client(ws_send_timeout=0.2, ws_heartbeat=60.0)
    services = client.app[SERVICES]
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello())["thread_id"]
    await ws.turn("hello")  # the thread exists now
    assert services.metrics.sockets._value.get() == 1
    # A small fixed receive buffer: loopback would otherwise autotune it to tens of MB and take
    # every byte, so whether a send ever waits would depend on the machine.
    transport = ws.ws._conn.transport
    transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    # The client stops reading; the thread gets large events: the server's buffers fill up, a
    # send waits past ws_send_timeout, and the server drops the socket instead of queueing more.
    # A frame larger than every buffer must be timed too, though the buffer looked roomy.
    big = "x" * size
    for _ in range(count):
        event = TextDeltaEvent(thread_id=thread_id, run_id="r", message_id="m", delta=big)
        await services.runtime.store.write(thread_id, Batch(events=[event]))
    await until_no_sockets(client.app)
    await ws.ws.close()


async def test_dropping_the_cookie_does_not_escape_the_rate_limit(make_client: Any) -> None:
    client = await make_client(turn_burst=2, turn_rate_per_minute=1)
    answers = []
    for _ in range(3):
        client.session.cookie_jar.clear()  # a new anonymous actor each time, from the same address
        ws = await connect(client)
        await ws.hello()
        await ws.send({"type": "send", "text": "hi"})
        answers.append((await ws.recv())["type"])
        await ws.ws.close()
    assert answers == ["ack", "ack", "error"]


@pytest.mark.parametrize("trust_forwarded", [True, False])
async def test_behind_a_trusted_proxy_the_forwarded_address_is_rate_limited(
    make_client: Any, trust_forwarded: bool
) -> None:
    client = await make_client(turn_burst=2, turn_rate_per_minute=1, trust_forwarded=trust_forwarded)

    async def anonymous_turn(forwarded_for: str) -> str:
        client.session.cookie_jar.clear()
        ws = await connect(client, headers={"X-Forwarded-For": forwarded_for})
        await ws.hello()
        await ws.send({"type": "send", "text": "hi"})
        kind: str = (await ws.recv())["type"]
        await ws.ws.close()
        return kind

    # Two visitors behind one proxy; the first hop is what a client claims, so it never counts.
    first = [await anonymous_turn(f"10.9.9.{n}, 203.0.113.7") for n in range(3)]
    second = await anonymous_turn("203.0.113.8")
    if trust_forwarded:
        assert (first, second) == (["ack", "ack", "error"], "ack")
    else:  # without the setting every request is the proxy's: one shared bucket
        assert (first, second) == (["ack", "ack", "error"], "error")


async def test_nobody_can_follow_a_thread_before_its_owner_creates_it(make_client: Any) -> None:
    client = await make_client()
    client.session.cookie_jar.clear()
    spy = await connect(client)  # anonymous
    welcome = await spy.hello(thread_id="victim-thread")
    assert welcome["thread_id"] != "victim-thread" and welcome["after_seq"] == 0

    alice = await connect(client, token=token_for(ALICE))
    assert (await alice.hello(thread_id="victim-thread"))["thread_id"] == "victim-thread"  # reserved for alice
    bob = await connect(client, token=token_for(BOB))
    await bob.send({"type": "hello", "thread_id": "victim-thread"})
    assert (await bob.recv())["code"] == "thread_forbidden"
    await alice.turn("hello")
    await spy.send({"type": "send", "text": "anything"})  # the spy sees only its own thread
    frames = await spy.until(lambda f: f.get("type") == "run-finished")
    assert {f.get("thread_id") for f in frames if "seq" in f} == {welcome["thread_id"]}
    for ws in (spy, alice):
        await ws.ws.close()


async def test_an_after_seq_past_the_end_replays_the_whole_thread(make_client: Any) -> None:
    client = await make_client()
    first = await connect(client, token=token_for(ALICE))
    thread_id = (await first.hello())["thread_id"]
    frames = await first.turn("hello")
    await first.ws.close()
    again = await connect(client, token=token_for(ALICE))
    welcome = await again.hello(thread_id=thread_id, after_seq=9999)
    assert (welcome["after_seq"], welcome["restored"]) == (0, False)
    replayed = await again.until_type("run-finished")
    assert [f["seq"] for f in replayed] == [f["seq"] for f in frames if "seq" in f]
    await again.ws.close()


async def test_welcome_says_whether_the_thread_asked_for_was_restored(make_client: Any) -> None:
    client = await make_client()
    alice = await connect(client, token=token_for(ALICE))
    fresh = await alice.hello()
    assert fresh["restored"] is True  # nothing was asked for: nothing was lost
    frames = await alice.turn("hello")
    await alice.ws.close()
    last_seq = max(f["seq"] for f in frames if "seq" in f)

    again = await connect(client, token=token_for(ALICE))
    assert (await again.hello(thread_id=fresh["thread_id"], after_seq=last_seq))["restored"] is True
    await again.ws.close()
    # As after a restart of an in-memory gateway: the threads a client remembers are gone.
    unknown = await connect(client, token=token_for(ALICE))
    welcome = await unknown.hello(thread_id="gone-after-a-restart", after_seq=12)
    assert (welcome["thread_id"], welcome["after_seq"], welcome["restored"]) == ("gone-after-a-restart", 0, False)
    await unknown.ws.close()
    client.session.cookie_jar.clear()
    anonymous = await connect(client)
    welcome = await anonymous.hello(thread_id="web-gone-after-a-restart", after_seq=3)
    assert welcome["thread_id"] != "web-gone-after-a-restart" and welcome["restored"] is False
    await anonymous.ws.close()


async def test_an_approver_follows_someone_elses_thread_only_while_a_decision_waits(make_client: Any) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    runtime = gated_runtime(gate, started)
    runtime.approval_policy = ApprovalPolicy(rules={"purge": ApprovalRule(approver="ops")})
    client = await make_client(runtime)
    alice = await connect(client, token=token_for(ALICE))
    thread_id = (await alice.hello())["thread_id"]
    requested = next(f for f in await alice.turn("purge k1") if f["type"] == "approval-requested")

    olga = await connect(client, token=token_for(OLGA))
    assert (await olga.hello(thread_id=thread_id))["thread_id"] == thread_id
    await olga.until_type("approval-requested")
    await olga.send({"type": "approve", "tool_call_id": requested["tool_call_id"], "id": "a1"})
    seen = await olga.until(lambda f: f.get("type") == "error")
    assert [f["type"] for f in seen][-2:] == ["approval-settled", "error"]  # she sees her decision land
    assert seen[-1]["code"] == "thread_forbidden"
    assert any(f.get("id") == "a1" and f["type"] == "ack" for f in seen)
    await olga.closed()
    assert olga.ws.close_code == 4403
    await alice.until_type("run-finished")

    # Alice goes on: nothing of her next turn reaches Olga, not even on a new socket.
    await alice.turn("a private question")
    again = await connect(client, token=token_for(OLGA))
    await again.send({"type": "hello", "thread_id": thread_id})
    assert (await again.recv())["code"] == "thread_forbidden"
    await again.closed()
    await alice.ws.close()


async def test_lone_surrogates_in_a_send_are_stored_as_replacement_characters(make_client: Any) -> None:
    client = await make_client()
    runtime = client.app[SERVICES].runtime
    token = token_for(ALICE)
    ws = await connect(client, token=token)
    thread_id = (await ws.hello())["thread_id"]
    # The frame as a client may write it: JSON escapes of half a surrogate pair, in the text, in
    # page_context's values and keys, and a whole pair that must stay one emoji.
    await ws.ws.send_str(
        '{"type": "send", "text": "weather in Lisbon \\ud83d", '
        '"page_context": {"page": "\\ud83d", "\\udc00k": ["a\\udfffb", "\\ud83d\\ude00"]}}'
    )
    frames = await ws.until(lambda f: f.get("type") == "run-finished")
    assert [f["type"] for f in frames][0] == "ack" and frames[-1]["status"] == "completed"
    run = await runtime.get_run(frames[0]["run_id"])
    assert run.turn.text == "weather in Lisbon \ufffd"
    assert run.turn.page_context == {"page": "\ufffd", "\ufffdk": ["a\ufffdb", "\U0001f600"]}

    history = await client.get(f"/agent/threads/{thread_id}", headers={"Authorization": f"Bearer {token}"})
    assert history.status == 200
    body = await history.json()
    assert body["messages"][0]["role"] == "user" and "weather in Lisbon \ufffd" in json.dumps(
        body["messages"][0], ensure_ascii=False
    )
    live = [f for f in frames if "seq" in f]
    await ws.ws.close()

    again = await connect(client, token=token)
    assert (await again.hello(thread_id=thread_id, after_seq=0))["thread_id"] == thread_id
    replayed = await again.until(lambda f: f.get("type") == "run-finished")
    assert [(f["seq"], f["type"]) for f in replayed] == [(f["seq"], f["type"]) for f in live]
    await again.ws.close()
