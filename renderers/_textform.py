"""Pieces of the text forms: fixed-width tables, clipping by display width, a generic fallback.

Text forms are plain text that reads in WhatsApp and in a terminal: ``*bold*`` titles, fixed-width
tables inside triple backticks (monospace in WhatsApp, harmless in a terminal), no markup else.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = ["bold", "clip", "display_width", "fixed_table", "generic_text"]

Align = Literal["left", "right", "center"]

_GENERIC_LIMIT = 1500


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: wide (CJK, emoji) count 2, combining marks 0."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def clip(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` display columns with an ellipsis when longer."""
    text = " ".join(text.split())
    if display_width(text) <= width:
        return text
    out: list[str] = []
    used = 0
    for char in text:
        char_width = display_width(char)
        if used + char_width > width - 1:
            break
        out.append(char)
        used += char_width
    return "".join(out) + "…"


def _pad(text: str, width: int, align: Align) -> str:
    gap = width - display_width(text)
    if align == "right":
        return " " * gap + text
    if align == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


def fixed_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    aligns: Sequence[Align],
    *,
    max_rows: int = 15,
    max_col_width: int = 24,
    total: int | None = None,
) -> str:
    """A fixed-width table in a monospace block, at most ``max_rows`` rows.

    Longer tables end with ``... N more rows`` below the block. Cells are cut to
    ``max_col_width`` columns. ``total`` is the table's full row count when ``rows`` holds only
    its first rows (so a caller need not format rows that will not show).
    """
    shown = [[clip(cell, max_col_width) for cell in row] for row in rows[:max_rows]]
    heads = [clip(h, max_col_width) for h in headers]
    widths = [max([display_width(heads[i]), *(display_width(r[i]) for r in shown)]) for i in range(len(heads))]
    lines = [" | ".join(_pad(h, widths[i], aligns[i]) for i, h in enumerate(heads)).rstrip()]
    lines.append("-+-".join("-" * w for w in widths))
    lines.extend(" | ".join(_pad(c, widths[i], aligns[i]) for i, c in enumerate(row)).rstrip() for row in shown)
    text = "```\n" + "\n".join(lines) + "\n```"
    hidden = (len(rows) if total is None else total) - len(shown)
    if hidden > 0:
        text += f"\n... {hidden} more row{'s' if hidden != 1 else ''}"
    return text


def bold(text: str) -> str:
    """``**text**`` (Markdown bold) on one line; empty stays empty.

    Text forms are Markdown: a channel shows it its own way (WhatsApp turns this into ``*text*``).
    """
    text = " ".join(text.split())
    return f"**{text}**" if text else ""


def generic_text(component: str, props: Mapping[str, Any]) -> str:
    """The text of a component without a text form: its title, then its props as JSON (clipped)."""
    title = props.get("title")
    head = bold(title) if isinstance(title, str) and title.strip() else bold(component)
    body = json.dumps(props, ensure_ascii=False, indent=1, default=str)
    if len(body) > _GENERIC_LIMIT:
        body = body[:_GENERIC_LIMIT] + "\n..."
    return f"{head}\n```\n{body}\n```"
