"""An app whose agents do not hand off pays nothing for handoffs: no store call comes from their code."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from gateway import Agent
from gateway.models import ToolCallRequest
from gateway.stores import MemoryStore

from .conftest import ALICE, new_thread, purge_tool, replying, turn, until, weather_tool

_HANDOFF_CODE = {"_handoffs.py", "_handoff_parts.py"}


class WatchedStore(MemoryStore):
    """A memory store that notes each call the handoff modules make of it."""

    def __init__(self) -> None:
        super().__init__()
        self.from_handoffs: list[str] = []
        for name in (
            "get_run",
            "channel_get",
            "channel_set",
            "channel_delete",
            "recent_runs",
            "read_journal",
            "pending_approvals",
            "thread_runs",
            "get_thread",
            "write",
        ):
            self._watch(name)

    def _watch(self, name: str) -> None:
        method = getattr(self, name)

        async def watched(*args: Any, **kw: Any) -> Any:
            callers = {Path(frame.filename).name for frame in inspect.stack()[1:8]}
            if callers & _HANDOFF_CODE:
                self.from_handoffs.append(name)
            return await method(*args, **kw)

        setattr(self, name, watched)


async def test_runs_approvals_sweeps_and_erasure_without_handoffs_make_no_handoff_store_call(
    make_runtime: Any,
) -> None:
    store = WatchedStore()
    executed: list[str] = []
    calls = [ToolCallRequest(name="get_weather", args={"city": "Oslo"})]
    purge = ToolCallRequest(name="purge_cache", args={"key": "k"})
    agents = [
        Agent(name="main", model=replying(*calls, text="Sunny.")),
        Agent(name="ops", model=replying(purge, text="Done.")),
    ]
    runtime = make_runtime(tools=[weather_tool(), purge_tool(executed)], agents=agents, store=store)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "weather"))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    other = new_thread()
    run_id = await runtime.start_turn(turn(other, "purge", agent="ops"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (approval,) = await runtime.pending_approvals(other)
    await runtime.decide(approval.tool_call_id, ALICE)
    await until(lambda: _completed(runtime, run_id))
    await runtime.sweep()
    await runtime.threads.delete(thread, ALICE)
    assert len(executed) == 1
    assert store.from_handoffs == []


async def _completed(runtime: Any, run_id: str) -> bool:
    return bool((await runtime.get_run(run_id)).status == "completed")


async def test_deciding_a_top_level_runs_approval_reads_nothing_for_handoffs(make_runtime: Any) -> None:
    store = WatchedStore()
    executed: list[str] = []
    purge = ToolCallRequest(name="purge_cache", args={"key": "k"})
    ops = Agent(name="ops", handoffs=["main"], model=replying(purge, text="Done."))
    agents = [ops, Agent(name="main", model=replying(text="hi"))]
    runtime = make_runtime(tools=[purge_tool(executed)], agents=agents, store=store)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "purge"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (approval,) = await runtime.store.pending_approvals(thread)
    store.from_handoffs.clear()
    await runtime.decide(approval.tool_call_id, ALICE)
    await until(lambda: _completed(runtime, run_id))
    assert len(executed) == 1
    assert store.from_handoffs == []  # not a sub-agent's: its settled line is not looked up to mirror
