"""ProtoJSON conversions with types: protobuf ships no hints (and ``types-protobuf`` is not a dependency).

Every ``google.protobuf`` import of the channel is here, each with one targeted ignore.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf import json_format, struct_pb2  # type: ignore[import-untyped]

__all__ = ["ProtoParseError", "from_json", "json_struct", "json_value", "to_json"]

_M = TypeVar("_M")

ProtoParseError: type[Exception] = json_format.ParseError
"""Raised by ``from_json`` for JSON that does not fit the message."""


def to_json(message: Any, *, all_fields: bool = False) -> Any:
    """A protobuf message as ProtoJSON (camelCase names; ``all_fields`` prints defaults too)."""
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=all_fields)


def from_json(data: Any, message: _M) -> _M:
    """Fill ``message`` from ProtoJSON, ignoring unknown fields (as the SDK server does)."""
    json_format.ParseDict(data, message, ignore_unknown_fields=True)
    return message


def json_value(data: Any) -> Any:
    """A ``google.protobuf.Value`` holding JSON ``data``."""
    return json_format.ParseDict(data, struct_pb2.Value())


def json_struct(data: dict[str, Any]) -> Any:
    """A ``google.protobuf.Struct`` holding a JSON object."""
    return json_format.ParseDict(data, struct_pb2.Struct())
