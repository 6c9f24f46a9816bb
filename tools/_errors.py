"""Errors of the tool SDK.

The tree::

    AgoraError                      base of everything this project raises on purpose
    ├── UserError                   a developer misused the API (also a TypeError and a ValueError)
    │   └── ToolDefinitionError     a tool declared wrongly (bad name, missing description, ...)
    ├── ToolError                   a call to a tool could not be carried out
    │   ├── ToolNotFoundError       no such tool for this caller (unknown, outside the agent, hidden)
    │   ├── ToolDisabledError       the tool exists but is switched off
    │   ├── ToolForbiddenError      the actor may not use the tool (roles, ability, can_use)
    │   ├── ToolInputInvalidError   arguments failed validation; ``execute`` never ran
    │   ├── ToolDeniedError         a preflight check refused the call
    │   ├── ToolTimeoutError        the call ran past the tool's timeout
    │   └── ConfirmTokenError       a confirmed tool's token is invalid, used or expired
    └── ToolFailed                  raised BY a tool: a failure whose message the model may read
        └── SqlRefusedError         ``data_tool`` refused the model's SQL before it reached the database

Anything else a tool raises is an unexpected failure: the loop records it as a failed call with a
generic message and logs the traceback.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "AgoraError",
    "ConfirmTokenError",
    "SqlRefusedError",
    "ToolDefinitionError",
    "ToolDeniedError",
    "ToolDisabledError",
    "ToolError",
    "ToolFailed",
    "ToolForbiddenError",
    "ToolInputInvalidError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "UserError",
]


class AgoraError(Exception):
    """Base class of every error this project raises on purpose."""


class UserError(AgoraError, TypeError, ValueError):
    """The API was used wrongly by a developer; the message says what to change."""


class ToolDefinitionError(UserError):
    """A tool was declared wrongly: a bad name, a missing description, a non-pydantic input..."""


class ToolError(AgoraError):
    """A call to a tool could not be carried out.

    Attributes:
        code: A short machine-readable code, stable across versions (``tool_not_found``...).
        tool: The tool's name, when known.
    """

    code: str = "tool_error"

    def __init__(self, message: str, *, tool: str | None = None) -> None:
        super().__init__(message)
        self.tool = tool


class ToolNotFoundError(ToolError):
    """No tool of that name is reachable for this caller (unknown, outside the agent, or hidden)."""

    code = "tool_not_found"


class ToolDisabledError(ToolError):
    """The tool exists but is switched off (``enabled`` / ``is_enabled()``)."""

    code = "tool_disabled"


class ToolForbiddenError(ToolError):
    """The actor may not use this tool (roles policy or ``can_use``)."""

    code = "tool_forbidden"


class ToolInputInvalidError(ToolError):
    """The arguments failed validation against the tool's ``input`` model.

    Attributes:
        errors: The field errors, as pydantic reports them (``loc``, ``msg``, ``type``).
    """

    code = "tool_input_invalid"

    def __init__(self, message: str, *, tool: str | None = None, errors: list[dict[str, Any]] | None = None):
        super().__init__(message, tool=tool)
        self.errors: list[dict[str, Any]] = errors or []


class ToolDeniedError(ToolError):
    """A preflight check refused the call; ``reason`` says why in words a person can read."""

    code = "tool_denied"

    def __init__(self, reason: str, *, tool: str | None = None) -> None:
        super().__init__(reason, tool=tool)
        self.reason = reason


class ToolTimeoutError(ToolError):
    """The call ran past the tool's ``timeout`` and was cancelled."""

    code = "tool_timeout"


ConfirmTokenReason = Literal["invalid", "used", "expired"]


class ConfirmTokenError(ToolError):
    """A confirmed tool's token cannot commit.

    Attributes:
        reason: ``"invalid"`` (forged, malformed, or bound to other arguments, actor, tenant or
            tool), ``"used"`` (already committed) or ``"expired"``.
    """

    code = "confirm_token"

    _MESSAGES = {
        "invalid": "The confirmation token is not valid for this call; ask for a new preview.",
        "used": "The confirmation token was already used; ask for a new preview.",
        "expired": "The confirmation token has expired; ask for a new preview.",
    }

    def __init__(self, reason: ConfirmTokenReason, *, tool: str | None = None) -> None:
        super().__init__(self._MESSAGES[reason], tool=tool)
        self.reason: ConfirmTokenReason = reason


class ToolFailed(AgoraError):
    """Raised by a tool to fail its call with a message the model (and the person) may read.

    Attributes:
        code: A short code for the failure (``"failed"`` unless given).
    """

    def __init__(self, message: str, *, code: str = "failed") -> None:
        super().__init__(message)
        self.code = code


class SqlRefusedError(ToolFailed):
    """``data_tool`` refused a query before it reached the database; the model reads ``reason``.

    Attributes:
        reason: What was refused, in words the model can act on (``"table secret is not one
            you may query"``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"Query refused: {reason}", code="sql_refused")
        self.reason = reason
