"""Threads as data their owner controls over HTTP: list, rename, erase, export, on every store."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from gateway import SERVICES, Runtime, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, SqliteStore, Store
from tools import Actor, ConfirmTemplate, ToolPresentation, define_tool

from ..conftest import RefusalLog, own_postgres_store, own_redis_store
from ..stores._helpers import eventually
from .conftest import ALICE, BOB, connect, token_for

Client = TestClient[web.Request, web.Application]
THREAD_KEYS = {"thread_id", "title", "channel", "created_at", "last_activity"}


class KeyInput(BaseModel):
    key: str


class Gates:
    """What the test holds the slow tool with: it says it started, then waits to be let go."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()


def make_runtime(store: Store, gates: Gates) -> Runtime:
    @define_tool(name="slow_read", description="Waits for the test.", input=KeyInput)
    async def slow_read(input: KeyInput, ctx: Any) -> dict[str, str]:
        gates.started.set()
        try:
            await gates.release.wait()
        except asyncio.CancelledError:
            gates.cancelled.set()
            raise
        return {"key": input.key}

    @define_tool(name="show", description="Shows a callout.", input=KeyInput)
    async def show(input: KeyInput, ctx: Any) -> dict[str, str]:
        ctx.emit_ui("Callout", {"tone": "info", "text": f"about {input.key}"})
        return {"shown": input.key}

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
        tool = {"wait": "slow_read", "show": "show", "purge": "purge"}.get(text.split()[0])
        if request.step == 0 and tool is not None:
            return ScriptStep(tool_calls=[ToolCallRequest(name=tool, args={"key": text.split()[-1]})])
        return ScriptStep(text=f"Done: {text}")

    return Runtime(tools=[slow_read, show, purge], model=ScriptedModel(script), store=store)


@pytest.fixture
def gates() -> Gates:
    return Gates()


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def thread_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store, of this test's own (asked for before the client: it closes after the app)."""
    if request.param == "redis":
        async with own_redis_store(request.getfixturevalue("redis_url")) as redis_store:
            yield redis_store
        return
    if request.param == "postgres":
        async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres_store:
            yield postgres_store
        return
    store: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "agora.db")
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
async def client(thread_store: Store, make_client: Any, gates: Gates) -> Client:
    made: Client = await make_client(make_runtime(thread_store, gates))
    return made


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Iterator[RefusalLog]:
    caplog.set_level(logging.INFO)
    caplog.clear()
    yield RefusalLog(caplog, route="/agent/threads", ignore=("channels.whatsapp", "gateway.threads", "gateway.runtime"))


def runtime_of(client: Client) -> Runtime:
    return client.app[SERVICES].runtime


def auth(actor: Actor = ALICE) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(actor)}"}


async def talk(client: Client, text: str, *, actor: Actor = ALICE, thread_id: str | None = None) -> tuple[str, str]:
    """A turn on a thread (a new one unless given), to its end or its approval: ``(thread_id, run_id)``."""
    runtime = runtime_of(client)
    thread_id = thread_id or f"t-{uuid.uuid4().hex[:12]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=actor, text=text, channel="web"))
    await runtime.wait(run_id, timeout=10)
    return thread_id, run_id


async def listed(client: Client, actor: Actor = ALICE, query: str = "") -> dict[str, Any]:
    response = await client.get(f"/agent/threads{query}", headers=auth(actor))
    assert response.status == 200, await response.text()
    body: dict[str, Any] = await response.json()
    return body


async def test_the_list_is_the_callers_threads_newest_first_page_by_page(client: Client) -> None:
    first, _ = await talk(client, "hello one")
    second, _ = await talk(client, "hello two")
    third, _ = await talk(client, "hello three")
    bobs, _ = await talk(client, "not yours", actor=BOB)

    body = await listed(client)
    assert [line["thread_id"] for line in body["threads"]] == [third, second, first]
    assert body["next_cursor"] is None
    assert all(set(line) == THREAD_KEYS for line in body["threads"])
    assert body["threads"][0]["title"] == "hello three" and body["threads"][0]["channel"] == "web"

    page = await listed(client, query="?limit=2")
    assert [line["thread_id"] for line in page["threads"]] == [third, second]
    rest = await listed(client, query=f"?limit=2&cursor={page['next_cursor']}")
    assert [line["thread_id"] for line in rest["threads"]] == [first]
    assert rest["next_cursor"] is None
    assert [line["thread_id"] for line in (await listed(client, BOB))["threads"]] == [bobs]


@pytest.mark.parametrize("limit", ["0", "101", "x", "-1", "1.5", "", "%C2%B2", "1" * 40])
async def test_a_bad_limit_is_refused(client: Client, refusals: RefusalLog, limit: str) -> None:
    response = await client.get(f"/agent/threads?limit={limit}", headers=auth())
    assert response.status == 400 and (await response.json())["code"] == "invalid_request"
    assert "limit" in refusals.one("400", "invalid_request", "GET")


async def test_a_garbled_forged_or_someone_elses_cursor_is_refused(client: Client, refusals: RefusalLog) -> None:
    for text in ("one", "two", "three"):
        await talk(client, f"hello {text}")
    cursor = (await listed(client, query="?limit=1"))["next_cursor"]
    body, mac = cursor.split(".")
    forged_body = base64.urlsafe_b64encode(json.dumps([9e9, "t-x"]).encode()).rstrip(b"=").decode()
    flipped = mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB")
    refusals.caplog.clear()
    for bad in ("garbled", f"{forged_body}.{mac}", f"{body}.{flipped}", f"{body}.", "." * 30, cursor + "x", "%00"):
        response = await client.get("/agent/threads", params={"cursor": bad}, headers=auth())
        assert response.status == 400, bad
        assert (await response.json())["code"] == "invalid_request"
        assert "cursor" in refusals.one("400", "invalid_request")
    others = await client.get("/agent/threads", params={"cursor": cursor}, headers=auth(BOB))
    assert others.status == 400
    refusals.one("400", "invalid_request")


async def test_the_routes_want_an_identity_and_their_methods(make_client: Any, refusals: RefusalLog) -> None:
    client: Client = await make_client(anonymous=False)
    for method, path in [
        ("GET", "/agent/threads"),
        ("PATCH", "/agent/threads/t-1"),
        ("DELETE", "/agent/threads/t-1"),
        ("GET", "/agent/threads/t-1/export"),
    ]:
        response = await client.request(method, path, json={"title": "x"})
        assert response.status == 401, (method, path)
        assert (await response.json())["code"] == "unauthenticated"
        refusals.one("401", "unauthenticated", method)
    wrong = [("POST", "/agent/threads"), ("PUT", "/agent/threads/t-1"), ("POST", "/agent/threads/t-1/export")]
    for method, path in wrong:
        response = await client.request(method, path, headers=auth())
        assert response.status == 405, (method, path)
        assert (await response.json())["code"] == "method_not_allowed"
        refusals.one("405", "method_not_allowed", method, route="/agent/…")  # no route matched: its first segment


@pytest.mark.parametrize("bad", ["a%01b", "t" * 201, "a%20b", "%F0%9F%98%80", "a%2Fb"])
async def test_a_malformed_thread_id_is_refused_before_anything_happens(
    client: Client, refusals: RefusalLog, bad: str
) -> None:
    for method, suffix in [("PATCH", ""), ("DELETE", ""), ("GET", "/export")]:
        response = await client.request(method, f"/agent/threads/{bad}{suffix}", json={"title": "x"}, headers=auth())
        assert response.status in (400, 404), (method, bad)
        if response.status == 400:
            assert (await response.json())["message"] == "Bad thread id"
        refusals.one(str(response.status), method)


async def test_renaming_a_thread_and_giving_it_back_its_first_message(client: Client, refusals: RefusalLog) -> None:
    thread_id, _ = await talk(client, "where is my order 1042")
    response = await client.patch(f"/agent/threads/{thread_id}", json={"title": "  Order 1042  "}, headers=auth())
    assert response.status == 200 and await response.json() == {"thread_id": thread_id, "title": "Order 1042"}
    assert (await listed(client))["threads"][0]["title"] == "Order 1042"
    reset = await client.patch(f"/agent/threads/{thread_id}", json={"title": None}, headers=auth())
    assert await reset.json() == {"thread_id": thread_id, "title": "where is my order 1042"}
    assert (await listed(client))["threads"][0]["title"] == "where is my order 1042"
    refusals.none()


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"title": ""}, 400),
        ({"title": "   "}, 400),
        ({"title": "bell\u0007"}, 400),
        ({"title": "two\nlines"}, 400),
        ({"title": "zero\u200bwidth"}, 400),
        ({"title": "x" * 201}, 400),
        ({"title": 42}, 400),
        ({}, 400),
        ({"title": "ok", "owner_id": "bob"}, 400),
        ({"title": "x" * 5000}, 413),
        ("not json", 400),
    ],
    ids=[
        *("empty", "blank", "control", "newline", "format-char", "too-long"),
        *("not-text", "missing", "extra", "huge", "junk"),
    ],
)
async def test_a_bad_rename_is_refused_and_changes_nothing(
    client: Client, refusals: RefusalLog, body: Any, status: int
) -> None:
    thread_id, _ = await talk(client, "keep this title")
    refusals.caplog.clear()
    if isinstance(body, str):
        response = await client.patch(
            f"/agent/threads/{thread_id}", data=body, headers={**auth(), "Content-Type": "application/json"}
        )
    else:
        response = await client.patch(f"/agent/threads/{thread_id}", json=body, headers=auth())
    assert response.status == status
    refusals.one(str(status), "PATCH", route="/agent/threads/{thread_id}")
    assert (await listed(client))["threads"][0]["title"] == "keep this title"


async def test_only_the_owner_renames_erases_or_exports(client: Client, refusals: RefusalLog) -> None:
    thread_id, run_id = await talk(client, "purge cache:42")  # parked on an approval
    store = runtime_of(client).store
    before = (await store.get_messages(thread_id), await store.read_events(thread_id), await store.get_run(run_id))
    refusals.caplog.clear()
    for method, suffix in [("PATCH", ""), ("DELETE", ""), ("GET", "/export")]:
        path = f"/agent/threads/{thread_id}{suffix}"
        response = await client.request(method, path, json={"title": "x"}, headers=auth(BOB))
        assert response.status == 403, method
        assert (await response.json())["code"] == "thread_forbidden"
        refusals.one("403", "thread_forbidden", method)
    after = (await store.get_messages(thread_id), await store.read_events(thread_id), await store.get_run(run_id))
    assert after == before
    assert [a.status for a in await store.pending_approvals(thread_id)] == ["pending"]
    assert (await listed(client))["threads"][0]["title"] == "purge cache:42"
    for method, suffix in [("PATCH", ""), ("DELETE", ""), ("GET", "/export")]:
        response = await client.request(method, f"/agent/threads/t-none{suffix}", json={"title": "x"}, headers=auth())
        assert response.status == 404 and (await response.json())["code"] == "thread_not_found"
        refusals.one("404", "thread_not_found", method)


async def test_erasing_a_parked_thread_takes_its_approval_with_it(client: Client) -> None:
    thread_id, run_id = await talk(client, "purge cache:42")
    runtime = runtime_of(client)
    [pending] = await runtime.store.pending_approvals(thread_id)
    kept, _ = await talk(client, "another conversation")

    response = await client.delete(f"/agent/threads/{thread_id}", headers=auth())
    assert response.status == 204 and await response.read() == b""
    assert await runtime.store.get_thread(thread_id) is None
    assert await runtime.store.get_run(run_id) is None
    assert await runtime.store.get_approval(pending.tool_call_id) is None
    history = await client.get(f"/agent/threads/{thread_id}", headers=auth())
    assert history.status == 404
    approve = await client.post("/agent/tool-call/approve", json={"tool_call_id": pending.tool_call_id}, headers=auth())
    assert approve.status == 404 and (await approve.json())["code"] == "approval_not_found"
    assert [line["thread_id"] for line in (await listed(client))["threads"]] == [kept]
    assert (await client.delete(f"/agent/threads/{thread_id}", headers=auth())).status == 404
    await runtime.sweep()  # nothing of it is left to expire or resume
    assert await runtime.store.get_thread(thread_id) is None


async def test_erasing_a_running_thread_stops_its_run_first(client: Client, gates: Gates) -> None:
    runtime = runtime_of(client)
    thread_id = f"t-{uuid.uuid4().hex[:12]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ALICE, text="wait k1", channel="web"))
    async with asyncio.timeout(10):
        await gates.started.wait()
    assert (await runtime.get_run(run_id)).status == "running"

    response = await client.delete(f"/agent/threads/{thread_id}", headers=auth())
    assert response.status == 204
    assert gates.cancelled.is_set()  # the tool in flight was cancelled before the thread went
    assert await runtime.store.get_run(run_id) is None
    assert await runtime.store.read_events(thread_id) == []
    # The same id starts afresh.
    again, _ = await talk(client, "hello again", thread_id=thread_id)
    assert [m.content for m in await runtime.store.get_messages(again)][:1] == ["hello again"]


async def test_a_turn_that_begins_while_its_thread_is_erased_goes_with_it_quietly(
    client: Client, gates: Gates, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = runtime_of(client)
    thread_id, _ = await talk(client, "hello")
    began: list[str] = []

    class NextMessageMeanwhile:
        """The person's next message (another tab) arrives while the erasure runs, after its runs were stopped."""

        async def forget_thread(self, erased: str) -> None:
            if not began:
                turn = Turn(thread_id=erased, actor=ALICE, text="wait k1", channel="web")
                began.append(await runtime.start_turn(turn))
                async with asyncio.timeout(10):
                    await gates.started.wait()

    runtime.threads.erasers.insert(0, NextMessageMeanwhile())
    caplog.set_level(logging.INFO)
    assert (await client.delete(f"/agent/threads/{thread_id}", headers=auth())).status == 204
    gates.release.set()  # the tool returns into a run whose thread is gone
    assert await runtime.wait(began[0], timeout=10) == "cancelled"
    assert await runtime.store.get_thread(thread_id) is None and await runtime.store.get_run(began[0]) is None
    assert await runtime.store.read_events(thread_id) == [] and await runtime.store.get_messages(thread_id) == []
    faults = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert faults == []


async def test_a_socket_left_on_an_erased_thread_never_shows_who_takes_the_id_next(client: Client) -> None:
    # An app may name its threads (order-42): Alice reserves the id, erases the thread with her
    # socket still open on it, and waits for the id's next owner.
    named = f"order-{uuid.uuid4().hex[:8]}"
    alice = await connect(client, token=token_for(ALICE))
    assert (await alice.hello(thread_id=named))["thread_id"] == named
    assert (await client.delete(f"/agent/threads/{named}", headers=auth())).status == 204
    bob = await connect(client, token=token_for(BOB))
    assert (await bob.hello(thread_id=named))["thread_id"] == named  # free again: Bob's now
    frames = await bob.turn("my card ends in 4242")
    assert frames[-1]["status"] == "completed"

    refused = await alice.recv()
    assert refused["type"] == "error" and refused["code"] == "thread_forbidden", refused
    assert (await alice.closed()).data == 4403
    assert "4242" not in json.dumps(alice.frames)


async def test_an_erased_threads_media_are_gone(client: Client) -> None:
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello(ui_capabilities={"formats": ["image", "text"]}))["thread_id"]
    frames = await ws.turn("show k1", timeout=30)
    await ws.ws.close()
    [ui] = [frame for frame in frames if frame["type"] == "ui"]
    media = urlsplit(ui["media"][0]["url"]).path
    assert (await client.get(media)).status == 200
    other = await client.app[SERVICES].media.put(b"kept", "image/png", thread_id="t-other")

    assert (await client.delete(f"/agent/threads/{thread_id}", headers=auth())).status == 204
    gone = await client.get(media)
    assert gone.status == 404 and (await gone.json())["code"] == "media_not_found"
    assert (await client.get(f"/media/{other}")).status == 200


async def test_the_export_is_everything_of_the_thread_as_a_json_file(client: Client) -> None:
    thread_id, run_id = await talk(client, "purge cache:42")
    runtime = runtime_of(client)
    [pending] = await runtime.store.pending_approvals(thread_id)
    await runtime.decide(pending.tool_call_id, ALICE, approve=True, via="web")
    await runtime.wait(run_id, timeout=10)
    await talk(client, "thanks", thread_id=thread_id)

    response = await client.get(f"/agent/threads/{thread_id}/export", headers=auth())
    assert response.status == 200
    assert response.headers["Content-Disposition"] == f'attachment; filename="thread-{thread_id}.json"'
    assert response.content_type == "application/json"
    body = await response.json()
    assert set(body) == {"exported_at", "thread", "messages", "runs", "events", "approvals"}
    assert body["thread"]["thread_id"] == thread_id and body["thread"]["owner_id"] == "alice"
    assert [m["content"] for m in body["messages"] if m["role"] == "user"] == ["purge cache:42", "thanks"]
    assert [run["run_id"] for run in body["runs"]][0] == run_id and len(body["runs"]) == 2
    assert {entry["kind"] for entry in body["runs"][0]["journal"]} >= {"model", "tool"}
    assert [e["seq"] for e in body["events"]] == list(range(1, len(body["events"]) + 1))
    assert len(body["events"]) == await runtime.store.last_seq(thread_id)
    [exported] = body["approvals"]
    assert exported["tool_call_id"] == pending.tool_call_id and exported["status"] == "approved"


async def test_retention_erases_a_threads_media_too(thread_store: Store, make_client: Any, gates: Gates) -> None:
    runtime = make_runtime(thread_store, gates)
    runtime.maintenance_interval = 0.05
    client: Client = await make_client(runtime)
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello(ui_capabilities={"formats": ["image", "text"]}))["thread_id"]
    frames = await ws.turn("show k1", timeout=30)
    await ws.ws.close()
    media = urlsplit(next(frame for frame in frames if frame["type"] == "ui")["media"][0]["url"]).path
    assert (await client.get(media)).status == 200
    runtime.threads.retention_days = 0.5 / 86_400  # from now on: the page is rendered (slower than that)

    async def erased() -> bool:
        return await runtime.store.get_thread(thread_id) is None

    await eventually(erased, timeout=10)
    assert (await client.get(media)).status == 404
