"""What an action's ``preflight(input, ctx, phase)`` may answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from ._presentation import Confirmation

__all__ = [
    "PreflightCompleted",
    "PreflightDenied",
    "PreflightPhase",
    "PreflightReady",
    "PreflightResult",
    "as_preflight_result",
]

PreflightPhase = Literal["prepare", "execute"]
"""``prepare`` runs before the approval prompt; ``execute`` right before ``execute``."""


class PreflightReady(BaseModel):
    """Go ahead; in the prepare phase, ``confirmation`` replaces the tool's confirm templates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["ready"] = "ready"
    confirmation: Confirmation | None = None


class PreflightDenied(BaseModel):
    """Refuse the call; ``reason`` is told to the person and the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["denied"] = "denied"
    reason: str


class PreflightCompleted(BaseModel):
    """Nothing to do: ``output`` is the result, with no approval and no ``execute``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: Literal["completed"] = "completed"
    output: Any = None
    done: str | None = Field(default=None, max_length=500)
    """How the call reads once settled (``"Order 1042 was already refunded"``); the tool's own
    ``done`` words a completion that did what it says, which this one did not need to."""


PreflightResult = Annotated[PreflightReady | PreflightDenied | PreflightCompleted, Field(discriminator="status")]

_ADAPTER: TypeAdapter[PreflightReady | PreflightDenied | PreflightCompleted] = TypeAdapter(PreflightResult)


def as_preflight_result(value: Any) -> PreflightReady | PreflightDenied | PreflightCompleted:
    """Normalize what a preflight hook returned: a result object, its dict form, or ``None`` (ready)."""
    if value is None:
        return PreflightReady()
    if isinstance(value, PreflightReady | PreflightDenied | PreflightCompleted):
        return value
    return _ADAPTER.validate_python(value)
