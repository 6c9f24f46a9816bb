"""The web socket's client frames (``hello``, ``send``, ``approve``, ``reject``, ``cancel``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from gateway.events import MAX_ATTACHMENTS
from tools import UiCapabilities

__all__ = [
    "CLIENT_FRAME",
    "FRAME_TYPES",
    "ApproveFrame",
    "CancelFrame",
    "ClientFrame",
    "HelloFrame",
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


class SendFrame(_Frame):
    """A message from the person: starts a turn."""

    type: Literal["send"]
    text: str = Field(default="", max_length=8000)
    """At least one character that is not whitespace, unless files come with it."""
    page_context: dict[str, Any] = Field(default_factory=dict)
    attachments: list[str] = Field(default_factory=list, max_length=MAX_ATTACHMENTS)
    """Ids of files this socket's actor uploaded (``POST /agent/attachments``)."""

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


ClientFrame = Annotated[HelloFrame | SendFrame | ApproveFrame | RejectFrame | CancelFrame, Field(discriminator="type")]
CLIENT_FRAME: TypeAdapter[HelloFrame | SendFrame | ApproveFrame | RejectFrame | CancelFrame] = TypeAdapter(ClientFrame)
FRAME_TYPES = frozenset({"hello", "send", "approve", "reject", "cancel"})
