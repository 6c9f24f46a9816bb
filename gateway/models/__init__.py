"""Models the loop can drive: the ``Model`` protocol, ``ScriptedModel`` and ``OpenAIModel``."""

from typing import TYPE_CHECKING, Any

from ._base import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    Message,
    Model,
    ModelChunk,
    ModelRequest,
    TextChunk,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from ._scripted import ScriptedModel, ScriptStep

if TYPE_CHECKING:
    from ._openai import OpenAIModel

__all__ = [
    "MESSAGE_ADAPTER",
    "AssistantMessage",
    "Message",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "OpenAIModel",
    "ScriptStep",
    "ScriptedModel",
    "TextChunk",
    "ToolCall",
    "ToolCallRequest",
    "ToolMessage",
    "UserMessage",
]


def __getattr__(name: str) -> Any:
    # OpenAIModel needs the optional ``openai`` package: import it only when asked for.
    if name == "OpenAIModel":
        from ._openai import OpenAIModel

        return OpenAIModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
