"""JSON-RPC on the MCP wire: what arrives, read and checked; what we send, built from ``mcp.types``.

Every message we send is an ``mcp.types`` model dumped as JSON; every message read is validated
as ``mcp.types.JSONRPCMessage`` after the checks JSON-RPC leaves to us (UTF-8, lone surrogates,
ids with control characters, batch sizes).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from mcp import types
from pydantic import BaseModel, ValidationError

from gateway import GatewayError

__all__ = [
    "BATCH_VERSION",
    "MAX_ID_CHARS",
    "BadMessage",
    "dump",
    "error_message",
    "read_body",
    "read_message",
    "response_message",
]

BATCH_VERSION = "2025-03-26"
"""The one protocol revision whose transport allows a JSON-RPC batch."""

MAX_ID_CHARS = 200
"""The longest string id we accept (an id travels back in every answer and log line)."""

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")

Message = types.JSONRPCRequest | types.JSONRPCNotification | types.JSONRPCResponse | types.JSONRPCError


class BadMessage(GatewayError):
    """A JSON-RPC message refused: the error to answer (``id`` when it could be read)."""

    status, code = 400, "mcp_refused"

    def __init__(self, *, code: int, message: str, id: str | int | None = None) -> None:
        super().__init__(message)
        self.rpc_code = code
        """The JSON-RPC error code (``mcp.types.PARSE_ERROR``...)."""
        self.message = message
        self.id = id


def dump(model: BaseModel) -> str:
    """The JSON text of an ``mcp.types`` model, as the SDK writes it (aliases, no ``None`` fields)."""
    return model.model_dump_json(by_alias=True, exclude_none=True)


def error_message(id: str | int | None, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer. ``id`` ``None`` (unreadable) goes out as ``null``, as JSON-RPC says.

    ``mcp.types.JSONRPCError`` requires an id, so an answer without one is checked against the
    same model with a placeholder, then sent with ``null``.
    """
    error = types.JSONRPCError(
        jsonrpc="2.0", id=0 if id is None else id, error=types.ErrorData(code=code, message=message)
    )
    body: dict[str, Any] = error.model_dump(by_alias=True, exclude_none=True)
    if id is None:
        body["id"] = None
    return body


def response_message(id: str | int, result: BaseModel) -> dict[str, Any]:
    """A JSON-RPC success answer carrying an ``mcp.types`` result."""
    payload = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    body: dict[str, Any] = types.JSONRPCResponse(jsonrpc="2.0", id=id, result=payload).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    return body


def read_body(raw: bytes) -> Any:
    """The JSON value of a request body.

    Raises:
        BadMessage: -32700 when it is not UTF-8 JSON (``NaN``, ``Infinity`` and numbers that
            overflow a float are not), or holds a lone surrogate (no Unicode text).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadMessage(code=types.PARSE_ERROR, message="Parse error: the body is not UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        raise BadMessage(code=types.PARSE_ERROR, message="Parse error: the body is not JSON") from None
    # Decoded UTF-8 holds no surrogate: only a ``\\u`` escape can bring a lone one in.
    if "\\u" in text and _has_surrogate(value):
        raise BadMessage(code=types.PARSE_ERROR, message="Parse error: the body holds invalid Unicode")
    return value


def _no_constant(name: str) -> Any:
    """``NaN``, ``Infinity``, ``-Infinity``: Python reads them, JSON has none (RFC 8259)."""
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it overflows to infinity (``1e400``)."""
    number = float(text)
    if math.isinf(number):
        raise ValueError("a number out of range")
    return number


def _has_surrogate(value: Any) -> bool:
    """Whether a parsed JSON value holds a lone surrogate (escaped in the JSON text) anywhere."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _readable_id(value: Any) -> str | int | None:
    raw = value.get("id") if isinstance(value, dict) else None
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    if isinstance(raw, str) and (len(raw) > MAX_ID_CHARS or _CONTROL.search(raw)):
        return None
    return raw


def read_message(value: Any) -> Message:
    """One JSON-RPC message of a body, validated as ``mcp.types.JSONRPCMessage``.

    Raises:
        BadMessage: -32600 for anything that is not a JSON-RPC 2.0 message, or whose id is not
            a short string without control characters or an integer.
    """
    if not isinstance(value, dict):
        raise BadMessage(code=types.INVALID_REQUEST, message="Invalid Request: not a JSON-RPC object")
    if "id" in value:
        raw = value["id"]
        if isinstance(raw, str) and _CONTROL.search(raw):
            raise BadMessage(code=types.INVALID_REQUEST, message="Invalid Request: the id holds control characters")
        if isinstance(raw, str) and len(raw) > MAX_ID_CHARS:
            raise BadMessage(
                code=types.INVALID_REQUEST, message=f"Invalid Request: ids are at most {MAX_ID_CHARS} characters"
            )
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise BadMessage(
                code=types.INVALID_REQUEST, message="Invalid Request: the id must be a string or an integer"
            )
    method = value.get("method")
    if method is not None and (not isinstance(method, str) or _CONTROL.search(method) or len(method) > 200):
        raise BadMessage(code=types.INVALID_REQUEST, message="Invalid Request: bad method", id=_readable_id(value))
    try:
        return types.JSONRPCMessage.model_validate(value).root
    except ValidationError:
        raise BadMessage(
            code=types.INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 message", id=_readable_id(value)
        ) from None
