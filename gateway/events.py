"""The one vocabulary of a run: events every channel translates into its own wire format.

Every event carries ``seq`` (per thread, strictly increasing, assigned by the store when the event
is appended), ``thread_id``, ``run_id`` and ``at`` (ISO-8601 UTC). Events are pydantic models
discriminated by ``type``; ``RUN_EVENT_ADAPTER`` parses any of them from JSON or a dict.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from tools import Actor, Confirmation, UiCapabilities

from ._unicode import REPLACEMENT
from ._unicode import valid_tree as _valid_tree

__all__ = [
    "ENDED_STATUSES",
    "MAX_ATTACHMENTS",
    "RUN_EVENT_ADAPTER",
    "ApprovalRequestedEvent",
    "ApprovalSettledEvent",
    "ApprovalStatus",
    "Attachment",
    "GuardFlaggedEvent",
    "MessageDequeuedEvent",
    "MessageQueuedEvent",
    "QueueMode",
    "QuotaWarningEvent",
    "RunErrorEvent",
    "RunEvent",
    "RunFinishedEvent",
    "RunStartedEvent",
    "RunStatus",
    "TextDeltaEvent",
    "TextEndEvent",
    "ToolCompletedEvent",
    "ToolDeniedEvent",
    "ToolFailedEvent",
    "ToolOutcome",
    "ToolStartedEvent",
    "Turn",
    "UiEvent",
    "Usage",
    "new_id",
    "now_iso",
]

RunStatus = Literal["completed", "awaiting-approval", "cancelled", "failed"]
"""How a run ended (or paused): ``awaiting-approval`` parks it until a person decides."""

ENDED_STATUSES: frozenset[str] = frozenset({"completed", "cancelled", "failed"})
"""The statuses of a run that is over for good (``awaiting-approval`` is not one: it resumes)."""

ApprovalStatus = Literal["approved", "rejected", "expired"]

ToolOutcome = Literal["completed", "failed", "denied", "cancelled"]
"""How a tool call settled, as ``RuntimeObserver.tool_settled`` hears it."""

QueueMode = Literal["queue", "interrupt", "reject"]
"""What a message that arrives while its thread has an active run does: wait its turn in the
thread's queue (``queue``), stop the active run at its next safe point and run next
(``interrupt``), or be refused with ``thread_busy`` (``reject``)."""

MAX_ATTACHMENTS = 10
"""Attachments one turn may carry."""


_last_ms = -1
_last_iso = ""


def now_iso() -> str:
    """The current UTC time as ISO-8601 with milliseconds (``2026-11-29T20:27:20.123+00:00``)."""
    global _last_ms, _last_iso
    ms = int(time.time() * 1000)
    if ms != _last_ms:  # many events share a millisecond: format once per millisecond
        _last_iso = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
        _last_ms = ms
    return _last_iso


def new_id(prefix: str) -> str:
    """A random id such as ``run_5f0c...`` (128 bits)."""
    return f"{prefix}_{os.urandom(16).hex()}"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""Control characters (C0, DEL, C1). A ``str`` field already refuses lone surrogates."""


_NAME_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What a file name may not hold: control characters and the bidirectional formatting characters."""


class Attachment(BaseModel):
    """A file a person sent with a turn: kept in the media store under ``id``.

    Channels store the bytes first (an upload, a provider's media fetched with its credentials),
    type-sniffed; a turn carries only this reference. Tools read the bytes through
    ``ctx.attachments``; the model sees images as image parts, other files by name and type.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    """The media id (``Actor``-owned: a turn may only carry its own actor's attachments)."""
    name: str = Field(default="", max_length=255)
    """The file name the person gave it (may be empty)."""
    mime: str = Field(min_length=1, max_length=127)
    """The sniffed media type (``image/png``, ``application/pdf``...)."""
    size: int = Field(ge=0)
    """Bytes."""

    @field_validator("name", mode="before")
    @classmethod
    def _printable_name(cls, value: Any) -> Any:
        # Before the type's check: a lone surrogate (a header's undecodable byte) would fail it.
        # Bidirectional controls go too: ``inv\u202egnp.exe`` would show as ``invexe.png``.
        return _NAME_HIDDEN.sub("", _valid_tree(value)) if isinstance(value, str) else value


class Turn(BaseModel):
    """One person's message, as a channel hands it to the runtime.

    The runtime never knows which transport carried it: ``channel`` is only a name, for wording.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    thread_id: str = Field(min_length=1, max_length=200)
    """The conversation; created on the first turn, owned by its first actor. No control
    characters (channels allow fewer still: ``[A-Za-z0-9_.:-]``)."""
    actor: Actor
    """Who speaks; resolved and authenticated by the channel."""
    text: str = Field(max_length=32_000)
    """What they said (a lone surrogate or a NUL character becomes U+FFFD)."""
    ui_capabilities: UiCapabilities | None = None
    """What their client can show."""
    page_context: dict[str, Any] = Field(default_factory=dict)
    """Free-form context from the client (the page, a selection...)."""
    channel: str = "api"
    """``web``, ``whatsapp``, ``ag-ui``, ``a2a``, ``api``..."""
    agent: str | None = None
    """The agent to talk to; the runtime's default when ``None``."""
    persona: str | None = Field(default=None, max_length=64)
    """The persona to speak as (an id or alias of the agent's); else the thread's pin, else the
    agent's default."""
    attachments: tuple[Attachment, ...] = Field(default=(), max_length=MAX_ATTACHMENTS)
    """Files sent with the message (already in the media store), at most ``MAX_ATTACHMENTS``."""

    @field_validator("text", "page_context", mode="before")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        # A lone surrogate has no UTF-8 form: stored as is, it would break every later read.
        return _valid_tree(value)

    @field_validator("text")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        # PostgreSQL's text cannot hold NUL, and the start of a thread's first message is kept as
        # text (its title): replaced as a lone surrogate is, on every store alike.
        return value.replace("\x00", REPLACEMENT) if "\x00" in value else value

    @field_validator("thread_id")
    @classmethod
    def _printable(cls, value: str) -> str:
        # The id is a part of store keys and of what channels key by it: no separator may hide in it.
        if _CONTROL.search(value) is not None:
            raise ValueError("must not contain control characters")
        return value


class Usage(BaseModel):
    """Tokens a run (or a model step) consumed."""

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    model_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        # Validated: pydantic-core checks three ints faster than model_construct builds a model.
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            model_calls=self.model_calls + other.model_calls,
        )


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int = 0
    """Per-thread position, assigned by the store (0 until appended)."""
    thread_id: str
    run_id: str
    at: str = Field(default_factory=now_iso)


class _Nested(BaseModel):
    """Fields of an event mirrored from a sub-agent's run into its parent's thread (a handoff).

    Set only on the mirrored copies: their ``run_id`` is the parent run's, ``tool_call_id`` the
    sub-agent's own call, ``parent_tool_call_id`` the parent's ``ask_``/``start_`` call, so a
    channel shows them nested under it.
    """

    parent_tool_call_id: str | None = None
    """The parent's handoff call this line belongs under (``None``: the run's own line)."""
    sub_agent: str | None = None
    """The agent whose run did this."""


class RunStartedEvent(_Event):
    """A run began for one turn."""

    type: Literal["run-started"] = "run-started"
    agent: str
    persona: str | None = None
    """The persona the run speaks as (its id), when the agent has one for it."""


class TextDeltaEvent(_Event):
    """A piece of the assistant's text, as the model streams it."""

    type: Literal["text-delta"] = "text-delta"
    message_id: str
    delta: str


class TextEndEvent(_Event):
    """The assistant's message is complete; ``text`` is all of it."""

    type: Literal["text-end"] = "text-end"
    message_id: str
    text: str


class ToolStartedEvent(_Nested, _Event):
    """A tool call began; ``running`` is the filled narration (``"Purging cache:42"``)."""

    type: Literal["tool-started"] = "tool-started"
    tool_call_id: str
    tool: str
    kind: Literal["read", "action"]
    input: dict[str, Any]
    label: str | None = None
    running: str
    icon: str | None = None


class ToolCompletedEvent(_Nested, _Event):
    """A tool call succeeded; ``done`` is the filled narration, ``result`` the filled result view."""

    type: Literal["tool-completed"] = "tool-completed"
    tool_call_id: str
    tool: str
    output: Any = None
    done: str
    result: dict[str, Any] | None = None


class ToolFailedEvent(_Nested, _Event):
    """A tool call failed; ``error`` is ``{code, message}``, also what the model sees."""

    type: Literal["tool-failed"] = "tool-failed"
    tool_call_id: str
    tool: str
    error: dict[str, str]


class ToolDeniedEvent(_Nested, _Event):
    """A tool call did not run: a preflight denial, a rejection or an expired approval."""

    type: Literal["tool-denied"] = "tool-denied"
    tool_call_id: str
    tool: str
    reason: str


class ApprovalRequestedEvent(_Nested, _Event):
    """An action waits for a person's decision; the run parks after this event."""

    type: Literal["approval-requested"] = "approval-requested"
    tool_call_id: str
    tool: str
    input: dict[str, Any]
    confirmation: Confirmation
    tone: Literal["neutral", "destructive"] | None = None
    approver: str
    """``"requester"`` or the role whose members may decide."""
    expires_at: str


class ApprovalSettledEvent(_Nested, _Event):
    """A decision was made (or the approval lapsed)."""

    type: Literal["approval-settled"] = "approval-settled"
    tool_call_id: str
    status: ApprovalStatus
    decided_by: str | None = None
    via: str | None = None


class UiEvent(_Nested, _Event):
    """A component to show; the same ``id`` again replaces it in place."""

    type: Literal["ui"] = "ui"
    id: str
    component: str
    version: int = 1
    props: dict[str, Any]
    fallback_text: str | None = None
    tool_call_id: str | None = None


class MessageQueuedEvent(_Event):
    """A message arrived while the thread had an active run: it waits in the thread's queue.

    ``run_id`` is the active run's (``""`` when none). Sent again with ``edited`` when its
    author changes the text or moves it first (``position`` 1).
    """

    type: Literal["message-queued"] = "message-queued"
    message_id: str
    text: str
    position: int
    """1-based place in the queue when written."""
    attachments: list[Attachment] = Field(default_factory=list)
    edited: bool = False


class MessageDequeuedEvent(_Event):
    """A queued message left the queue: it ``started`` (``run_id`` is its run), or was ``removed`` or ``cleared``."""

    type: Literal["message-dequeued"] = "message-dequeued"
    message_id: str
    reason: Literal["started", "removed", "cleared"]


class RunFinishedEvent(_Event):
    """The run ended or parked (``awaiting-approval``)."""

    type: Literal["run-finished"] = "run-finished"
    status: RunStatus
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    """What the run cost so far (its steps across resumes); ``None`` when a step's model is
    unpriced or no model step was taken (never 0 for unknown)."""


class GuardFlaggedEvent(_Event):
    """A guard let a text through but flagged it (``gateway.GuardVerdict.flag``).

    ``direction`` is ``input`` (the person's message) or ``output`` (the model's text). The
    thread's owner can read its log: a guard's reason should be one a person may see.
    """

    type: Literal["guard-flagged"] = "guard-flagged"
    direction: Literal["input", "output"]
    guard: str
    reason: str


class RunErrorEvent(_Event):
    """The run failed; followed by ``run-finished`` with status ``failed``."""

    type: Literal["run-error"] = "run-error"
    code: str
    message: str
    period: Literal["day", "month"] | None = Field(default=None, exclude_if=lambda value: value is None)
    """``quota_exceeded``: the budget that ran out (absent from other errors)."""


class QuotaWarningEvent(_Event):
    """The actor used ``warn_at`` of a token budget or more; shown once per run, before a model step."""

    type: Literal["quota-warning"] = "quota-warning"
    period: Literal["day", "month"]
    used: int
    """Tokens (input plus output) the actor used in the period, across agents and processes."""
    limit: int


RunEvent = Annotated[
    RunStartedEvent
    | TextDeltaEvent
    | TextEndEvent
    | ToolStartedEvent
    | ToolCompletedEvent
    | ToolFailedEvent
    | ToolDeniedEvent
    | ApprovalRequestedEvent
    | ApprovalSettledEvent
    | UiEvent
    | MessageQueuedEvent
    | MessageDequeuedEvent
    | GuardFlaggedEvent
    | RunFinishedEvent
    | RunErrorEvent
    | QuotaWarningEvent,
    Field(discriminator="type"),
]
"""Any event of a run."""

RUN_EVENT_ADAPTER: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
"""Parses and dumps any ``RunEvent``: ``RUN_EVENT_ADAPTER.validate_json(raw)``."""
