"""The web socket's client frames (``hello``, ``send``, ``approve``, ``reject``, ``cancel``, ``queue_*``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from gateway.events import MAX_ATTACHMENTS, QueueMode
from tools import UiCapabilities

__all__ = [
    "CLIENT_FRAME",
    "FRAME_TYPES",
    "ApproveFrame",
    "CancelFrame",
    "ClientFrame",
    "HelloFrame",
    "QueueEditFrame",
    "QueueRemoveFrame",
    "RejectFrame",
    "SendFrame",
]

_ID = r"^[A-Za-z0-9_.:-]{1,200}$"


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, max_length=64)
    """Echoed in the ``ack`` or ``error`` that answers this frame."""


class HelloFrame(_Frame):
    """First frame: which thread, from which ``seq``, what the client can show, who it is."""

    type: Literal["hello"]
    thread_id: str | None = Field(default=None, pattern=_ID)
    after_seq: int = Field(default=0, ge=0, le=2**53)
    ui_capabilities: UiCapabilities | None = None
    token: str | None = Field(default=None, max_length=4096)
    watch_approvals: bool = False
    """Also receive the approval feed (``approval-pending`` / ``approval-closed``): staff only."""
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    """The agent this socket's sends talk to unless one names another (the gateway's default)."""
    batch: bool = Field(default=False, strict=True)
    """Receive run events as ``batch`` frames (``{"type": "batch", "events": [...]}``)."""


class SendFrame(_Frame):
    """A message from the person: starts a turn."""

    type: Literal["send"]
    text: str = Field(default="", max_length=8000)
    """At least one character that is not whitespace, unless files come with it."""
    page_context: dict[str, Any] = Field(default_factory=dict)
    mode: QueueMode | None = None
    """What a busy thread does with it (the agent's ``queue_mode`` when omitted)."""
    attachments: list[Annotated[str, Field(pattern=_ID)]] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)
    """Ids of files this socket's actor uploaded (``POST /agent/attachments``)."""
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    """The agent to talk to (the hello's, else the gateway's default)."""
    persona: str | None = Field(default=None, min_length=1, max_length=64)
    """The persona to speak as (an id or alias of the agent's), pinned on the thread from now on."""

    @model_validator(mode="after")
    def _says_something(self) -> SendFrame:
        if not self.attachments and not self.text.strip():
            raise ValueError("text must hold a character that is not whitespace (or send attachments)")
        return self


class ApproveFrame(_Frame):
    """Approve a pending action."""

    type: Literal["approve"]
    tool_call_id: str = Field(pattern=_ID)
    remember: bool = False


class RejectFrame(_Frame):
    """Reject a pending action."""

    type: Literal["reject"]
    tool_call_id: str = Field(pattern=_ID)
    reason: str | None = Field(default=None, max_length=500)


class CancelFrame(_Frame):
    """Stop a run."""

    type: Literal["cancel"]
    run_id: str = Field(pattern=_ID)


class QueueEditFrame(_Frame):
    """Change the text of one of the person's queued messages (before it runs)."""

    type: Literal["queue_edit"]
    message_id: str = Field(pattern=_ID)
    text: str = Field(min_length=1, max_length=8000, pattern=r"\S")


class QueueRemoveFrame(_Frame):
    """Take one of the person's queued messages out of the queue."""

    type: Literal["queue_remove"]
    message_id: str = Field(pattern=_ID)


AnyFrame = HelloFrame | SendFrame | ApproveFrame | RejectFrame | CancelFrame | QueueEditFrame | QueueRemoveFrame
ClientFrame = Annotated[AnyFrame, Field(discriminator="type")]
CLIENT_FRAME: TypeAdapter[AnyFrame] = TypeAdapter(ClientFrame)
FRAME_TYPES = frozenset({"hello", "send", "approve", "reject", "cancel", "queue_edit", "queue_remove"})
