"""Approvals: who may decide an action (``ApprovalPolicy``) and the life of a request (``ApprovalFlow``).

The flow, in one place:

1. **Request.** An action call that passed its gates and its ``prepare`` preflight gets an
   ``ApprovalRecord`` (:meth:`ApprovalFlow.request`), unless the thread remembers an earlier
   approval of the tool. The driver writes it with ``approval-requested`` and parks the run
   (``awaiting-approval``, its lease released): a parked run is only data.
2. **Decide.** :meth:`ApprovalFlow.decide` checks the policy, claims the parked run for this
   process *before* settling (so no new turn slips in between, and a crash leaves a running run
   whose lapsing lease brings it back), settles atomically, announces ``approval-settled`` and
   resumes the run here.
3. **Expire.** A lapsed request is settled ``expired`` by the sweep, by a late ``decide``, or by
   the driver when it finds it lapsed on resume (:meth:`ApprovalFlow.verdict`); the model is told.
4. **Supersede.** A new turn on the thread, or a Stop, ends a parked run: its pending requests
   are rejected and its unsettled calls denied (:meth:`ApprovalFlow.end_parked`).
5. **Resume.** A resumed run replays its journal and asks :meth:`ApprovalFlow.verdict` what was
   decided: approved calls run (gates and the ``execute`` preflight afresh), others are denied.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from tools import Actor, PreflightReady, Tool, UserError, resolve_confirmation

from ._errors import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    RememberRefusedError,
    ThreadBusyError,
)
from ._leases import Leases
from .events import ApprovalRequestedEvent, ApprovalSettledEvent, RunEvent, now_iso
from .stores import ApprovalRecord, Batch, RunRecord, Store

__all__ = ["REQUESTER", "ApprovalFlow", "ApprovalPolicy", "ApprovalRule", "Verdict"]

REQUESTER = "requester"
"""The approver value meaning "the person whose turn asked for the action"."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRule:
    """How one tool's calls are approved.

    Attributes:
        approver: ``"requester"``, or a role whose members decide (the requester alone cannot,
            unless they hold the role: four eyes).
        ttl: Seconds a request waits before it expires and the model is told so.
    """

    approver: str = REQUESTER
    ttl: float = 24 * 3600.0

    def __post_init__(self) -> None:
        if not isinstance(self.approver, str) or not self.approver:
            raise UserError("ApprovalRule.approver must be 'requester' or a role name")
        if isinstance(self.ttl, bool) or not isinstance(self.ttl, int | float) or self.ttl <= 0:
            raise UserError("ApprovalRule.ttl must be a positive number of seconds")


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """Decides who approves each action tool and how long a request waits.

    Attributes:
        default: The rule for tools without one of their own (the requester, 24 h).
        rules: Per-tool rules, by tool name.
        allow_remember: Whether a decision may ``remember`` (approve later calls of the same
            tool in the same thread without asking).
        on_new_message: What a new message does to a run parked on its thread for an approval:
            ``queue`` (it waits behind the approval, which stays pending; the person is reminded
            of what waits) or ``supersede`` (the pending actions are rejected, the parked run
            ends and the new message runs: the first wave's behaviour).
    """

    default: ApprovalRule = field(default_factory=ApprovalRule)
    rules: Mapping[str, ApprovalRule] = field(default_factory=dict)
    allow_remember: bool = True
    on_new_message: Literal["queue", "supersede"] = "queue"

    def __post_init__(self) -> None:
        if self.on_new_message not in ("queue", "supersede"):
            raise UserError("ApprovalPolicy.on_new_message must be 'queue' or 'supersede'")

    def rule_for(self, tool: Tool) -> ApprovalRule:
        """The rule that applies to ``tool``."""
        return self.rules.get(tool.name, self.default)

    def can_decide(self, actor: Actor, approval: ApprovalRecord) -> bool:
        """Whether ``actor`` may decide ``approval``.

        The requester may, or a member of the approver role; in the requester's tenant either way.
        """
        if actor.tenant_ref != approval.requester_tenant:
            return False
        if approval.approver == REQUESTER:
            return actor.id == approval.requester_id
        return approval.approver in actor.roles

    def remember_refusal(self, approval: ApprovalRecord) -> str | None:
        """Why a decision of ``approval`` may not ``remember`` (in words for a person), or ``None``.

        A role's approvals are never remembered: each call waits for a person of the role (four
        eyes). Nor is anything when ``allow_remember`` is off.
        """
        if approval.approver != REQUESTER:
            return f"This action needs a person with the role {approval.approver!r} each time; it cannot be remembered."
        if not self.allow_remember:
            return "Decisions are not remembered here; approve each action on its own."
        return None

    def approver_roles(self) -> frozenset[str]:
        """Every role that approves some tool (its members may read the threads they decide in)."""
        roles = {rule.approver for rule in (self.default, *self.rules.values())}
        return frozenset(roles - {REQUESTER})


_PARKED = frozenset({"awaiting-approval"})


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What a driver does with an action call, given what was decided about it.

    Attributes:
        outcome: ``approved`` (run it), ``ask`` (request an approval and park), ``wait`` (its
            request is pending: park again), or ``denied`` (tell the model ``reason``).
        reason: Why it was denied, in words the model reads.
        events: Events to write with the call's next batch (an expiry found on resume).
        approval: The call's request as settled (``None``: none was made, or it is pending).
    """

    outcome: Literal["approved", "ask", "wait", "denied"]
    reason: str | None = None
    events: tuple[RunEvent, ...] = ()
    approval: ApprovalRecord | None = None


@dataclass(kw_only=True)
class ApprovalFlow:
    """Request, decide, expire, supersede and resume: the life of an approval (module docstring)."""

    store: Store
    policy: ApprovalPolicy
    leases: Leases
    write: Callable[[str, Batch], Awaitable[list[RunEvent]]]
    """Writes a batch to a thread (and tells the runtime's observers)."""
    resume: Callable[[RunRecord], None]
    """Drives a run this process just claimed, from its journal."""
    end: Callable[[RunRecord, str], Awaitable[Any]]
    """Ends a claimed parked run: its unsettled calls denied with the reason, ``cancelled``."""

    # -- the driver's side ------------------------------------------------------------------------

    def request(
        self, run: RunRecord, call_id: str, tool: Tool, data: dict[str, Any], verdict: PreflightReady
    ) -> ApprovalRecord:
        """The approval request of an action call (``data`` is its validated input as JSON)."""
        rule = self.policy.rule_for(tool)
        expires = time.time() + rule.ttl
        return ApprovalRecord(
            tool_call_id=call_id,
            run_id=run.run_id,
            thread_id=run.thread_id,
            tool=tool.name,
            input=data,
            requester_id=run.turn.actor.id,
            requester_tenant=run.turn.actor.tenant_ref,
            approver=rule.approver,
            confirmation=resolve_confirmation(tool.name, data, tool.presentation, verdict),
            tone=tool.presentation.tone if tool.presentation else None,
            expires_at=datetime.fromtimestamp(expires, UTC).isoformat(timespec="seconds"),
            expires_ts=expires,
        )

    @staticmethod
    def requested_event(approval: ApprovalRecord) -> ApprovalRequestedEvent:
        """The ``approval-requested`` event of a new request."""
        return ApprovalRequestedEvent(
            thread_id=approval.thread_id,
            run_id=approval.run_id,
            at=now_iso(),
            tool_call_id=approval.tool_call_id,
            tool=approval.tool,
            input=approval.input,
            confirmation=approval.confirmation,
            tone=approval.tone,
            approver=approval.approver,
            expires_at=approval.expires_at,
        )

    async def verdict(self, run: RunRecord, call_id: str, tool: str) -> Verdict:
        """What was decided about the call (a lapsed pending request is settled ``expired`` here)."""
        approval = await self.store.get_approval(call_id)
        if approval is None:
            remembered = await self.store.is_remembered(run.thread_id, tool)
            return Verdict(outcome="approved" if remembered else "ask")
        events: tuple[RunEvent, ...] = ()
        if approval.status == "pending":
            if not approval.lapsed():
                return Verdict(outcome="wait")
            expired = await self.store.settle_approval(call_id, status="expired", decided_by=None, via="expiry")
            if expired is not None:
                events = (self._settled_event(expired),)
            approval = expired or await self.store.get_approval(call_id) or approval
        match approval.status:
            case "approved":
                return Verdict(outcome="approved", events=events, approval=approval)
            case "expired":
                reason = "The approval request expired before anyone decided."
            case _:
                # An anonymous id means nothing to a person (or the model): leave it out.
                named = approval.decided_by and not approval.decided_by.startswith("anon:")
                who = f" by {approval.decided_by}" if named else ""
                detail = f": {approval.reason}" if approval.reason else ""
                reason = f"Rejected{who}{detail}."
        return Verdict(outcome="denied", reason=reason, events=events, approval=approval)

    # -- the people's side ------------------------------------------------------------------------

    async def decide(
        self, tool_call_id: str, actor: Actor, *, approve: bool, reason: str | None, via: str, remember: bool
    ) -> ApprovalRecord:
        """Decide a pending approval as ``actor`` and resume its run (on this process).

        Raises:
            ApprovalNotFoundError: No approval with that id (404).
            ApprovalForbiddenError: ``actor`` may not decide it (403).
            ApprovalSettledError: It was already decided (409).
            ApprovalExpiredError: It lapsed; the run is told it expired (410).
            RememberRefusedError: ``remember`` where the policy forbids it (403; nothing decided).
            ThreadBusyError: Its run is being driven right now (409; a retry gets the answer).
        """
        approval = await self.store.get_approval(tool_call_id)
        if approval is None:
            raise ApprovalNotFoundError(f"No approval {tool_call_id!r}")
        if not self.policy.can_decide(actor, approval):
            raise ApprovalForbiddenError("You may not decide this approval")
        if approval.status != "pending":
            raise ApprovalSettledError(f"The approval was already {approval.status}")
        refusal = self.policy.remember_refusal(approval) if remember and approve else None
        if refusal is not None:
            raise RememberRefusedError(refusal)
        if approval.lapsed():
            await self.expire(approval)
            raise ApprovalExpiredError("The approval has expired")
        # The run is claimed before the approval is settled: a new turn cannot slip in between
        # (the thread is busy from here on), and a crash leaves a running run whose lapsing
        # lease brings it back, to act on the decision or to ask again.
        run = await self.leases.claim(approval.run_id, expect=_PARKED)
        if run is None:
            current = await self.store.get_approval(tool_call_id)
            if current is None or current.status != "pending":
                raise ApprovalSettledError("The approval was already decided")
            raise ThreadBusyError("The run is busy right now; try again in a moment")
        try:
            settled = await self.store.settle_approval(
                tool_call_id,
                status="approved" if approve else "rejected",
                decided_by=actor.id,
                via=via,
                reason=reason,
                remember=remember and approve,  # refused above where the policy forbids it
            )
            if settled is not None:
                await self.announce(settled)
        finally:
            self.resume(run)  # it acts on whatever was decided
        if settled is None:
            raise ApprovalSettledError("The approval was already decided")
        return settled

    async def expire(self, approval: ApprovalRecord) -> None:
        """Settle a lapsed request ``expired`` and resume its run, unless a driver has it now."""
        run = await self.leases.claim(approval.run_id, expect=_PARKED)
        if run is None:
            return  # being driven: its driver finds the approval lapsed and says so itself
        try:
            settled = await self.store.settle_approval(
                approval.tool_call_id, status="expired", decided_by=None, via="expiry"
            )
            if settled is not None:
                await self.announce(settled)
        finally:
            self.resume(run)

    async def expire_lapsed(self) -> None:
        """Expire every request past its expiry (the sweep's part)."""
        for approval in await self.store.expired_approvals(time.time()):
            await self.expire(approval)

    async def supersede_parked(self, thread_id: str) -> None:
        """End the thread's parked runs: the person moved on without deciding."""
        pending = await self.store.pending_approvals(thread_id)
        for run_id in dict.fromkeys(a.run_id for a in pending):
            await self.end_parked(run_id, "The person moved on without deciding.", via="superseded")

    async def end_parked(self, run_id: str, reason: str, *, via: str) -> None:
        """End a parked run: its pending requests rejected (``via``), its calls denied."""
        run = await self.leases.claim(run_id, expect=_PARKED)
        if run is None:
            return  # not parked any more
        for approval in await self.store.pending_approvals(run.thread_id):
            if approval.run_id != run_id:
                continue
            settled = await self.store.settle_approval(
                approval.tool_call_id, status="rejected", decided_by=None, via=via, reason=reason
            )
            if settled is not None:
                await self.announce(settled)
        await self.end(run, reason)

    async def announce(self, settled: ApprovalRecord) -> None:
        """Write the ``approval-settled`` event of a decision (or an expiry) to its thread."""
        await self.write(settled.thread_id, Batch(events=[self._settled_event(settled)]))

    @staticmethod
    def _settled_event(settled: ApprovalRecord) -> ApprovalSettledEvent:
        return ApprovalSettledEvent(
            thread_id=settled.thread_id,
            run_id=settled.run_id,
            at=now_iso(),
            tool_call_id=settled.tool_call_id,
            status=settled.status,
            decided_by=settled.decided_by,
            via=settled.via,
        )
