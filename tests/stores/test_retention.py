"""Retention: the runtime's background passes erase idle threads, never a busy one (every store)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from gateway import Gateway, Runtime, Settings, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import Actor, UserError, define_tool

from ._helpers import eventually

ALICE = Actor(id="alice", roles=["member"])
RETENTION_S = 0.6
DAY = 86_400


class KeyInput(BaseModel):
    key: str


def runtime_on(store: Store, release: asyncio.Event, started: asyncio.Event) -> Runtime:
    @define_tool(name="slow_read", description="Waits for the test.", input=KeyInput)
    async def slow_read(input: KeyInput, ctx: Any) -> dict[str, str]:
        started.set()
        await release.wait()
        return {"key": input.key}

    @define_tool(name="purge", description="Purge a key.", input=KeyInput, kind="action")
    async def purge(input: KeyInput, ctx: Any) -> dict[str, str]:
        return {"purged": input.key}

    def script(request: Any, index: int) -> ScriptStep:
        text = request.last_user_text
        tool = {"wait": "slow_read", "purge": "purge"}.get(text.split()[0])
        if request.step == 0 and tool is not None:
            return ScriptStep(tool_calls=[ToolCallRequest(name=tool, args={"key": "k1"})])
        return ScriptStep(text="ok")

    return Runtime(
        tools=[slow_read, purge],
        model=ScriptedModel(script),
        store=store,
        retention_days=RETENTION_S / DAY,
        maintenance_interval=0.05,
    )


async def test_idle_threads_go_and_busy_ones_stay_until_they_are_idle(store: Store) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    runtime = runtime_on(store, release, started)
    tag = uuid.uuid4().hex[:8]
    parked_thread, running_thread, idle_thread = (f"{name}-{tag}" for name in ("parked", "running", "idle"))
    try:
        parked = await runtime.start_turn(Turn(thread_id=parked_thread, actor=ALICE, text="purge k1"))
        assert await runtime.wait(parked, timeout=10) == "awaiting-approval"
        running = await runtime.start_turn(Turn(thread_id=running_thread, actor=ALICE, text="wait k1"))
        async with asyncio.timeout(10):
            await started.wait()
        idle = await runtime.start_turn(Turn(thread_id=idle_thread, actor=ALICE, text="hello"))
        assert await runtime.wait(idle, timeout=10) == "completed"

        async def gone(thread_id: str) -> bool:
            return await store.get_thread(thread_id) is None

        await eventually(lambda: gone(idle_thread), timeout=10)
        # The pass that erased the newest of the three saw the other two, older, and spared them.
        assert await store.get_thread(parked_thread) is not None
        assert [a.status for a in await store.pending_approvals(parked_thread)] == ["pending"]
        assert (await runtime.get_run(running)).status == "running"
        assert await store.get_run(idle) is None

        release.set()  # the running one ends: idle from now on
        assert await runtime.wait(running, timeout=10) == "completed"
        await eventually(lambda: gone(running_thread), timeout=10)
        assert await store.get_thread(parked_thread) is not None

        [pending] = await store.pending_approvals(parked_thread)
        await runtime.decide(pending.tool_call_id, ALICE, approve=False, reason="no", via="web")
        assert await runtime.wait(parked, timeout=10) == "completed"
        await eventually(lambda: gone(parked_thread), timeout=10)
        assert await store.get_run(parked) is None
    finally:
        release.set()
        await runtime.aclose()


async def test_a_retention_pass_stops_at_its_budget_and_the_next_goes_on(store: Store) -> None:
    """Retention shares the maintenance pass with lease renewals: a pass erases for its budget at most."""
    runtime = Runtime(
        model=ScriptedModel(lambda request, index: ScriptStep(text="ok")),
        store=store,
        retention_days=1e-12,  # every thread is idle as soon as its turn ended
        maintenance_interval=3600,  # the test makes the passes itself
    )
    runtime.threads.retention_budget = 0.0  # one thread a pass
    threads = [f"old-{uuid.uuid4().hex[:8]}-{index}" for index in range(3)]
    try:
        for thread_id in threads:
            run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ALICE, text="hi"))
            assert await runtime.wait(run_id, timeout=10) == "completed"
        assert [await runtime.threads.sweep() for _ in range(4)] == [1, 1, 1, 0]
        assert [await store.get_thread(thread_id) for thread_id in threads] == [None, None, None]
    finally:
        await runtime.aclose()


async def test_without_retention_nothing_is_erased(store: Store) -> None:
    runtime = Runtime(model=ScriptedModel([ScriptStep(text="ok")]), store=store, maintenance_interval=0.05)
    try:
        run_id = await runtime.start_turn(Turn(thread_id=f"kept-{uuid.uuid4().hex[:8]}", actor=ALICE, text="hi"))
        assert await runtime.wait(run_id, timeout=10) == "completed"
        run = await runtime.get_run(run_id)
        assert run.thread_id in await store.idle_threads(2.0**40, limit=10_000)  # it is as idle as can be
        assert await runtime.threads.sweep() == 0
        await runtime.sweep()
        assert await store.get_thread(run.thread_id) is not None
    finally:
        await runtime.aclose()


async def test_the_setting_reaches_the_runtime_and_refuses_what_is_not_a_duration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(_env_file=None).retention_days is None  # type: ignore[call-arg]
    monkeypatch.setenv("AGORA_RETENTION_DAYS", "0.5")
    settings = Settings(_env_file=None, secret="a-secret-of-the-retention-test")  # type: ignore[call-arg]
    assert settings.retention_days == 0.5
    runtime = Gateway().runtime(settings)
    assert runtime.threads.retention_days == 0.5
    await runtime.aclose()
    for bad in ("0", "-1", "soon", "inf", "nan"):
        monkeypatch.setenv("AGORA_RETENTION_DAYS", bad)
        with pytest.raises(ValidationError, match="retention_days"):
            Settings(_env_file=None)  # type: ignore[call-arg]
    with pytest.raises(UserError, match="retention_days"):
        Runtime(model=ScriptedModel([]), retention_days=0)
