"""A run's journal as history messages, and the JSON values results become."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ._json import within_depth
from ._unicode import valid_text, valid_tree
from .models import AssistantMessage, ToolCall, ToolMessage
from .stores import ModelStepEntry, ToolSettledEntry

__all__ = ["error_value", "jsonable", "transcript_of"]

_MAX_ERROR_TEXT = 500


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (a model's fields, dates as text...), its strings valid UTF-8.

    Nested at most ``MAX_JSON_DEPTH`` levels: deeper parts are kept as their JSON text, which a
    store can read back (``within_depth``).
    """
    try:
        # The serializer passes lone surrogates in values through (the walk replaces them)...
        return within_depth(valid_tree(to_jsonable_python(within_depth(value), fallback=str)))
    except (PydanticSerializationError, UnicodeEncodeError):
        # ...but stops at one in a key: clean the Python form first (a model's as its dump).
        plain = value.model_dump() if isinstance(value, BaseModel) else value
        return within_depth(valid_tree(to_jsonable_python(within_depth(valid_tree(plain)), fallback=str)))


def error_value(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": valid_text(message[:_MAX_ERROR_TEXT])}


def transcript_of(
    steps: list[ModelStepEntry], settled: dict[str, ToolSettledEntry]
) -> list[AssistantMessage | ToolMessage]:
    """History messages for a run's journal: each step's answer, then its calls' results.

    A call that never settled (the run ended first) reads as not run, so the history stays valid
    for models that require a result for every call.
    """
    messages: list[AssistantMessage | ToolMessage] = []
    for entry in sorted(steps, key=lambda e: e.step):
        messages.append(
            AssistantMessage(
                content=entry.text,
                tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in entry.calls],
            )
        )
        for call in entry.calls:
            outcome = settled.get(call.id)
            content = (
                outcome.model_content()
                if outcome is not None
                else {"error": error_value("not_run", "The run ended before this call ran.")}
            )
            messages.append(ToolMessage(tool_call_id=call.id, name=call.name, content=json.dumps(jsonable(content))))
    return messages
