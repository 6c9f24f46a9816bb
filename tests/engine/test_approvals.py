"""Actions: preflight, approval requests, decisions, expiry, remembered approvals."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import gateway.stores._records as records
from gateway import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalPolicy,
    ApprovalRule,
    ApprovalSettledError,
    RememberRefusedError,
    ThreadBusyError,
)
from gateway.events import ApprovalRequestedEvent, ApprovalSettledEvent, ToolCompletedEvent, ToolDeniedEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest, ToolMessage
from tools import Actor, Confirmation, PreflightCompleted, PreflightDenied, PreflightReady

from .conftest import ALICE, BOB, KeyInput, all_events, new_thread, purge_tool, turn, types, until


def purge_then(text: str = "Done.", key: str = "sessions:42") -> ScriptedModel:
    return ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": key})]), ScriptStep(text=text)]
    )


async def park(runtime: Any, thread: str, actor: Actor = ALICE) -> tuple[str, ApprovalRequestedEvent]:
    run_id = await runtime.start_turn(turn(thread, "purge it", actor=actor))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    events = await all_events(runtime, thread)
    requested = [e for e in events if isinstance(e, ApprovalRequestedEvent) and e.run_id == run_id]
    assert len(requested) == 1
    return run_id, requested[0]


async def test_an_action_parks_then_runs_once_after_approval(make_runtime: Any) -> None:
    executed: list[str] = []
    runtime = make_runtime(tools=[purge_tool(executed)], model=purge_then())
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    assert requested.confirmation == Confirmation(title="Purge sessions:42?", verb="Purge")
    assert requested.tone == "destructive" and requested.approver == "requester"
    assert requested.input == {"key": "sessions:42"}
    assert executed == []
    assert types(await all_events(runtime, thread))[-2:] == ["approval-requested", "run-finished"]
    pending = await runtime.pending_approvals(thread)
    assert [p.tool_call_id for p in pending] == [requested.tool_call_id]

    settled = await runtime.decide(requested.tool_call_id, ALICE, approve=True, via="web")
    assert settled.status == "approved" and settled.decided_by == "alice"
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert executed == [f"{run_id}:{requested.tool_call_id}"]
    after = await all_events(runtime, thread, requested.seq)
    assert types(after) == [
        "run-finished", "approval-settled", "tool-started", "tool-completed", "text-delta", "text-end", "run-finished",
    ]  # fmt: skip
    settled_event = after[1]
    assert isinstance(settled_event, ApprovalSettledEvent)
    assert (settled_event.status, settled_event.decided_by, settled_event.via) == ("approved", "alice", "web")
    assert after[3].done == "Purged sessions:42"  # type: ignore[union-attr]
    assert await runtime.pending_approvals(thread) == []


async def test_a_rejection_is_fed_to_the_model_as_a_denial(make_runtime: Any) -> None:
    executed: list[str] = []
    model = purge_then("OK, I did not purge it.")
    runtime = make_runtime(tools=[purge_tool(executed)], model=model)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    await runtime.decide(requested.tool_call_id, ALICE, approve=False, reason="not now", via="web")
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert executed == []
    denied = [e for e in await all_events(runtime, thread) if isinstance(e, ToolDeniedEvent)]
    assert denied[0].reason == "Rejected by alice: not now."
    result = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)][-1]
    assert json.loads(result.content) == {"denied": True, "reason": "Rejected by alice: not now."}


async def test_decide_refuses_strangers_settled_unknown_and_expired(make_runtime: Any, monkeypatch: Any) -> None:
    executed: list[str] = []
    runtime = make_runtime(tools=[purge_tool(executed)], model=purge_then())
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    with pytest.raises(ApprovalNotFoundError):
        await runtime.decide("tc_nope", ALICE)
    with pytest.raises(ApprovalForbiddenError):
        await runtime.decide(requested.tool_call_id, BOB)
    assert (await runtime.store.get_approval(requested.tool_call_id)).status == "pending"
    await runtime.decide(requested.tool_call_id, ALICE)
    with pytest.raises(ApprovalSettledError):
        await runtime.decide(requested.tool_call_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert len(executed) == 1

    # A second request lapses: deciding it late is 410 and the model is told it expired.
    thread2 = new_thread()
    runtime2 = make_runtime(tools=[purge_tool(executed)], model=purge_then("It expired."))
    run2, requested2 = await park(runtime2, thread2)
    future = records.time.time() + 10 * 24 * 3600
    monkeypatch.setattr(records.time, "time", lambda: future)
    with pytest.raises(ApprovalExpiredError):
        await runtime2.decide(requested2.tool_call_id, ALICE)
    assert await runtime2.wait(run2, timeout=5) == "completed"
    events = await all_events(runtime2, thread2)
    assert [e.status for e in events if isinstance(e, ApprovalSettledEvent)] == ["expired"]
    denied = [e for e in events if isinstance(e, ToolDeniedEvent)]
    assert denied[0].reason == "The approval request expired before anyone decided."
    assert len(executed) == 1


async def test_lapsed_approvals_expire_in_the_background_sweep(make_runtime: Any) -> None:
    executed: list[str] = []
    policy = ApprovalPolicy(default=ApprovalRule(ttl=0.001))
    runtime = make_runtime(tools=[purge_tool(executed)], model=purge_then("Expired."), approval_policy=policy)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    approval = await runtime.store.get_approval(requested.tool_call_id)
    await until(approval.lapsed)
    await runtime.sweep()
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert (await runtime.store.get_approval(requested.tool_call_id)).status == "expired"
    assert executed == []


async def test_a_role_approver_decides_and_the_requester_cannot(make_runtime: Any) -> None:
    executed: list[str] = []
    policy = ApprovalPolicy(rules={"purge_cache": ApprovalRule(approver="ops")})
    runtime = make_runtime(tools=[purge_tool(executed)], model=purge_then(), approval_policy=policy)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    assert requested.approver == "ops"
    with pytest.raises(ApprovalForbiddenError):
        await runtime.decide(requested.tool_call_id, ALICE)
    carol = Actor(id="carol", roles=["ops"])
    assert (await runtime.check_thread_access(thread, carol)).owner_id == "alice"
    await runtime.decide(requested.tool_call_id, carol, via="web")
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert len(executed) == 1


async def test_remember_approves_later_calls_of_the_same_tool_in_the_thread(make_runtime: Any) -> None:
    executed: list[str] = []
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "a"})]),
            ScriptStep(text="first"),
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "b"})]),
            ScriptStep(text="second"),
        ]
    )
    runtime = make_runtime(tools=[purge_tool(executed)], model=model)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    await runtime.decide(requested.tool_call_id, ALICE, remember=True)
    assert await runtime.wait(run_id, timeout=5) == "completed"
    second = await runtime.start_turn(turn(thread, "again"))
    assert await runtime.wait(second, timeout=5) == "completed"
    assert len(executed) == 2
    assert types(await all_events(runtime, thread)).count("approval-requested") == 1


async def test_preflight_denies_completes_or_words_the_confirmation(make_runtime: Any) -> None:
    executed: list[str] = []

    def preflight(input: KeyInput, ctx: Any, phase: str) -> Any:
        if input.key == "missing":
            return PreflightDenied(reason="No such key")
        if input.key == "gone":
            return {"status": "completed", "output": {"purged": "gone", "already": True}}
        if phase == "prepare":
            return PreflightReady(confirmation=Confirmation(title=f"Really purge {input.key}?", verb="Yes, purge"))
        return None

    model = ScriptedModel(
        [
            ScriptStep(
                tool_calls=[
                    ToolCallRequest(name="purge_cache", args={"key": "missing"}),
                    ToolCallRequest(name="purge_cache", args={"key": "gone"}),
                    ToolCallRequest(name="purge_cache", args={"key": "live"}),
                ]
            ),
            ScriptStep(text="done"),
        ]
    )
    runtime = make_runtime(tools=[purge_tool(executed, preflight=preflight)], model=model)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    events = await all_events(runtime, thread)
    assert [e.reason for e in events if isinstance(e, ToolDeniedEvent)] == ["No such key"]
    completed = [e for e in events if isinstance(e, ToolCompletedEvent)]
    assert completed[0].output == {"purged": "gone", "already": True}
    assert requested.confirmation == Confirmation(title="Really purge live?", verb="Yes, purge")
    assert executed == []
    await runtime.decide(requested.tool_call_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert len(executed) == 1


async def test_execute_phase_preflight_and_fresh_gates_run_after_approval(make_runtime: Any) -> None:
    executed: list[str] = []
    state = {"phase_seen": [], "enabled": True}

    def preflight(input: KeyInput, ctx: Any, phase: str) -> Any:
        state["phase_seen"].append(phase)  # type: ignore[attr-defined]
        if phase == "execute":
            return PreflightCompleted(output={"purged": input.key, "by": "someone else"})
        return None

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "a"})]),
            ScriptStep(text="first"),
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "b"})]),
            ScriptStep(text="second"),
        ]
    )
    tool = purge_tool(executed, preflight=preflight, enabled=lambda: state["enabled"])
    runtime = make_runtime(tools=[tool], model=model)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    await runtime.decide(requested.tool_call_id, ALICE)
    assert await runtime.wait(run_id, timeout=5) == "completed"
    assert state["phase_seen"] == ["prepare", "execute"] and executed == []

    second, requested2 = await park(runtime, thread)
    state["enabled"] = False
    await runtime.decide(requested2.tool_call_id, ALICE)
    assert await runtime.wait(second, timeout=5) == "completed"
    failed = [e for e in await all_events(runtime, thread, requested2.seq) if e.type == "tool-failed"]
    assert failed[0].error["code"] == "tool_disabled"  # type: ignore[union-attr]
    assert executed == []


async def test_a_new_turn_supersedes_a_parked_run(make_runtime: Any) -> None:
    executed: list[str] = []
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "a"})]),
            ScriptStep(text="Never mind then."),
        ]
    )
    supersede = ApprovalPolicy(on_new_message="supersede")
    runtime = make_runtime(tools=[purge_tool(executed)], model=model, approval_policy=supersede)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    second = await runtime.start_turn(turn(thread, "actually, forget it"))
    assert await runtime.wait(second, timeout=5) == "completed"
    assert (await runtime.get_run(run_id)).status == "cancelled"
    approval = await runtime.store.get_approval(requested.tool_call_id)
    assert (approval.status, approval.via) == ("rejected", "superseded")
    with pytest.raises(ApprovalSettledError):
        await runtime.decide(requested.tool_call_id, ALICE)
    roles = [m.role for m in model.requests[1].messages]
    assert roles == ["user", "assistant", "tool", "user"]
    assert executed == []


def purge_on_request(request: Any, index: int) -> ScriptStep:
    if request.step == 0 and request.last_user_text.startswith("purge"):
        return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k"})])
    return ScriptStep(text="ok")


async def test_a_decision_racing_a_new_turn_never_strands_the_run(make_runtime: Any) -> None:
    executed: list[str] = []
    supersede = ApprovalPolicy(on_new_message="supersede")
    model = ScriptedModel(purge_on_request)
    runtime = make_runtime(tools=[purge_tool(executed)], model=model, approval_policy=supersede)
    outcomes = set()
    for _ in range(12):
        thread = new_thread()
        run_id, requested = await park(runtime, thread)
        decided, started = await asyncio.gather(
            runtime.decide(requested.tool_call_id, ALICE),
            runtime.start_turn(turn(thread, "something else")),
            return_exceptions=True,
        )
        final = await runtime.wait(run_id, timeout=5)
        approval = await runtime.store.get_approval(requested.tool_call_id)
        if approval.status == "approved":  # the decision won: the action ran, the turn was refused
            assert final == "completed" and isinstance(started, ThreadBusyError)
            outcomes.add("decided")
        else:  # the turn won: the parked run was superseded and the decision refused
            assert (approval.status, approval.via, final) == ("rejected", "superseded", "cancelled")
            assert isinstance(decided, ApprovalSettledError)
            await runtime.wait(started, timeout=5)
            outcomes.add("superseded")
    decided_runs = [k for k in executed]
    assert len(decided_runs) == len(set(decided_runs)), "no approved action ran twice"
    assert outcomes, "each race ended one way or the other"


async def test_a_process_dying_between_claim_and_decision_leaves_the_approval_askable() -> None:
    from gateway import Runtime
    from gateway.stores import MemoryStore

    store = MemoryStore()
    executed: list[str] = []
    model = ScriptedModel(purge_on_request)
    a = Runtime(tools=[purge_tool(executed)], model=model, store=store, lease_ttl=0.1)
    try:
        thread = new_thread()
        run_id, requested = await park(a, thread)
        # Another process claims the parked run to decide it, then dies before it settles.
        assert await store.claim_run(run_id, owner="dead", ttl=0.1, expect=frozenset({"awaiting-approval"}))

        async def asked_again() -> bool:
            await a.sweep()
            run = await store.get_run(run_id)
            return run is not None and run.status == "awaiting-approval"

        await until(asked_again)
        assert (await store.get_approval(requested.tool_call_id)).status == "pending"
        await a.decide(requested.tool_call_id, ALICE)
        assert await a.wait(run_id, timeout=5) == "completed"
        assert len(executed) == 1
    finally:
        await a.aclose()


async def test_remember_is_refused_for_a_four_eyes_rule(make_runtime: Any) -> None:
    executed: list[str] = []
    policy = ApprovalPolicy(rules={"purge_cache": ApprovalRule(approver="ops")})
    runtime = make_runtime(tools=[purge_tool(executed)], model=ScriptedModel(purge_on_request), approval_policy=policy)
    thread = new_thread()
    run_id, requested = await park(runtime, thread)
    carol = Actor(id="carol", roles=["ops"])
    with pytest.raises(RememberRefusedError, match="role 'ops' each time"):
        await runtime.decide(requested.tool_call_id, carol, remember=True)
    pending = await runtime.get_approval(requested.tool_call_id)
    assert pending is not None and pending.status == "pending"  # refused: nothing was decided
    settled = await runtime.decide(requested.tool_call_id, carol)
    assert settled.remember is False
    assert await runtime.wait(run_id, timeout=5) == "completed"
    second, _ = await park(runtime, thread)  # asked again: one approval never covers the next call
    assert await runtime.wait(second, timeout=5) == "awaiting-approval"


@pytest.mark.redis
async def test_a_decision_racing_a_new_turn_on_redis(make_runtime: Any, redis_url: str) -> None:
    import uuid

    from gateway.stores import RedisStore
    from tests.stores.conftest import drop_prefix

    prefix = f"race-{uuid.uuid4().hex[:8]}"
    store = RedisStore(redis_url, prefix=prefix)
    executed: list[str] = []
    runtime = make_runtime(
        tools=[purge_tool(executed)],
        model=ScriptedModel(purge_on_request),
        store=store,
        approval_policy=ApprovalPolicy(on_new_message="supersede"),
    )
    try:
        for _ in range(10):
            thread = new_thread()
            run_id, requested = await park(runtime, thread)
            await asyncio.gather(
                runtime.decide(requested.tool_call_id, ALICE),
                runtime.start_turn(turn(thread, "something else")),
                return_exceptions=True,
            )
            final = await runtime.wait(run_id, timeout=10)
            approval = await store.get_approval(requested.tool_call_id)
            assert (approval.status, final) in {("approved", "completed"), ("rejected", "cancelled")}
        assert len(executed) == len(set(executed))
    finally:
        await runtime.aclose()
        await store.aclose()
        await drop_prefix(redis_url, prefix)
