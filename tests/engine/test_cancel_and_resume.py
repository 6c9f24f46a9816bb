"""Stopping runs, and resuming them from the journal on another runtime."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway import RunNotActiveError, RunNotFoundError, Runtime, ThreadForbiddenError
from gateway.events import ToolFailedEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore
from tools import define_tool

from .conftest import ALICE, BOB, CityInput, all_events, new_thread, purge_tool, turn, types, until


async def test_stop_cancels_the_tool_in_flight(make_runtime: Any) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @define_tool(name="long_read", description="Runs until stopped.", input=CityInput)
    async def long_read(input: CityInput, ctx: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    model = ScriptedModel([ScriptStep(tool_calls=[ToolCallRequest(name="long_read", args={"city": "x"})])])
    runtime = make_runtime(tools=[long_read], model=model)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    async with asyncio.timeout(5):
        await started.wait()
    with pytest.raises(ThreadForbiddenError):
        await runtime.cancel(run_id, BOB)
    await runtime.cancel(run_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "cancelled"
    assert cancelled.is_set()
    events = await all_events(runtime, thread)
    assert types(events)[-2:] == ["tool-failed", "run-finished"]
    assert isinstance(events[-2], ToolFailedEvent) and events[-2].error["code"] == "cancelled"
    assert model.calls == 1
    with pytest.raises(RunNotActiveError):
        await runtime.cancel(run_id, ALICE)
    with pytest.raises(RunNotFoundError):
        await runtime.cancel("run_nope", ALICE)
    # The thread is free again, and its history is valid for the model.
    model2 = ScriptedModel([ScriptStep(text="ok")])
    runtime2 = make_runtime(tools=[long_read], model=model2, store=runtime.store)
    assert await runtime2.wait(await runtime2.start_turn(turn(thread, "next")), timeout=5) == "completed"
    assert [m.role for m in model2.requests[0].messages] == ["user", "assistant", "tool", "user"]


async def test_stop_during_a_model_call(make_runtime: Any) -> None:
    entered = asyncio.Event()

    async def script(request: ModelRequest, index: int) -> ScriptStep:
        entered.set()
        await asyncio.Event().wait()
        return ScriptStep(text="never")

    runtime = make_runtime(model=ScriptedModel(script))
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    async with asyncio.timeout(5):
        await entered.wait()
    await runtime.cancel(run_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "cancelled"
    assert types(await all_events(runtime, thread)) == ["run-started", "run-finished"]


async def test_stop_a_parked_run_rejects_its_action(make_runtime: Any) -> None:
    executed: list[str] = []
    model = ScriptedModel([ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k"})])])
    runtime = make_runtime(tools=[purge_tool(executed)], model=model)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    await runtime.cancel(run_id, ALICE)
    assert (await runtime.get_run(run_id)).status == "cancelled"
    events = await all_events(runtime, thread)
    assert types(events)[-4:] == ["run-finished", "approval-settled", "tool-denied", "run-finished"]
    assert events[-1].status == "cancelled"  # type: ignore[union-attr]
    assert executed == []


async def test_a_parked_run_is_decided_on_another_runtime_sharing_the_store() -> None:
    store = MemoryStore()
    executed: list[str] = []
    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k"})]), ScriptStep(text="Purged.")]
    )
    a = Runtime(tools=[purge_tool(executed)], model=model, store=store)
    b = Runtime(tools=[purge_tool(executed)], model=model, store=store)
    try:
        thread = new_thread()
        run_id = await a.start_turn(turn(thread))
        assert await a.wait(run_id, timeout=5) == "awaiting-approval"
        await a.aclose()  # the first "process" goes away; the run is only data now
        requested = [e for e in await all_events(b, thread) if e.type == "approval-requested"][0]
        await b.decide(requested.tool_call_id, ALICE)  # type: ignore[union-attr]
        assert await b.wait(run_id, timeout=5) == "completed"
        assert executed == [f"{run_id}:{requested.tool_call_id}"]  # type: ignore[union-attr]
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_run_whose_process_stopped_is_resumed_without_rerunning_settled_tools() -> None:
    store = MemoryStore()
    settled_runs: list[str] = []
    second_started = asyncio.Event()
    unsettled_keys: list[str] = []
    hang = {"on": True}

    @define_tool(name="quick", description="Settles at once.", input=CityInput)
    async def quick(input: CityInput, ctx: Any) -> dict[str, str]:
        settled_runs.append(ctx.idempotency_key)
        return {"ok": input.city}

    @define_tool(name="hangs", description="Hangs the first time.", input=CityInput)
    async def hangs(input: CityInput, ctx: Any) -> dict[str, str]:
        unsettled_keys.append(ctx.idempotency_key)
        if hang["on"]:
            second_started.set()
            await asyncio.Event().wait()
        return {"ok": input.city}

    model = ScriptedModel(
        lambda request, i: (
            ScriptStep(text="all done")
            if request.step == 2
            else ScriptStep(
                tool_calls=[
                    ToolCallRequest(name="quick" if request.step == 0 else "hangs", args={"city": str(request.step)})
                ]
            )
        )
    )
    a = Runtime(tools=[quick, hangs], model=model, store=store, lease_ttl=0.2, instance_id="A")
    b = Runtime(tools=[quick, hangs], model=model, store=store, lease_ttl=0.2, instance_id="B")
    try:
        thread = new_thread()
        run_id = await a.start_turn(turn(thread))
        async with asyncio.timeout(5):
            await second_started.wait()
        await a.aclose()  # the process dies mid-tool: no cleanup, the lease just stops being renewed
        hang["on"] = False
        assert (await store.get_run(run_id)).status == "running"

        async def resumed() -> bool:
            await b.sweep()
            return (await store.get_run(run_id)).status != "running"

        await until(resumed)
        assert await b.wait(run_id, timeout=5) == "completed"
        assert len(settled_runs) == 1, "a settled tool never runs twice"
        assert len(unsettled_keys) == 2 and unsettled_keys[0] == unsettled_keys[1], "same idempotency key"
        events = await all_events(b, thread)
        assert types(events).count("tool-completed") == 2
        assert types(events)[-1] == "run-finished"
    finally:
        await b.aclose()


async def test_tenants_never_share_threads_or_approvals(make_runtime: Any) -> None:
    from gateway import ApprovalForbiddenError
    from tools import Actor

    executed: list[str] = []
    model = ScriptedModel(
        lambda request, i: (
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k"})])
            if request.step == 0 and request.last_user_text == "purge"
            else ScriptStep(text="ok")
        )
    )
    runtime = make_runtime(tools=[purge_tool(executed)], model=model)
    acme = Actor(id="42", roles=["member"], tenant_ref="acme")
    globex = Actor(id="42", roles=["member"], tenant_ref="globex")
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "purge", actor=acme))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    with pytest.raises(ThreadForbiddenError):
        await runtime.check_thread_access(thread, globex)
    with pytest.raises(ThreadForbiddenError):
        await runtime.start_turn(turn(thread, "hello", actor=globex))
    (pending,) = await runtime.pending_approvals(thread)
    with pytest.raises(ApprovalForbiddenError):
        await runtime.decide(pending.tool_call_id, globex)
    with pytest.raises(ThreadForbiddenError):
        await runtime.cancel(run_id, globex)
    await runtime.decide(pending.tool_call_id, acme)
    assert await runtime.wait(run_id, timeout=5) == "completed" and len(executed) == 1


async def test_an_approver_role_reads_only_threads_waiting_for_it_and_never_stops_runs(make_runtime: Any) -> None:
    from gateway import ApprovalPolicy, ApprovalRule
    from tools import Actor

    executed: list[str] = []
    model = ScriptedModel(
        lambda request, i: (
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k"})])
            if request.step == 0 and request.last_user_text == "purge"
            else ScriptStep(text="ok")
        )
    )
    policy = ApprovalPolicy(rules={"purge_cache": ApprovalRule(approver="ops")})
    runtime = make_runtime(tools=[purge_tool(executed)], model=model, approval_policy=policy)
    ops = Actor(id="olga", roles=["ops"])
    quiet = new_thread()
    await runtime.wait(await runtime.start_turn(turn(quiet, "hello")), timeout=5)
    with pytest.raises(ThreadForbiddenError):
        await runtime.check_thread_access(quiet, ops)  # nothing there for ops to decide
    waiting = new_thread()
    run_id = await runtime.start_turn(turn(waiting, "purge"))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    assert (await runtime.check_thread_access(waiting, ops)).owner_id == "alice"
    with pytest.raises(ThreadForbiddenError):
        await runtime.cancel(run_id, ops)
    (pending,) = await runtime.pending_approvals(waiting)
    await runtime.decide(pending.tool_call_id, ops)
    assert await runtime.wait(run_id, timeout=5) == "completed"
    with pytest.raises(ThreadForbiddenError):
        await runtime.check_thread_access(waiting, ops)  # decided: the thread is private again
