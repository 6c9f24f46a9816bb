"""What the loop says to a model and what a model answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tools import ToolDefinition

from ..events import Attachment, Usage

__all__ = [
    "MESSAGE_ADAPTER",
    "AssistantMessage",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "TextChunk",
    "ToolCall",
    "ToolCallRequest",
    "ToolMessage",
    "UserMessage",
]


class ToolCall(BaseModel):
    """A tool call as history keeps it: our id, the tool's name, its arguments as JSON text."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: str


class UserMessage(BaseModel):
    """What the person said."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user"] = "user"
    content: str
    attachments: list[Attachment] = Field(default_factory=list)
    """Files sent with the message (media-store references; messages stored before had none)."""


class AssistantMessage(BaseModel):
    """What the model said, and the tools it called."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolMessage(BaseModel):
    """A tool call's result as the model reads it (JSON text)."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str


Message = Annotated[UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]
"""One entry of a thread's history."""

MESSAGE_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class ToolCallRequest(BaseModel):
    """A tool call a model asks for.

    ``args`` is a dict, or the raw JSON text the model produced (which may be invalid: the loop
    reports that to the model as a failed call). ``id`` is the model's own id, if any; the
    runtime assigns every call a globally unique id of its own.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """The arguments as JSON text (the raw text when the model gave text)."""
        return self.args if isinstance(self.args, str) else json.dumps(self.args, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the model's text."""

    delta: str


ModelChunk = TextChunk | ToolCallRequest | Usage
"""What a model's stream yields: text pieces, complete tool calls, and usage (once, at the end)."""


@dataclass(kw_only=True)
class ModelRequest:
    """One model step: what the model sees."""

    agent: str
    """The agent's name."""
    instructions: str
    """The agent's system instructions."""
    messages: list[UserMessage | AssistantMessage | ToolMessage]
    """The thread's history, the new turn and this run's steps so far."""
    tools: list[ToolDefinition] = field(default_factory=list)
    """The tools this actor may use through this agent (already gated)."""
    step: int = 0
    """The index of this step in the run."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Channel, page context and actor id, for models that care (the demo model does)."""
    read_attachment: Callable[[Attachment], Awaitable[bytes]] | None = None
    """Reads an attachment's bytes (images go to the model inline); ``None`` when none can be read."""

    @property
    def last_user_text(self) -> str:
        """The text of the newest user message ("" when none)."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message.content
        return ""


@runtime_checkable
class Model(Protocol):
    """A language model the loop can drive.

    ``stream(request)`` yields ``TextChunk``s and complete ``ToolCallRequest``s in the order the
    model produced them, then at most one ``Usage``. It raises ``ModelError`` on failure.

    Write it as an async generator (``async def stream(self, request) -> AsyncIterator[ModelChunk]``
    with ``yield``): the loop closes it (``aclose``) when it stops reading early, so its
    ``finally`` (closing an HTTP response, say) runs at once.
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """The chunks of one model step, in order."""
        ...
