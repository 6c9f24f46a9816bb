"""The web socket's queue: a burst during a run, modes, editing and removing, another actor refused."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import ALICE, BOB, connect, token_for


class Held:
    """A model whose first answer waits for ``release``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            self.entered.set()
            async with asyncio.timeout(10):
                await self.release.wait()
        return ScriptStep(text=f"answer to {request.last_user_text}")


def held_runtime(held: Held, **agent: Any) -> Runtime:
    return Runtime(agents=[Agent(name="assistant", **agent)], model=held.model, store=MemoryStore())


async def ack(ws: Any, frame_id: str) -> dict[str, Any]:
    frames = await ws.until(lambda f: f.get("id") == frame_id and f.get("type") in {"ack", "error"})
    return frames[-1]


async def test_a_burst_on_the_socket_is_queued_and_answered_in_order(make_client: Any) -> None:
    held = Held()
    client = await make_client(held_runtime(held))
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.send({"type": "send", "id": "s1", "text": "m1"})
    first = await ack(ws, "s1")
    assert first["run_id"] and "queued" not in first
    await asyncio.wait_for(held.entered.wait(), 5)
    acks = []
    for n in range(2, 6):
        await ws.send({"type": "send", "id": f"s{n}", "text": f"m{n}"})
        acks.append(await ack(ws, f"s{n}"))
    assert [(a["queued"], a["position"], a["run_id"]) for a in acks] == [(True, n, None) for n in range(1, 5)]
    held.release.set()
    frames = await ws.until(lambda f: f.get("type") == "text-end" and f.get("text") == "answer to m5", timeout=10)
    seen = ws.frames
    queued = [f for f in seen if f["type"] == "message-queued"]
    assert [(f["text"], f["position"]) for f in queued] == [(f"m{n}", n - 1) for n in range(2, 6)]
    dequeued = [f for f in seen if f["type"] == "message-dequeued"]
    assert [(f["message_id"], f["reason"]) for f in dequeued] == [(a["message_id"], "started") for a in acks]
    answers = [f["text"] for f in seen if f["type"] == "text-end"]
    assert answers == [f"answer to m{n}" for n in range(1, 6)]
    assert frames


async def test_reject_mode_still_answers_thread_busy(make_client: Any) -> None:
    held = Held()
    client = await make_client(held_runtime(held))
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.send({"type": "send", "id": "s1", "text": "m1"})
    await ack(ws, "s1")
    await asyncio.wait_for(held.entered.wait(), 5)
    await ws.send({"type": "send", "id": "s2", "text": "m2", "mode": "reject"})
    refused = await ack(ws, "s2")
    assert (refused["type"], refused["code"]) == ("error", "thread_busy")
    await ws.send({"type": "send", "id": "s3", "text": "m3", "mode": "sideways"})
    invalid = await ack(ws, "s3")
    assert (invalid["type"], invalid["code"]) == ("error", "invalid_frame")
    held.release.set()


async def test_interrupt_mode_on_the_socket(make_client: Any) -> None:
    held = Held()
    runtime = held_runtime(held)
    client = await make_client(runtime)
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello()
    await ws.send({"type": "send", "id": "s1", "text": "long job"})
    first = await ack(ws, "s1")
    await asyncio.wait_for(held.entered.wait(), 5)
    await ws.send({"type": "send", "id": "s2", "text": "do this instead", "mode": "interrupt"})
    second = await ack(ws, "s2")
    assert second["queued"] and second["interrupting"] and second["position"] == 1
    await ws.until(lambda f: f.get("type") == "text-end" and f.get("text") == "answer to do this instead")
    finished = [f for f in ws.frames if f["type"] == "run-finished"]
    assert (finished[0]["run_id"], finished[0]["status"]) == (first["run_id"], "cancelled")
    runs = await runtime.thread_runs(welcome["thread_id"])
    assert [(r.turn.text, r.status) for r in runs] == [("long job", "cancelled"), ("do this instead", "completed")]


async def test_edit_and_remove_a_queued_message_and_not_someone_elses(make_client: Any) -> None:
    held = Held()
    runtime = held_runtime(held)
    client = await make_client(runtime)
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello()
    await ws.send({"type": "send", "id": "s1", "text": "m1"})
    await ack(ws, "s1")
    await asyncio.wait_for(held.entered.wait(), 5)
    await ws.send({"type": "send", "id": "s2", "text": "typo"})
    typo = await ack(ws, "s2")
    await ws.send({"type": "send", "id": "s3", "text": "never mind"})
    dropped = await ack(ws, "s3")

    # Bob, on his own socket and thread, can neither edit nor remove Alice's queued message.
    bob = await connect(client, token=token_for(BOB))
    await bob.hello()
    for frame in (
        {"type": "queue_edit", "id": "b1", "message_id": typo["message_id"], "text": "mine"},
        {"type": "queue_remove", "id": "b2", "message_id": typo["message_id"]},
    ):
        await bob.send(frame)
        refused = await ack(bob, frame["id"])
        assert (refused["type"], refused["code"]) == ("error", "thread_forbidden")
    await bob.send({"type": "queue_remove", "id": "b3", "message_id": "qm_unknown"})
    assert (await ack(bob, "b3"))["code"] == "queued_message_not_found"
    await bob.send({"type": "queue_remove", "id": "b4", "message_id": "bad id\n"})
    assert (await ack(bob, "b4"))["code"] == "invalid_frame"

    await ws.send({"type": "queue_edit", "id": "e1", "message_id": typo["message_id"], "text": "fixed"})
    assert (await ack(ws, "e1"))["type"] == "ack"
    edited = await ws.until(lambda f: f.get("type") == "message-queued" and f.get("edited"))
    assert (edited[-1]["text"], edited[-1]["position"]) == ("fixed", 1)
    await ws.send({"type": "queue_remove", "id": "r1", "message_id": dropped["message_id"]})
    assert (await ack(ws, "r1"))["type"] == "ack"
    removed = await ws.until(lambda f: f.get("type") == "message-dequeued")
    assert (removed[-1]["message_id"], removed[-1]["reason"]) == (dropped["message_id"], "removed")
    held.release.set()
    await ws.until(lambda f: f.get("type") == "text-end" and f.get("text") == "answer to fixed", timeout=10)
    runs = await runtime.thread_runs(welcome["thread_id"])
    assert [r.turn.text for r in runs] == ["m1", "fixed"]


async def test_queue_edits_on_the_socket_are_rate_limited(make_client: Any) -> None:
    held = Held()
    runtime = held_runtime(held)
    client = await make_client(runtime, turn_rate_per_minute=5, turn_burst=5)
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello()
    await ws.send({"type": "send", "id": "s1", "text": "m1"})
    await ack(ws, "s1")
    await asyncio.wait_for(held.entered.wait(), 5)
    await ws.send({"type": "send", "id": "s2", "text": "typo"})
    queued = await ack(ws, "s2")
    answers = []
    for n in range(20):
        await ws.send({"type": "queue_edit", "id": f"e{n}", "message_id": queued["message_id"], "text": f"edit {n}"})
        answer = await ack(ws, f"e{n}")
        answers.append(answer.get("code") or answer["type"])
        if answer["type"] == "error":
            break
    assert answers[-1] == "rate_limited", answers
    before = await runtime.last_seq(welcome["thread_id"])
    await ws.send({"type": "queue_edit", "id": "late", "message_id": queued["message_id"], "text": "again"})
    assert (await ack(ws, "late"))["code"] == "rate_limited"
    assert await runtime.last_seq(welcome["thread_id"]) == before
    held.release.set()
