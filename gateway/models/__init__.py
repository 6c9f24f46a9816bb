"""Models the loop can drive: the ``Model`` protocol, ``ScriptedModel``, ``OpenAIModel`` and ``AnthropicModel``."""

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
    from ._anthropic import AnthropicModel
    from ._openai import OpenAIModel

__all__ = [
    "MESSAGE_ADAPTER",
    "AnthropicModel",
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
    # OpenAIModel and AnthropicModel need optional packages: import them only when asked for.
    if name == "OpenAIModel":
        from ._openai import OpenAIModel

        return OpenAIModel
    if name == "AnthropicModel":
        from ._anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
