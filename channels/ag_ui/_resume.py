"""Interrupts and ``resume[]``: checking a resume against the thread's open approvals.

An interrupt's id is the approval's ``tool_call_id``, so ``resume[].interruptId`` maps straight to
``Runtime.decide``. The rules (AG-UI 1.0, "interrupt-aware run lifecycle"):

- a resume addresses every open interrupt of the thread (else ``resume_incomplete``);
- the answer is ``{approved, reason?}`` in the payload; ``status: "cancelled"`` rejects;
- an unknown id (or another thread's) is ``interrupt_unknown``, a lapsed one ``interrupt_expired``;
- ``remember: true`` with an approval also approves later calls of the tool in the thread; where
  the policy forbids it (a role decides: four eyes) the resume is ``remember_refused``;
- a resume replayed after it was applied changes nothing: it replays what followed it, and
  one that contradicts the decision already made is ``interrupt_settled``.

``plan_resume`` only reads; nothing is decided until the plan is carried out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import ResumeEntry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway import MAX_HANDOFF_DEPTH, ApprovalForbiddenError, ChannelRuntime, GatewayError
from tools import Actor

__all__ = [
    "APPROVAL_RESPONSE_SCHEMA",
    "ApprovalAnswer",
    "Decision",
    "InterruptError",
    "ResumePlan",
    "plan_resume",
]

APPROVAL_RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "true runs the action; false rejects it."},
        "reason": {"type": "string", "maxLength": 500, "description": "Why it was rejected (shown to the model)."},
        "remember": {
            "type": "boolean",
            "description": "With approved: also approve later calls of this tool in the thread (where allowed).",
        },
    },
    "required": ["approved"],
    "additionalProperties": False,
}
"""The ``responseSchema`` of every approval interrupt: what ``resume[].payload`` must look like."""


class ApprovalAnswer(BaseModel):
    """The payload of a ``resolved`` resume entry (``APPROVAL_RESPONSE_SCHEMA``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    approved: bool
    reason: str | None = Field(default=None, max_length=500)
    remember: bool = False


class InterruptError(GatewayError):
    """A resume (or its absence) that does not fit the thread's open interrupts.

    Reported in the stream as ``RUN_ERROR`` with ``code``: ``interrupt_pending``,
    ``interrupt_unknown``, ``interrupt_expired``, ``interrupt_settled``, ``resume_incomplete``,
    ``resume_invalid`` or ``remember_refused``.
    """

    status = 409

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One approval to decide."""

    tool_call_id: str
    approve: bool
    reason: str | None = None
    remember: bool = False


@dataclass(frozen=True, kw_only=True)
class ResumePlan:
    """What a valid resume does."""

    run_id: str
    """Our run the interrupts belong to: the stream follows it."""
    decisions: list[Decision]
    """Approvals to decide now; empty when the resume was already applied (a replay)."""
    replayed: list[str]
    """Interrupts already decided the same way: nothing to do for them."""


def _decision(entry: ResumeEntry) -> Decision:
    payload = entry.payload
    if entry.status == "cancelled":
        reason = payload.get("reason") if isinstance(payload, dict) else None
        return Decision(
            tool_call_id=entry.interrupt_id, approve=False, reason=reason if isinstance(reason, str) else None
        )
    try:
        answer = ApprovalAnswer.model_validate(payload)
    except ValidationError:
        raise InterruptError(
            "resume_invalid",
            f"The answer to interrupt {entry.interrupt_id!r} must be"
            " {approved: boolean, reason?: string, remember?: boolean}",
        ) from None
    return Decision(
        tool_call_id=entry.interrupt_id,
        approve=answer.approved,
        reason=answer.reason,
        remember=answer.remember and answer.approved,
    )


async def _run_on_thread(runtime: ChannelRuntime, run_id: str, thread_id: str) -> str:
    """The run of ``thread_id`` that ``run_id`` works for: itself, or the parent of a sub-agent's run.

    A sub-agent's events show on its parent's thread under the parent's run (``gateway._handoffs``).
    """
    for _ in range(MAX_HANDOFF_DEPTH + 1):
        run = await runtime.get_run(run_id)
        if run.thread_id == thread_id or run.parent_run_id is None:
            return run.run_id
        run_id = run.parent_run_id
    return run_id


async def plan_resume(runtime: ChannelRuntime, actor: Actor, thread_id: str, entries: list[ResumeEntry]) -> ResumePlan:
    """Check ``entries`` against the thread's approvals and say what to decide.

    Raises:
        InterruptError: The resume does not fit (reported in the stream as ``RUN_ERROR``).
        ApprovalForbiddenError: ``actor`` may not decide one of them (403, before the stream).
    """
    ids = [entry.interrupt_id for entry in entries]
    if len(set(ids)) != len(ids):
        raise InterruptError("resume_invalid", "resume answers the same interrupt twice")
    decisions: list[Decision] = []
    pending: list[Decision] = []
    replayed: list[str] = []
    run_ids: list[str] = []
    # A sub-agent's approval lives on its own thread, and the thread's person decides it here.
    open_ids = {a.tool_call_id for a in await runtime.pending_approvals(thread_id)}
    for entry in entries:
        approval = await runtime.get_approval(entry.interrupt_id)
        if approval is None or (approval.thread_id != thread_id and approval.tool_call_id not in open_ids):
            raise InterruptError("interrupt_unknown", f"No open interrupt {entry.interrupt_id!r} in this thread")
        decision = _decision(entry)
        decisions.append(decision)
        if not runtime.approval_policy.can_decide(actor, approval):
            raise ApprovalForbiddenError("You may not decide this approval")
        run_ids.append(await _run_on_thread(runtime, approval.run_id, thread_id))
        if approval.status == "expired" or (approval.status == "pending" and approval.lapsed()):
            raise InterruptError("interrupt_expired", f"Interrupt {entry.interrupt_id!r} expired")
        refusal = runtime.approval_policy.remember_refusal(approval) if decision.remember else None
        if refusal is not None and approval.status == "pending":
            raise InterruptError("remember_refused", refusal)
        if approval.status == "pending":
            pending.append(decision)
        elif (approval.status == "approved") == decision.approve:
            replayed.append(decision.tool_call_id)
        else:
            raise InterruptError("interrupt_settled", f"Interrupt {entry.interrupt_id!r} was already {approval.status}")
    missing = sorted(open_ids - set(ids))
    if missing:
        raise InterruptError("resume_incomplete", f"resume must answer every open interrupt; missing: {missing}")
    run_id = next((r for d, r in zip(decisions, run_ids, strict=True) if d in pending), run_ids[-1])
    return ResumePlan(run_id=run_id, decisions=pending, replayed=replayed)
