"""What a process that stopped at the wrong moment leaves, another process's sweep carries on.

The "stopped" process is played by a runtime whose end-of-child step is switched off (its
``wake`` or ``deliver_later``): the child's end is written, the step after it never happens.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway import Agent, Handoff, Runtime
from gateway.events import ApprovalRequestedEvent
from gateway.models import AssistantMessage, ToolCallRequest
from gateway.stores import MemoryStore

from .conftest import ALICE, all_events, asks, new_thread, purge_tool, replying, turn, until

PURGE = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})


async def test_a_parent_whose_child_ended_without_waking_it_is_resumed_by_a_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executed: list[str] = []
    store = MemoryStore()
    agents = [
        Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done.")),
        Agent(name="ops", model=replying(PURGE, text="Purged it.")),
    ]
    first = Runtime(tools=[purge_tool(executed)], agents=agents, store=store)
    second = Runtime(tools=[purge_tool(executed)], agents=agents, store=store)
    try:
        thread = new_thread()
        run_id = await first.start_turn(turn(thread, "purge it"))
        assert await first.wait(run_id, timeout=5) == "awaiting-approval"
        (requested,) = [e for e in await all_events(first, thread) if isinstance(e, ApprovalRequestedEvent)]

        async def never(run_id: str) -> bool:
            return False

        monkeypatch.setattr(first.handoffs, "wake", never)
        await first.decide(requested.tool_call_id, ALICE)
        approval = await store.get_approval(requested.tool_call_id)
        assert approval is not None
        assert await first.wait(approval.run_id, timeout=5) == "completed"
        assert (await store.get_run(run_id)).status == "awaiting-approval"  # left parked

        await second.sweep()
        assert await second.wait(run_id, timeout=5) == "completed"
        assert len(executed) == 1
        assert (await store.get_messages(thread))[-1].content == "All done."
    finally:
        await first.aclose()
        await second.aclose()
        await store.aclose()


async def test_a_detached_answer_left_undelivered_is_delivered_by_a_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    agents = [
        Agent(
            name="main",
            handoffs=[Handoff("research", detached=True)],
            model=asks("start_research", "look it up", then="Started."),
        ),
        Agent(name="research", model=replying(text="Found it.")),
    ]
    first = Runtime(agents=agents, store=store)
    second = Runtime(agents=agents, store=store)
    try:
        monkeypatch.setattr(first.handoffs, "deliver_later", lambda child: None)
        thread = new_thread()
        run_id = await first.start_turn(turn(thread, "go"))
        assert await first.wait(run_id, timeout=5) == "completed"
        (child,) = [r for r in await store.recent_runs() if r.parent_run_id == run_id]
        assert await first.wait(child.run_id, timeout=5) == "completed"
        await second.sweep()

        async def answered() -> list[Any]:
            return [
                m
                for m in await store.get_messages(thread)
                if isinstance(m, AssistantMessage) and m.content == "Found it."
            ]

        await until(answered)
        assert await second.wait(f"{child.run_id}.answer", timeout=5) == "completed"
        assert len(await answered()) == 1
    finally:
        await first.aclose()
        await second.aclose()
        await store.aclose()
