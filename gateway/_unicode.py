r"""Text that can always be stored and sent: lone surrogates replaced with U+FFFD.

JSON text may carry ``"\ud83d"`` (half of a surrogate pair, alone). ``json.loads`` turns it into a
Python ``str`` holding a lone surrogate, which is legal in memory but has no UTF-8 form: the first
store, socket or log that encodes it raises ``UnicodeEncodeError``, long after the input was taken.
Every text that enters (frames and bodies through :func:`gateway.parse_json`, model output, tool
output and props in the run driver, provider webhooks in their channel) passes through here, so
nothing stored can break a later read.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["valid_text", "valid_tree"]

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def valid_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same object when there is none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(REPLACEMENT, text)
    return text


def valid_tree(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, str, numbers) with every string made :func:`valid_text`.

    Keys are cleaned as well. Containers are rebuilt only where something changed, so clean input
    (nearly all of it) costs one walk and no copies.
    """
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        changed = False
        cleaned: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = valid_text(key) if isinstance(key, str) else key
            new_item = valid_tree(item)
            changed = changed or new_key is not key or new_item is not item
            cleaned[new_key] = new_item
        return cleaned if changed else value
    if isinstance(value, list | tuple):
        items = [valid_tree(item) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items if isinstance(value, list) else tuple(items)
        return value
    return value
