"""The JSON schema a model sees for a tool's input: self-contained, with no ``$defs`` to chase."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

__all__ = ["input_json_schema"]

_REF_PREFIX = "#/$defs/"


def input_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` with every ``$ref`` inlined.

    Nested models become inline objects. Only a recursive model (one that contains itself) keeps
    a ``$defs`` entry, for the recursive part only, so the schema stays self-contained.

    Raises:
        TypeError: ``model`` is not a pydantic model class.
    """
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"input_json_schema() needs a pydantic BaseModel subclass, not {model!r}")
    schema = model.model_json_schema(mode="validation")
    defs: dict[str, Any] = schema.pop("$defs", {})
    recursive: set[str] = set()

    def resolve(node: Any, stack: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            name = ref[len(_REF_PREFIX) :]
            if name in stack or name not in defs:
                recursive.add(name)
                return dict(node)
            siblings = {k: resolve(v, stack) for k, v in node.items() if k != "$ref"}
            target = resolve(copy.deepcopy(defs[name]), (*stack, name))
            return {**target, **siblings}
        return {key: resolve(value, stack) for key, value in node.items()}

    result: dict[str, Any] = resolve(schema, ())
    if recursive:
        kept: dict[str, Any] = {}
        pending = sorted(recursive)
        while pending:
            name = pending.pop()
            if name in kept or name not in defs:
                continue
            before = set(recursive)
            kept[name] = resolve(copy.deepcopy(defs[name]), (name,))
            pending.extend(sorted(recursive - before))
        result["$defs"] = kept
    result.setdefault("type", "object")
    result.setdefault("properties", {})
    return result
