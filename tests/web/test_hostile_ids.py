"""Hostile actor ids over the real app: an id may never pass for another tenant's actor.

Actors used to be keyed by joining tenant and id with ``\\x1f``: a token whose id was
``"acme\\x1fu1"`` (no tenant) was taken for actor ``u1`` of tenant ``acme``. Each test plays the
attack end to end (HTTP history, a web socket following the thread, cancelling the parked run)
on ``MemoryStore`` and on ``RedisStore``, and checks that nothing changed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
import uuid
from typing import Any

import pytest
import redis.asyncio as redis
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from gateway import Agent, Runtime, ThreadForbiddenError, Turn, sign_actor_token, verify_actor_token
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore, Store
from tools import Actor, ToolContext, UserError, define_tool

from .conftest import SECRET, connect, token_for

VICTIM = Actor(id="u1", roles=["member"], tenant_ref="acme")


class KeyInput(BaseModel):
    key: str


@define_tool(name="purge_cache", description="Purge one cache key", input=KeyInput, kind="action")
async def purge_cache(input: KeyInput, ctx: ToolContext) -> dict[str, str]:
    return {"purged": input.key}


def purge(request: ModelRequest, index: int) -> ScriptStep:
    if request.step == 0:
        return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "cache:42"})])
    return ScriptStep(text="Purged.")


def foreign_token(claims: dict[str, Any], secret: str = SECRET) -> str:
    """An HS256 JWT as any JWT library signs it (so not bound by what ``sign_actor_token`` refuses)."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")

    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64(json.dumps({"exp": int(time.time()) + 600, **claims}).encode())
    signature = b64(hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest())
    return f"{header}.{body}.{signature}"


COLLIDING = foreign_token({"id": "acme\x1fu1", "roles": ["member"]})
"""The attack of the issue: no tenant, and an id that joins like ``acme`` + ``u1``."""

HOSTILE_CLAIMS = {
    "separator in the id": {"id": "acme\x1fu1"},
    "separator in the tenant": {"id": "u1", "tenant": "ac\x1fme"},
    "record separator": {"id": "acme\x1eu1"},
    "NUL": {"id": "acme\x00u1"},
    "newline": {"id": "acme\nu1"},
    "DEL": {"id": "acme\x7fu1"},
    "C1 control (NEL)": {"id": "acme\x85u1"},
    "control character in the tenant": {"id": "u1", "tenant": "acme\n"},
    "lone surrogate in the id": {"id": "u1\ud800"},
    "lone surrogate in the tenant": {"id": "u1", "tenant": "\udfffacme"},
    "id over 256 characters": {"id": "u" * 257},
    "tenant over 256 characters": {"id": "u1", "tenant": "t" * 257},
    "an id that is not text": {"id": 1},
    "a tenant that is not text": {"id": "u1", "tenant": ["acme"]},
    "lone surrogate in a role": {"id": "u1", "roles": ["ops\ud83d"]},
    "control character in a role": {"id": "u1", "roles": ["member", "ops\x1fadmin"]},
    "an expiry that is NaN (would never expire)": {"id": "u1", "exp": float("nan")},
    "an expiry past a double's range": {"id": "u1", "exp": float("inf")},
    "not valid yet (nbf in an hour)": {"id": "u1", "nbf": time.time() + 3600},
    "an nbf that is not a number": {"id": "u1", "nbf": "soon"},
}
"""Classes of hostile identities a token may carry; every one is refused (401)."""


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def parked(make_client: Any, store: Store) -> tuple[Client, Runtime, str, str]:
    """An app whose tenant ``acme`` actor ``u1`` has a run parked on an approval."""
    runtime = Runtime(
        tools=[purge_cache], agents=[Agent(name="default", instructions="")], model=ScriptedModel(purge), store=store
    )
    client: Client = await make_client(runtime)
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=VICTIM, text="purge cache:42"))
    assert await runtime.wait(run_id) == "awaiting-approval"
    return client, runtime, thread_id, run_id


async def snapshot(runtime: Runtime, thread_id: str, run_id: str) -> tuple[Any, ...]:
    store = runtime.store
    run = await store.get_run(run_id)
    assert run is not None
    pending = [a.model_dump() for a in await store.pending_approvals(thread_id)]
    return run.status, run.cancel_requested, await store.last_seq(thread_id), pending


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_victim_reads_its_own_thread(parked: tuple[Client, Runtime, str, str]) -> None:
    # The control: what the attacker must not get.
    client, _, thread_id, _ = parked
    response = await client.get(f"/agent/threads/{thread_id}", headers=bearer(token_for(VICTIM)))
    assert response.status == 200
    assert (await response.json())["pending_approvals"]


async def test_a_colliding_id_cannot_read_the_victims_history(parked: tuple[Client, Runtime, str, str]) -> None:
    client, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    response = await client.get(f"/agent/threads/{thread_id}", headers=bearer(COLLIDING))
    assert response.status == 401, await response.text()
    body = await response.json()
    assert body["code"] == "invalid_token" and "messages" not in body
    by_query = await client.get(f"/agent/threads/{thread_id}?token={COLLIDING}")
    assert by_query.status == 401
    assert await snapshot(runtime, thread_id, run_id) == before


async def test_a_colliding_id_cannot_follow_the_victims_thread(parked: tuple[Client, Runtime, str, str]) -> None:
    client, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    # The token in the hello frame (the socket opened as an anonymous visitor)...
    ws = await connect(client)
    await ws.send({"type": "hello", "thread_id": thread_id, "token": COLLIDING})
    frame = await ws.recv()
    assert frame["type"] == "error" and frame["code"] == "invalid_token", frame
    closing = await ws.ws.receive(timeout=5)
    assert closing.type is WSMsgType.CLOSE and closing.data == 4401
    # ...and on the upgrade itself.
    refused = await client.get("/agent/ws", headers=bearer(COLLIDING))
    assert refused.status == 401 and (await refused.json())["code"] == "invalid_token"
    assert await snapshot(runtime, thread_id, run_id) == before


async def test_a_colliding_id_cannot_cancel_the_victims_parked_run(parked: tuple[Client, Runtime, str, str]) -> None:
    client, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    response = await client.post(f"/agent/runs/{run_id}/cancel", headers=bearer(COLLIDING))
    assert response.status == 401 and (await response.json())["code"] == "invalid_token"
    assert await snapshot(runtime, thread_id, run_id) == before
    assert before[0] == "awaiting-approval"
    # The victim still can.
    own = await client.post(f"/agent/runs/{run_id}/cancel", headers=bearer(token_for(VICTIM)))
    assert own.status == 200 and (await own.json())["status"] == "cancelled"


@pytest.mark.parametrize("claims", HOSTILE_CLAIMS.values(), ids=HOSTILE_CLAIMS.keys())
async def test_hostile_identities_are_refused_everywhere(
    parked: tuple[Client, Runtime, str, str], claims: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    client, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    caplog.clear()
    token = foreign_token({"roles": ["member"], **claims})
    for method, path in (
        ("GET", f"/agent/threads/{thread_id}"),
        ("POST", f"/agent/runs/{run_id}/cancel"),
        ("GET", "/agent/tools"),
        ("GET", "/agent/ws"),
    ):
        response = await client.request(method, path, headers=bearer(token))
        assert response.status == 401, (method, path, await response.text())
        assert (await response.json())["code"] == "invalid_token"
    ws = await connect(client)
    await ws.send({"type": "hello", "thread_id": thread_id, "token": token})
    frame = await ws.recv()
    assert frame["type"] == "error" and frame["code"] == "invalid_token", frame
    await ws.ws.close()
    assert await snapshot(runtime, thread_id, run_id) == before
    # Refused as bad input: one access line per request, no warning, no traceback.
    assert [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []


async def test_a_hostile_actor_that_skipped_validation_still_owns_nothing(
    parked: tuple[Client, Runtime, str, str],
) -> None:
    # Below the resolvers: an Actor built without validation (model_construct) whose parts
    # joined the victim's way. Ownership compares the parts, and the keys differ.
    _, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    hostile = Actor.model_construct(id="acme\x1fu1", roles=["member"], tenant_ref=None)
    assert hostile.key != VICTIM.key
    with pytest.raises(ThreadForbiddenError):
        await runtime.check_thread_access(thread_id, hostile)
    with pytest.raises(ThreadForbiddenError):
        await runtime.cancel(run_id, hostile)
    with pytest.raises(ThreadForbiddenError):
        await runtime.start_turn(Turn.model_construct(thread_id=thread_id, actor=hostile, text="mine now"))
    assert await snapshot(runtime, thread_id, run_id) == before


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # C0 controls never reach a resolver: the HTTP parser refuses them (400).
        ({"X-Actor-Id": "acme\x1fu1"}, 400),
        ({"X-Actor-Id": "u1", "X-Tenant-Ref": "ac\x1fme"}, 400),
        ({"X-Actor-Id": "acme\x85u1"}, 401),
        ({"X-Actor-Id": "u1", "X-Tenant-Ref": "acme\x9f"}, 401),
        ({"X-Actor-Id": "u1\udcff"}, 401),
        ({"X-Actor-Id": "u1", "X-Tenant-Ref": "\udcc3acme"}, 401),
        ({"X-Actor-Id": "u1", "X-Tenant-Ref": "t" * 257}, 401),
        ({"X-Actor-Id": "u1", "X-Actor-Roles": "ops\udcff"}, 401),
    ],
    ids=[
        "separator in the id",
        "separator in the tenant",
        "C1 control in the id",
        "C1 control in the tenant",
        "invalid UTF-8 in the id",
        "invalid UTF-8 in the tenant",
        "tenant too long",
        "invalid UTF-8 in a role",
    ],
)
async def test_trusted_headers_refuse_hostile_identities(
    make_client: Any, store: Store, headers: dict[str, str], expected: int
) -> None:
    runtime = Runtime(
        tools=[purge_cache], agents=[Agent(name="default", instructions="")], model=ScriptedModel(purge), store=store
    )
    client: Client = await make_client(runtime, trusted_headers=True)
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=VICTIM, text="purge cache:42"))
    assert await runtime.wait(run_id) == "awaiting-approval"
    before = await snapshot(runtime, thread_id, run_id)
    victim = await client.get(f"/agent/threads/{thread_id}", headers={"X-Actor-Id": "u1", "X-Tenant-Ref": "acme"})
    assert victim.status == 200
    for method, path in (("GET", f"/agent/threads/{thread_id}"), ("POST", f"/agent/runs/{run_id}/cancel")):
        status, body = await raw_request(client, method, path, headers)
        assert status == expected, (status, body)
        if status == 401:
            assert json.loads(body)["code"] == "invalid_token"
    assert await snapshot(runtime, thread_id, run_id) == before


async def raw_request(client: Client, method: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """Send a request as a proxy might (aiohttp's client refuses control characters in headers)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {client.server.host}", "Connection: close", "Content-Length: 0"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        # Values as UTF-8; "\udcXX" stands for the raw byte XX (not UTF-8 on its own).
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape"))
        await writer.drain()
        async with asyncio.timeout(5):
            answer = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_threads_stored_by_the_previous_version_keep_their_owner(
    parked: tuple[Client, Runtime, str, str], request: pytest.FixtureRequest
) -> None:
    # The stored owner is the historic key, byte for byte: a Redis that a previous version
    # filled (threads, parked runs) is read the same, and the colliding id still owns nothing.
    client, runtime, thread_id, run_id = parked
    assert VICTIM.key == "acme\x1fu1" and Actor(id="u1").key == "u1"
    if isinstance(runtime.store, RedisStore):
        raw = redis.Redis.from_url(request.getfixturevalue("redis_url"))
        try:
            owner = await raw.hget(f"{runtime.store.prefix}:{{{thread_id}}}:thread", "owner")
        finally:
            await raw.aclose()
        assert owner == b"acme\x1fu1"
    hostile = Actor.model_construct(id="acme\x1fu1", roles=["member"], tenant_ref=None)
    with pytest.raises(ThreadForbiddenError):
        await runtime.start_turn(Turn.model_construct(thread_id=thread_id, actor=hostile, text="mine now"))
    # The victim's own next message is accepted: it waits behind the parked run (the approval
    # stays pending), and the colliding id cannot manage that queue either.
    accepted = await runtime.send(Turn(thread_id=thread_id, actor=VICTIM, text="purge cache:42"))
    assert accepted.queued is not None and accepted.position == 1
    with pytest.raises(ThreadForbiddenError):
        await runtime.queue.remove(accepted.queued.message_id, hostile)
    assert [a.run_id for a in await runtime.pending_approvals(thread_id)] == [run_id]


def test_sign_actor_token_refuses_an_actor_that_skipped_validation() -> None:
    hostile = Actor.model_construct(id="acme\x1fu1", roles=[], tenant_ref=None)
    with pytest.raises(UserError, match="not a valid actor"):
        sign_actor_token(hostile, "s" * 32)
    token = sign_actor_token(Actor(id="u1", tenant_ref="acme"), "s" * 32)
    assert verify_actor_token(token, "s" * 32) == Actor(id="u1", tenant_ref="acme")


@pytest.mark.parametrize("actor_id", ["client:127.0.0.1", "actor:client:127.0.0.1"])
async def test_an_actor_named_like_an_address_does_not_share_its_rate_limit(make_client: Any, actor_id: str) -> None:
    # Buckets of actors and of anonymous visitors' addresses are kept apart: a signed actor
    # named "client:<address>" neither drains that address's bucket nor is drained by it.
    client = await make_client(turn_burst=1, turn_rate_per_minute=1)
    token = foreign_token({"id": actor_id, "roles": ["member"]})
    named = await connect(client, token=token)
    await named.hello()
    await named.send({"type": "send", "text": "hi", "id": "a"})
    assert (await named.recv())["type"] == "ack"
    await named.ws.close()
    client.session.cookie_jar.clear()
    visitor = await connect(client)  # anonymous, from 127.0.0.1 as well
    await visitor.hello()
    await visitor.send({"type": "send", "text": "hi", "id": "b"})
    answer = await visitor.recv()
    assert answer["type"] == "ack", answer
    await visitor.ws.close()


async def test_a_colliding_id_is_refused_on_a2a_and_ag_ui(parked: tuple[Client, Runtime, str, str]) -> None:
    client, runtime, thread_id, run_id = parked
    before = await snapshot(runtime, thread_id, run_id)
    a2a = await client.post(
        "/a2a",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": run_id}},
        headers=bearer(COLLIDING),
    )
    assert a2a.status == 401 and (await a2a.json())["code"] == "invalid_token"
    body = {"threadId": thread_id, "runId": "r1", "messages": [], "tools": [], "context": [], "state": {}}
    ag_ui = await client.post("/agent/ag-ui", json=body, headers=bearer(COLLIDING))
    assert ag_ui.status == 401 and (await ag_ui.json())["code"] == "invalid_token"
    assert await snapshot(runtime, thread_id, run_id) == before
