"""The queue's HTTP routes: list, clear, edit, remove, interrupt-with; another actor's 403; bad input."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from gateway import SERVICES, Agent, Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import Actor

from ..conftest import RefusalLog
from .conftest import ALICE, BOB, token_for

Client = TestClient[web.Request, web.Application]


class Held:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            self.entered.set()
            async with asyncio.timeout(10):
                await self.release.wait()
        return ScriptStep(text=f"answer to {request.last_user_text}")


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
async def client(make_client: Any, held: Held) -> Client:
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=MemoryStore())
    made: Client = await make_client(runtime)
    return made


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Iterator[RefusalLog]:
    caplog.set_level(logging.INFO)
    caplog.clear()
    yield RefusalLog(caplog, route="/agent/", ignore=("channels.whatsapp", "gateway.queue", "gateway.runtime"))


def auth(actor: Actor = ALICE) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(actor)}"}


def runtime_of(client: Client) -> Runtime:
    return client.app[SERVICES].runtime


async def busy_thread(client: Client, held: Held, *texts: str) -> tuple[str, list[str]]:
    """A thread whose first run holds, with ``texts`` queued behind it: ``(thread_id, message ids)``."""
    runtime = runtime_of(client)
    thread_id = f"t-{uuid.uuid4().hex[:12]}"
    await runtime.send(Turn(thread_id=thread_id, actor=ALICE, text="first", channel="web"))
    await asyncio.wait_for(held.entered.wait(), 5)
    ids = []
    for text in texts:
        accepted = await runtime.send(Turn(thread_id=thread_id, actor=ALICE, text=text, channel="web"))
        assert accepted.queued is not None
        ids.append(accepted.queued.message_id)
    return thread_id, ids


async def json_of(response: Any, status: int = 200) -> Any:
    assert response.status == status, await response.text()
    return await response.json()


async def test_list_edit_remove_and_clear(client: Client, held: Held, refusals: RefusalLog) -> None:
    thread_id, (a, b, c) = await busy_thread(client, held, "one", "two", "three")
    listed = await json_of(await client.get(f"/agent/threads/{thread_id}/queue", headers=auth()))
    assert [(m["message_id"], m["text"], m["position"], m["channel"]) for m in listed["queue"]] == [
        (a, "one", 1, "web"),
        (b, "two", 2, "web"),
        (c, "three", 3, "web"),
    ]
    edited = await json_of(await client.patch(f"/agent/queue/{b}", json={"text": "two, edited"}, headers=auth()))
    assert (edited["message_id"], edited["text"], edited["position"]) == (b, "two, edited", 2)
    removed = await json_of(await client.delete(f"/agent/queue/{a}", headers=auth()))
    assert removed == {"message_id": a, "thread_id": thread_id, "removed": True}
    gone = await client.delete(f"/agent/queue/{a}", headers=auth())
    assert (await json_of(gone, 404))["code"] == "queued_message_not_found"
    refusals.one("404", "queued_message_not_found", "DELETE", route="/agent/queue/{message_id}")
    cleared = await json_of(await client.delete(f"/agent/threads/{thread_id}/queue", headers=auth()))
    assert cleared == {"thread_id": thread_id, "cleared": [b, c]}
    assert (await json_of(await client.get(f"/agent/threads/{thread_id}/queue", headers=auth())))["queue"] == []
    held.release.set()
    refusals.none()


async def test_interrupt_with_runs_that_message_next(client: Client, held: Held) -> None:
    runtime = runtime_of(client)
    thread_id, (a, b) = await busy_thread(client, held, "later", "now")
    answer = await json_of(await client.post(f"/agent/queue/{b}/interrupt", headers=auth()))
    assert answer == {"message_id": b, "thread_id": thread_id, "position": 1, "interrupting": True}

    async def ended() -> bool:
        runs = await runtime.thread_runs(thread_id)
        return len(runs) == 3 and all(r.status in {"completed", "cancelled"} for r in runs)

    async with asyncio.timeout(10):
        while not await ended():
            await asyncio.sleep(0.01)
    runs = await runtime.thread_runs(thread_id)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("first", "cancelled"),
        ("now", "completed"),
        ("later", "completed"),
    ]
    assert a


async def test_another_actors_queue_is_403_and_nothing_changes(
    client: Client, held: Held, refusals: RefusalLog
) -> None:
    runtime = runtime_of(client)
    thread_id, (a,) = await busy_thread(client, held, "mine")
    before = await runtime.last_seq(thread_id)
    for method, path, body in [
        ("GET", f"/agent/threads/{thread_id}/queue", None),
        ("DELETE", f"/agent/threads/{thread_id}/queue", None),
        ("PATCH", f"/agent/queue/{a}", {"text": "bob was here"}),
        ("DELETE", f"/agent/queue/{a}", None),
        ("POST", f"/agent/queue/{a}/interrupt", None),
    ]:
        response = await client.request(method, path, json=body, headers=auth(BOB))
        assert (await json_of(response, 403))["code"] == "thread_forbidden", (method, path)
        refusals.one("403", "thread_forbidden", method)
    (still,) = await runtime.store.queued_messages(thread_id)
    assert (still.message_id, still.turn.text) == (a, "mine")
    assert await runtime.last_seq(thread_id) == before
    assert [r.status for r in await runtime.thread_runs(thread_id)] == ["running"]
    held.release.set()


@pytest.mark.parametrize("bad", ["a%01b", "q" * 201, "a%20b", "%F0%9F%98%80", "a%0Ab"])
async def test_a_malformed_id_is_refused_before_anything_happens(
    client: Client, refusals: RefusalLog, bad: str
) -> None:
    for method, path in [
        ("GET", f"/agent/threads/{bad}/queue"),
        ("DELETE", f"/agent/threads/{bad}/queue"),
        ("PATCH", f"/agent/queue/{bad}"),
        ("DELETE", f"/agent/queue/{bad}"),
        ("POST", f"/agent/queue/{bad}/interrupt"),
    ]:
        response = await client.request(method, path, json={"text": "x"}, headers=auth())
        body = await json_of(response, 400)
        assert body["code"] == "invalid_request" and body["message"].startswith("Bad "), (method, bad)
        refusals.one("400", "invalid_request", method)


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (b"{not json", {"Content-Type": "application/json"}, 400),
        (b'{"text": ""}', {"Content-Type": "application/json"}, 400),
        (b'{"text": "   "}', {"Content-Type": "application/json"}, 400),
        (b'{"text": "ok", "extra": 1}', {"Content-Type": "application/json"}, 400),
        (b'{"text": 5}', {"Content-Type": "application/json"}, 400),
        (b'{"text": "ok"}', {"Content-Type": "text/plain"}, 415),
        (b'{"text": "' + b"x" * 70_000 + b'"}', {"Content-Type": "application/json"}, 413),
    ],
)
async def test_a_bad_edit_is_refused_and_changes_nothing(
    client: Client, held: Held, refusals: RefusalLog, body: bytes, headers: dict[str, str], status: int
) -> None:
    runtime = runtime_of(client)
    thread_id, (a,) = await busy_thread(client, held, "original")
    response = await client.patch(f"/agent/queue/{a}", data=body, headers={**auth(), **headers})
    assert response.status == status, await response.text()
    refusals.one(str(status), "PATCH")
    (still,) = await runtime.store.queued_messages(thread_id)
    assert still.turn.text == "original"
    held.release.set()


async def test_the_routes_want_an_identity(make_client: Any, refusals: RefusalLog) -> None:
    client: Client = await make_client(anonymous=False)
    for method, path in [
        ("GET", "/agent/threads/t-1/queue"),
        ("DELETE", "/agent/threads/t-1/queue"),
        ("PATCH", "/agent/queue/qm_1"),
        ("DELETE", "/agent/queue/qm_1"),
        ("POST", "/agent/queue/qm_1/interrupt"),
    ]:
        response = await client.request(method, path, json={"text": "x"})
        assert (await json_of(response, 401))["code"] == "unauthenticated", (method, path)
        refusals.one("401", "unauthenticated", method)


async def test_edits_are_rate_limited_like_messages(make_client: Any, held: Held, refusals: RefusalLog) -> None:
    # Each edit writes the whole text to the thread's log again: unlimited, they would grow the store at will.
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=MemoryStore())
    client: Client = await make_client(runtime, turn_rate_per_minute=5, turn_burst=5)
    thread_id, (a,) = await busy_thread(client, held, "original")
    statuses = []
    for n in range(40):
        response = await client.patch(f"/agent/queue/{a}", json={"text": f"edit {n} " + "x" * 30_000}, headers=auth())
        statuses.append(response.status)
        if response.status == 429:
            assert (await response.json())["code"] == "rate_limited"
            break
    assert statuses[-1] == 429, statuses
    refusals.one("429", "rate_limited", "PATCH", route="/agent/queue/{message_id}")
    before = await runtime.last_seq(thread_id)
    assert (await client.patch(f"/agent/queue/{a}", json={"text": "again"}, headers=auth())).status == 429
    assert await runtime.last_seq(thread_id) == before  # a refused edit writes nothing
    held.release.set()
