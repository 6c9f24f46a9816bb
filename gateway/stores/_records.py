"""What the store keeps: threads, runs and their journal, approvals, and batches of writes."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from tools import Actor, Confirmation

from ..events import RunEvent, Turn, Usage, now_iso
from ..models import AssistantMessage, ToolMessage, UserMessage

__all__ = [
    "JOURNAL_ADAPTER",
    "MAX_STEP_TOKENS",
    "TITLE_CHARS",
    "ApprovalRecord",
    "ApprovalState",
    "Batch",
    "Begun",
    "JournalEntry",
    "ModelStepEntry",
    "PlannedCall",
    "PreflightEntry",
    "QueuedMessage",
    "RunRecord",
    "RunState",
    "ThreadRecord",
    "ThreadSummary",
    "ToolSettledEntry",
]

RunState = Literal["running", "awaiting-approval", "completed", "cancelled", "failed"]
"""Where a run is: ``running`` on some process, parked, or ended."""

ApprovalState = Literal["pending", "approved", "rejected", "expired"]


class ThreadRecord(BaseModel):
    """A conversation and who owns it."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    owner_id: str
    tenant_ref: str | None = None
    channel: str | None = None
    created_at: str = Field(default_factory=now_iso)

    @property
    def owner_key(self) -> str:
        """The owner's ``Actor.key``: what stores compare to refuse a thread to anyone else.

        Built by ``Actor.key`` itself (not validated again: a record is what was stored), so both
        sides encode the same way and no (id, tenant) pair can pass for another.
        """
        return _owner_key(self.owner_id, self.tenant_ref)

    def owned_by(self, actor: Actor) -> bool:
        """Whether ``actor`` (same id, same tenant) owns the thread: the parts are compared, not joined."""
        return self.owner_id == actor.id and self.tenant_ref == actor.tenant_ref


@functools.lru_cache(maxsize=4096)
def _owner_key(owner_id: str, tenant_ref: str | None) -> str:
    """``ThreadRecord.owner_key``, kept for the recent owners: a store compares it on every turn."""
    return Actor.model_construct(id=owner_id, roles=[], tenant_ref=tenant_ref).key


class ThreadSummary(BaseModel):
    """One line of a person's list of conversations (``Store.list_threads``)."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    title: str | None = None
    """The name its owner gave it (``Store.rename_thread``), else the start of its first user
    message (at most ``TITLE_CHARS`` characters), else ``None``."""
    channel: str | None = None
    created_at: str
    last_activity: str
    """ISO time of the newest write on the thread (a turn begun, an event written)."""
    last_activity_ts: float
    """``last_activity`` as UNIX seconds: with ``thread_id``, the list's order and its cursor."""


TITLE_CHARS = 80
"""Characters of the first user message a thread's default title keeps."""


class PlannedCall(BaseModel):
    """A tool call of a model step, with the id the runtime gave it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str
    """The arguments as the model wrote them (JSON text)."""
    args: dict[str, Any] | None = None
    """The parsed arguments; ``None`` when ``arguments`` is not a JSON object."""


class RunRecord(BaseModel):
    """One run: the work a turn causes, from its first model step to its end."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    thread_id: str
    agent: str
    turn: Turn
    status: RunState = "running"
    created_at: str = Field(default_factory=now_iso)
    updated_at: str = Field(default_factory=now_iso)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    """What the run's model steps cost (``gateway._pricing``); ``None`` while unknown: no step
    yet, or a step whose model is unpriced (never counted as 0)."""
    quota_warned: bool = False
    """A ``quota-warning`` was shown in this run (it is shown once per run, across resumes)."""
    first_seq: int = 0
    """The seq of the run's ``run-started`` event."""
    cancel_requested: bool = False
    error: dict[str, str] | None = None
    persona: str | None = None
    """The persona the run speaks as, resolved once when it began (its id, never an alias)."""
    parent_run_id: str | None = None
    """A sub-agent's run (a handoff): the run that delegated to it."""
    parent_thread_id: str | None = None
    """The thread of ``parent_run_id``: where the sub-run's narration and approvals are shown."""
    parent_call_id: str | None = None
    """The parent's ``ask_``/``start_`` call this run answers."""
    depth: int = 0
    """How many handoffs led to this run (0 for a person's turn)."""
    direct_call: PlannedCall | None = None
    """A run that makes this one call and no model step (an MCP ``tools/call``): the call is its
    step 0, and the run ends once it settles."""
    input_refusal: str | None = None
    """The turn's input guards refused its message (``gateway._guards``): what the person is told.
    The run ends ``input_refused`` at step 0, without calling the model."""
    trace_context: dict[str, str] | None = None
    """The W3C trace context (``traceparent``, ``tracestate``) every drive of the run continues,
    on whichever process: one trace per run (``gateway._tracing``). ``None`` while tracing is off."""

    @property
    def actor(self) -> Actor:
        """Who the run acts for."""
        return self.turn.actor


class ModelStepEntry(BaseModel):
    """A model step's answer, journaled before anything it asked for runs."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["model"] = "model"
    step: int
    message_id: str
    text: str | None = None
    calls: list[PlannedCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    """``Model.name`` of the model that took the step; ``None`` for a direct call (no model)."""
    cost_usd: float | None = None
    """What the step cost by the runtime's pricing; ``None`` when its model is unpriced."""


class ToolSettledEntry(BaseModel):
    """A tool call's outcome; a settled call never runs again."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    status: Literal["completed", "failed", "denied"]
    output: Any = None
    error: dict[str, str] | None = None
    reason: str | None = None

    def model_content(self) -> Any:
        """What the model reads as this call's result."""
        match self.status:
            case "completed":
                return self.output
            case "failed":
                return {"error": self.error}
            case _:
                return {"denied": True, "reason": self.reason}


class PreflightEntry(BaseModel):
    """The answer of an action's preflight for one phase, so a replay takes the same branch."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["preflight"] = "preflight"
    tool_call_id: str
    phase: Literal["prepare", "execute"]
    result: dict[str, Any]


JournalEntry = Annotated[ModelStepEntry | ToolSettledEntry | PreflightEntry, Field(discriminator="kind")]
JOURNAL_ADAPTER: TypeAdapter[JournalEntry] = TypeAdapter(JournalEntry)


class ApprovalRecord(BaseModel):
    """An action waiting for (or given) a person's decision."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str
    run_id: str
    thread_id: str
    tool: str
    input: dict[str, Any]
    requester_id: str
    requester_tenant: str | None = None
    """The requester's tenant: deciders must belong to it."""
    approver: str = "requester"
    """``"requester"``, or the role whose members may decide."""
    confirmation: Confirmation
    tone: Literal["neutral", "destructive"] | None = None
    requested_at: str = Field(default_factory=now_iso)
    requested_ts: float = Field(default_factory=time.time)
    """``requested_at`` as UNIX seconds: with ``tool_call_id``, the order of ``Store.open_approvals``."""
    expires_at: str
    expires_ts: float
    """``expires_at`` as UNIX seconds."""
    status: ApprovalState = "pending"
    decided_by: str | None = None
    via: str | None = None
    reason: str | None = None
    decided_at: str | None = None
    remember: bool = False

    def lapsed(self, now: float | None = None) -> bool:
        """Whether the approval is past its expiry."""
        return (time.time() if now is None else now) >= self.expires_ts


class QueuedMessage(BaseModel):
    """A message waiting in its thread's queue for the active run to end (``Store.enqueue_message``).

    It becomes the thread's next turn: ``turn`` is what the runtime starts then, as sent.
    """

    model_config = ConfigDict(extra="forbid")

    message_id: str
    thread_id: str
    turn: Turn
    queued_at: str = Field(default_factory=now_iso)
    queued_ts: float = Field(default_factory=time.time)


@dataclass(kw_only=True)
class Batch:
    """Writes of one step, applied together (one round trip on Redis).

    The events get their ``seq`` when written; ``Store.write`` returns them with it.
    """

    run: RunRecord | None = None
    """Save this run record (replacing the stored one)."""
    events: list[RunEvent] = field(default_factory=list)
    journal: list[ModelStepEntry | ToolSettledEntry | PreflightEntry] = field(default_factory=list)
    """Appended to the journal of ``run``."""
    messages: list[UserMessage | AssistantMessage | ToolMessage] = field(default_factory=list)
    """Appended to the thread's history."""
    approvals: list[ApprovalRecord] = field(default_factory=list)
    """Pending approvals to record."""
    release: bool = False
    """The run stops running here (it parked or ended): free the thread and drop the lease."""
    write_id: str = ""
    """Names this write, once a store that may receive it twice (a resend after a lost reply,
    a driver writing again once the store is back) gives it a name; it applies it once."""
    usage: list[UsageEntry] = field(default_factory=list)
    """The ledger entries of the batch's model steps, for a store that charges them with the
    write (``RedisStore`` on one server: in the write's round trip, only if the write applied);
    a store that did sets ``charged``, and the others leave them to ``UsageMeter.charge``."""
    charged: bool = False
    """Set by the store that charged ``usage`` with the write."""


@dataclass(kw_only=True)
class Begun:
    """What ``Store.begin_run`` answers: the run's first events and the thread's history."""

    events: list[RunEvent]
    """The batch's events, with their ``seq``."""
    history: list[UserMessage | AssistantMessage | ToolMessage]
    """The thread's messages, the new turn's included: what the run's first model step reads."""


MAX_STEP_TOKENS = 1_000_000_000
"""Input (or output) tokens one model step may charge at most: more is no real step."""


class UsageEntry(BaseModel):
    """One model step's tokens, charged to its actor's ledger for one UTC day."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    actor_key: str = Field(min_length=1)
    """``Actor.key``: the id, qualified by the tenant."""
    day: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
    """The UTC day of the step, ``YYYY-MM-DD`` (a real date); its month is the first seven characters."""
    agent: str
    model: str
    input_tokens: int = Field(ge=0, le=MAX_STEP_TOKENS)
    output_tokens: int = Field(ge=0, le=MAX_STEP_TOKENS)
    cost_usd: float | None = Field(default=None, ge=0, le=1_000_000, allow_inf_nan=False)
    """What the step cost, or ``None`` when its model is unpriced (never counted as 0)."""
    write_id: str | None = Field(default=None, min_length=1, max_length=400)
    """The write's key: an entry whose actor already added this write id (within
    ``USAGE_WRITE_DAYS``) adds nothing. ``UsageMeter`` gives ``<run_id>:<step>``, the same on every
    retry and every process; ``None``: every call adds."""

    @model_validator(mode="after")
    def _storable(self) -> UsageEntry:
        date.fromisoformat(self.day)  # 2026-02-30 matches the pattern; it is no day
        return self


class UsageRow(BaseModel):
    """One line of the ledger: an actor's usage of one agent and model on one UTC day."""

    model_config = ConfigDict(extra="forbid")

    day: str
    actor_key: str
    agent: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    """Model steps added to this line."""
    cost_usd: float | None = None
    """The sum over its priced steps; ``None`` when none was priced."""
    unpriced_steps: int = 0
    """Steps whose model had no price (their cost is unknown, not 0)."""


class UsageTotals(BaseModel):
    """An actor's tokens (input plus output) on one UTC day and in that day's month."""

    model_config = ConfigDict(extra="forbid")

    day_tokens: int = 0
    month_tokens: int = 0
