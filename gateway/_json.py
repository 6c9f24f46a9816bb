r"""``parse_json``: JSON from the wire, refused when it nests deeper than anything we take.

``json.loads`` recurses once per level and raises ``RecursionError`` around a thousand levels,
a few kilobytes of ``[`` from any client; and a structure a few hundred levels deep that did
parse would later fail in pydantic or in the store. Every channel parses its bodies and frames
here, so all of them answer such input as the malformed JSON it is.

JSON may also escape half of a surrogate pair alone (``"\ud83d"``), which no UTF-8 store or socket
can carry: every such string (keys too) comes back with U+FFFD in its place (``gateway._unicode``).

What a run makes itself (a tool's output, a model's arguments, a component's props) is held to the
same depth by ``within_depth`` before it is stored: a durable store writes what pydantic
serializes (about 250 levels) but reads back only what pydantic parses (200 levels), so deeper
data would be written once and never read again, its thread's log broken for good.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._unicode import valid_tree

__all__ = ["MAX_JSON_DEPTH", "parse_json", "within_depth"]

MAX_JSON_DEPTH = 64
"""Levels of arrays and objects a body or frame may nest (and what a run stores)."""
_TOO_DEEP = "[nested too deeply to keep]"


def parse_json(data: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse ``data`` as JSON, with lone surrogates in its strings replaced by U+FFFD.

    Raises:
        ValueError: Not JSON (``NaN``, ``Infinity`` and numbers out of a double's range included),
            not UTF-8, or nested more than ``max_depth`` levels (the message says which).
    """
    try:
        value = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError(f"JSON nested more than {max_depth} levels") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc.reason}") from None
    if _deeper_than(value, max_depth):
        raise ValueError(f"JSON nested more than {max_depth} levels")
    # Only a surrogate escape (or, in text, a surrogate itself) can leave one: walk only then.
    maybe = _SURROGATE_BYTES.search(data) if isinstance(data, bytes) else _SURROGATE_TEXT.search(data)
    return valid_tree(value) if maybe else value


_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_TEXT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json takes NaN and Infinity; the standard does not


def _finite(text: str) -> float:
    number = float(text)
    if number in (_INF, -_INF):
        raise ValueError(f"number out of range: {text[:20]}")  # 1e999: no JSON peer can hold it
    return number


_INF = float("inf")


def _deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests more than ``limit`` arrays and objects (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def within_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> Any:
    """``value`` with each dict, list or tuple nested deeper than ``limit`` as its JSON text.

    For JSON data and the Python values a run makes (before or after they become JSON). The same
    object when nothing is that deep (one walk, no copy), so clean data costs nothing. A part too
    deep even for ``json.dumps`` becomes a short placeholder.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return _flattened(value, 1, limit)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return value


def _flattened(value: Any, depth: int, limit: int) -> Any:
    if not isinstance(value, dict | list | tuple):
        return value
    if depth > limit:
        try:
            return json.dumps(value, separators=(",", ":"), default=str)
        except (RecursionError, ValueError):
            return _TOO_DEEP
    if isinstance(value, dict):
        return {key: _flattened(item, depth + 1, limit) for key, item in value.items()}
    return [_flattened(item, depth + 1, limit) for item in value]
