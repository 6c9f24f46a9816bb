"""Approvals over AG-UI: a run ends with an interrupt, a new run with ``resume[]`` decides it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import ResumeEntry, RunFinishedEvent

import gateway.stores._records as records
from channels.ag_ui import APPROVAL_RESPONSE_SCHEMA
from gateway import SERVICES

from .conftest import BOB, Client, Frame, RefusalLog, Shop, approve, new_id, of_type, post, run, run_input, types


async def park(client: Client, key: str = "cache:42", thread_id: str | None = None) -> tuple[str, list[Frame]]:
    thread_id = thread_id or new_id("t")
    return thread_id, await run(client, run_input(thread_id, f"purge {key}"))


def interrupt_of(frames: list[Frame]) -> dict[str, Any]:
    outcome = frames[-1].data["outcome"]
    assert outcome["type"] == "interrupt" and len(outcome["interrupts"]) == 1
    interrupt: dict[str, Any] = outcome["interrupts"][0]
    return interrupt


async def test_approve_via_resume(client: Client, shop: Shop) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id, frames = await park(client)
    assert types(frames) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM agora.approval-requested",
        "RUN_FINISHED",
    ]
    first_run = frames[0].data["runId"]
    interrupt = interrupt_of(frames)
    call_id = frames[1].data["toolCallId"]
    assert interrupt["id"] == interrupt["toolCallId"] == call_id
    assert interrupt["reason"] == "tool_call" and interrupt["message"] == "Purge cache:42?"
    assert interrupt["responseSchema"] == APPROVAL_RESPONSE_SCHEMA
    approval = await runtime.store.get_approval(call_id)
    assert approval is not None and interrupt["expiresAt"] == approval.expires_at
    assert frames[1].data["metadata"]["confirmation"]["title"] == "Purge cache:42?"
    request = frames[4].data["value"]
    assert request["toolCallId"] == call_id and request["input"] == {"key": "cache:42"}
    assert request["tone"] == "destructive" and request["approver"] == "requester"
    assert frames[-1].data["metadata"]["status"] == "awaiting-approval"
    assert shop.executed == []

    resumed = await run(client, run_input(thread_id, run_id="run-2", resume=[approve(call_id)]))
    assert types(resumed) == [
        "RUN_STARTED",
        "CUSTOM agora.approval-settled",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert resumed[0].data["runId"] == resumed[-1].data["runId"] == "run-2" != first_run
    assert resumed[0].data["metadata"]["agoraRunId"] == frames[0].data["metadata"]["agoraRunId"]
    assert resumed[0].id == frames[-1].id
    assert resumed[1].data["value"] == {
        "toolCallId": call_id,
        "status": "approved",
        "decidedBy": "alice",
        "via": "ag-ui",
    }
    result = resumed[2].data
    assert result["toolCallId"] == call_id and json.loads(result["content"]) == {"purged": "cache:42"}
    assert result["metadata"]["done"] == "Purged cache:42"
    assert resumed[4].data["delta"] == "Purged."
    finished = resumed[-1].event
    assert isinstance(finished, RunFinishedEvent) and finished.outcome and finished.outcome.type == "success"
    assert shop.executed == ["cache:42"]
    settled = await runtime.store.get_approval(call_id)
    assert settled is not None and (settled.status, settled.decided_by, settled.via) == ("approved", "alice", "ag-ui")

    # The same resume again changes nothing: it replays what followed it, under the new runId.
    again = await run(client, run_input(thread_id, run_id="run-3", resume=[approve(call_id)]))
    assert types(again) == types(resumed)
    assert [f.data.get("toolCallId") for f in again] == [f.data.get("toolCallId") for f in resumed]
    assert again[0].data["runId"] == again[-1].data["runId"] == "run-3"
    assert shop.executed == ["cache:42"]
    assert await runtime.store.get_approval(call_id) == settled


async def test_reject_via_resume_and_cancelled_status(client: Client, shop: Shop) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id, frames = await park(client, "users")
    call_id = interrupt_of(frames)["id"]
    rejected = await run(client, run_input(thread_id, resume=[approve(call_id, False, "Not today")]))
    assert types(rejected) == [
        "RUN_STARTED",
        "CUSTOM agora.approval-settled",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert rejected[1].data["value"]["status"] == "rejected"
    result = rejected[2].data
    assert result["metadata"]["status"] == "denied" and "Not today" in result["metadata"]["reason"]
    assert json.loads(result["content"])["denied"] is True
    assert rejected[4].data["delta"] == "Not purged."
    approval = await runtime.store.get_approval(call_id)
    assert approval is not None and (approval.status, approval.reason) == ("rejected", "Not today")

    # status "cancelled" abandons the interrupt: a rejection.
    thread_id, frames = await park(client, "logs")
    call_id = interrupt_of(frames)["id"]
    cancelled = await run(client, run_input(thread_id, resume=[ResumeEntry(interrupt_id=call_id, status="cancelled")]))
    assert cancelled[1].data["value"]["status"] == "rejected"
    assert of_type(cancelled, "TOOL_CALL_RESULT")[0].data["metadata"]["status"] == "denied"
    assert shop.executed == []


async def test_bad_resumes_are_run_errors_and_decide_nothing(
    client: Client, shop: Shop, monkeypatch: Any, refusal_log: RefusalLog
) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id, frames = await park(client)
    call_id = interrupt_of(frames)["id"]

    async def refused(body: dict[str, Any]) -> dict[str, Any]:
        answer = await run(client, body)
        assert types(answer) == ["RUN_STARTED", "RUN_ERROR"]
        assert answer[0].data["runId"] == body["runId"]
        error: dict[str, Any] = answer[1].data
        refusal_log.one("RUN_ERROR", error["code"])  # one line, no traceback
        return error

    # A new message while the interrupt is open (no resume at all): not silently superseded.
    error = await refused(run_input(thread_id, "something else"))
    assert error["code"] == "interrupt_pending" and call_id in error["message"]
    # Unknown id; another thread's interrupt is unknown here too.
    assert (await refused(run_input(thread_id, resume=[approve("tc_nope")])))["code"] == "interrupt_unknown"
    other_thread, other = await park(client, "elsewhere")
    other_id = interrupt_of(other)["id"]
    assert (await refused(run_input(thread_id, resume=[approve(other_id)])))["code"] == "interrupt_unknown"
    # A payload that is not {approved, reason?}.
    for payload in [None, {"approved": "yes"}, {"ok": True}, {"approved": True, "extra": 1}]:
        entry = ResumeEntry(interrupt_id=call_id, status="resolved", payload=payload)
        assert (await refused(run_input(thread_id, resume=[entry])))["code"] == "resume_invalid"
    twice = [approve(call_id), approve(call_id)]
    assert (await refused(run_input(thread_id, resume=twice)))["code"] == "resume_invalid"

    approval = await runtime.store.get_approval(call_id)
    assert approval is not None and approval.status == "pending" and shop.executed == []

    # Another actor may not decide it: 403 before any stream.
    forbidden = await post(client, run_input(other_thread, resume=[approve(other_id)]), actor=BOB)
    assert forbidden.status == 403
    refusal_log.one(403, "thread_forbidden")

    # An expired interrupt.
    future = records.time.time() + 30 * 24 * 3600
    monkeypatch.setattr(records.time, "time", lambda: future)
    assert (await refused(run_input(thread_id, resume=[approve(call_id)])))["code"] == "interrupt_expired"
    assert shop.executed == []


async def test_a_partial_resume_and_a_contradicting_replay(client: Client, shop: Shop) -> None:
    # Two actions one after the other: the second interrupt opens once the first is approved.
    thread_id, frames = await park(client, "two")
    first_id = interrupt_of(frames)["id"]
    resumed = await run(client, run_input(thread_id, resume=[approve(first_id)]))
    assert types(resumed)[-5:] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM agora.approval-requested",
        "RUN_FINISHED",
    ]
    second_id = interrupt_of(resumed)["id"]
    assert second_id != first_id and shop.executed == ["a"]

    # Replaying only the first resume leaves the second interrupt unanswered.
    partial = await run(client, run_input(thread_id, resume=[approve(first_id)]))
    assert types(partial) == ["RUN_STARTED", "RUN_ERROR"]
    assert partial[1].data["code"] == "resume_incomplete" and second_id in partial[1].data["message"]
    # Contradicting a decision already made.
    contradicting = await run(client, run_input(thread_id, resume=[approve(first_id, False), approve(second_id)]))
    assert contradicting[1].data["code"] == "interrupt_settled"
    assert shop.executed == ["a"]

    # Answering everything open (an old answer repeated alongside is harmless).
    done = await run(client, run_input(thread_id, resume=[approve(first_id), approve(second_id, False)]))
    assert of_type(done, "TOOL_CALL_RESULT")[0].data["toolCallId"] == second_id
    assert done[-1].data["outcome"] == {"type": "success"} and shop.executed == ["a"]


@pytest.mark.parametrize("status", ["resolved", "cancelled"])
async def test_resume_on_a_thread_without_interrupts(client: Client, status: str) -> None:
    thread_id = new_id("t")
    await run(client, run_input(thread_id, "hello"))
    answer = await run(client, run_input(thread_id, resume=[ResumeEntry(interrupt_id="tc_x", status=status)]))
    assert types(answer) == ["RUN_STARTED", "RUN_ERROR"] and answer[1].data["code"] == "interrupt_unknown"


async def test_remember_in_a_resume_approves_later_calls_and_is_refused_where_a_role_decides(
    client: Client, shop: Shop, refusal_log: RefusalLog
) -> None:
    from gateway import ApprovalPolicy, ApprovalRule

    runtime = client.app[SERVICES].runtime
    thread_id, frames = await park(client, "cache:1")
    call_id = interrupt_of(frames)["id"]
    remembered = ResumeEntry(interrupt_id=call_id, status="resolved", payload={"approved": True, "remember": True})
    resumed = await run(client, run_input(thread_id, resume=[remembered]))
    assert resumed[-1].data["outcome"]["type"] == "success"
    settled = await runtime.store.get_approval(call_id)
    assert settled is not None and (settled.status, settled.remember) == ("approved", True)
    later = await run(client, run_input(thread_id, "purge cache:2"))  # the same tool again: not asked
    assert later[-1].data["outcome"]["type"] == "success" and shop.executed == ["cache:1", "cache:2"]

    # Where a role decides (four eyes), remember is refused: a RUN_ERROR, nothing decided.
    runtime.approval_policy = ApprovalPolicy(rules={"purge_cache": ApprovalRule(approver="member")})
    thread_id, frames = await park(client, "cache:3")
    call_id = interrupt_of(frames)["id"]
    entry = ResumeEntry(interrupt_id=call_id, status="resolved", payload={"approved": True, "remember": True})
    answer = await run(client, run_input(thread_id, resume=[entry]))
    assert types(answer) == ["RUN_STARTED", "RUN_ERROR"]
    assert answer[1].data["code"] == "remember_refused" and "role 'member'" in answer[1].data["message"]
    refusal_log.one("RUN_ERROR", "remember_refused")
    pending = await runtime.store.get_approval(call_id)
    assert pending is not None and pending.status == "pending" and "cache:3" not in shop.executed
