"""``fill_template``: the one filler every channel uses to word a tool call."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

__all__ = ["fill_template", "read_path"]

_PLACEHOLDER = re.compile(r"(\s*)\{([\w.]+)\}")
_WHITESPACE_RUN = re.compile(r"\s{2,}")
_MISSING = object()
_MAX_DEPTH = 32
_MAX_ITEMS = 1000
"""Lists longer than this are cut: a sentence never needs a thousand items."""


def read_path(data: Any, path: str) -> Any:
    """Read a dotted path (``order.total``, ``items.0.name``) from mappings, models and lists.

    Anything that cannot be walked yields ``None``; this never raises on odd ``data``.

    Raises:
        TypeError: ``path`` is not a string.
    """
    if not isinstance(path, str):
        raise TypeError(f"read_path() needs a str path, not {type(path).__name__}")
    current = data
    for segment in path.split("."):
        current = _step(current, segment)
        if current is _MISSING:
            return None
    return current


def _step(current: Any, segment: str) -> Any:
    try:
        if isinstance(current, Mapping):
            return current.get(segment, _MISSING)
        if isinstance(current, BaseModel):
            if segment in type(current).model_fields:
                return getattr(current, segment)
            extra = current.__pydantic_extra__ or {}
            return extra.get(segment, _MISSING)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            names = {f.name for f in dataclasses.fields(current)}
            return getattr(current, segment) if segment in names else _MISSING
        if isinstance(current, Sequence) and not isinstance(current, str | bytes) and segment.isdigit():
            index = int(segment)
            return current[index] if index < len(current) else _MISSING
    except Exception:  # a hostile __getitem__ or property: treat as missing
        return _MISSING
    return _MISSING


def _render(value: Any, seen: set[int], depth: int) -> str:
    # bool before int: bool is an int subclass.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | decimal.Decimal):
        return str(value)
    if isinstance(value, enum.Enum):
        return _render(value.value, seen, depth + 1)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        if id(value) in seen or depth > _MAX_DEPTH:
            return ""
        seen.add(id(value))
        try:
            items = list(value)[:_MAX_ITEMS]
            parts = [_render(item, seen, depth + 1) for item in items]
        finally:
            seen.discard(id(value))
        return ", ".join(part for part in parts if part)
    return ""


def _render_safely(value: Any) -> str:
    try:
        return _render(value, set(), 0)
    except Exception:  # never let odd data break a sentence
        return ""


def fill_template(template: str, data: Any) -> str:
    """Fill ``{dotted.path}`` placeholders of ``template`` from ``data``.

    Rules: ``None`` or a missing path renders empty; strings as they are; numbers with ``str()``;
    booleans as ``true``/``false``; lists as their rendered items, empties dropped, joined with
    ``", "``; mappings and other objects render empty. An empty placeholder is removed together
    with the whitespace before it; runs of whitespace collapse to one space; the result is
    stripped. Odd data (cycles, huge or non-JSON values) never raises.

    Args:
        template: The sentence with placeholders, e.g. ``"Purging {key}"``.
        data: What the placeholders read: the call's input, or its output for result views.

    Raises:
        TypeError: ``template`` is not a string.
    """
    if not isinstance(template, str):
        raise TypeError(f"fill_template() needs a str template, not {type(template).__name__}")
    parts, tail = _compiled(template)
    out: list[str] = []
    for literal, space, segments in parts:
        out.append(literal)
        current = data
        for segment in segments:
            current = _step(current, segment)
            if current is _MISSING:
                current = None
                break
        rendered = _render_safely(current)
        if rendered:
            out.append(space)
            out.append(rendered)
    out.append(tail)
    return _WHITESPACE_RUN.sub(" ", "".join(out)).strip()


_Part = tuple[str, str, tuple[str, ...]]


@functools.lru_cache(maxsize=1024)
def _compiled(template: str) -> tuple[tuple[_Part, ...], str]:
    """``template`` split once: each placeholder's preceding text, its whitespace and its path; the tail.

    The same matches ``_PLACEHOLDER.sub`` finds: a template is parsed once, not on every call
    (a tool's narration is filled twice per call).
    """
    parts: list[_Part] = []
    start = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append((template[start : match.start()], match.group(1), tuple(match.group(2).split("."))))
        start = match.end()
    return tuple(parts), template[start:]
