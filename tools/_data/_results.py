"""What the model and the person see of a query's rows: JSON cells, a byte budget, a ``DataTable``.

The model reads the tool's output as JSON text, so that is what the budget measures: rows are
kept, first to last, while the whole output (SQL, columns, rows and the note) fits ``max_bytes``.
Every value becomes JSON (numbers stay numbers, dates become ISO text, bytes become hex), and a
value longer than ``max_cell_chars`` is cut. The note says what was cut and why.

``Rows`` takes the rows as the database hands them over (a ``RowSink``): each becomes JSON at
once, and once the budget is spent no further row is read.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .._ui import UiComponent

_TABLE_ROWS = 500
_TABLE_COLUMNS = 12
_TABLE_CELL_CHARS = 1_000
_TABLE_KEY_CHARS = 200
_NOTE_BYTES = 450
"""Room kept for the note while rows are taken (``shape`` trims the rest)."""


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[: max(0, limit - 1)] + "…", True)


def json_cell(value: Any, limit: int) -> tuple[Any, bool]:
    """``value`` as JSON data, and whether it had to be cut to ``limit`` characters."""
    if value is None or isinstance(value, bool | int):
        return value, False
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (str(value), False)
    if isinstance(value, Decimal):
        return _decimal(value), False
    if isinstance(value, str):
        return _cut(value, limit)
    if isinstance(value, bytes | bytearray | memoryview):
        # Only what can be shown is turned into hex (two characters a byte), never the whole value.
        return _cut("0x" + bytes(value[: limit // 2 + 1]).hex(), limit)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat(), False
    if isinstance(value, dt.timedelta | uuid.UUID):
        return str(value), False
    if isinstance(value, Mapping | list | tuple):
        try:
            text = json.dumps(value, default=str, allow_nan=False)
        except (TypeError, ValueError):
            return _cut(str(value), limit)
        if len(text) <= limit:
            return json.loads(text), False
        return _cut(text, limit)
    return _cut(str(value), limit)


def _decimal(value: Decimal) -> Any:
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value() and abs(value) < 2**53:
        return int(value)
    as_float = float(value)
    return as_float if Decimal(repr(as_float)) == value else str(value)


def _size(value: Any) -> int:
    # What the model is sent: json.dumps with its defaults (ASCII escapes included).
    return len(json.dumps(value))


@dataclass(kw_only=True)
class Rows:
    """A query's rows as the model reads them, taken one by one while they fit ``max_bytes``."""

    sql: str
    max_bytes: int
    max_cell_chars: int
    rows: list[list[Any]] = field(default_factory=list)
    cells_cut: bool = False
    """Whether a value was cut to ``max_cell_chars``."""
    overflow: bool = False
    """Whether a row came that did not fit: it and the rows after it were left unread."""
    _used: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        skeleton = {"sql": self.sql, "columns": [], "rows": [], "row_count": 0, "truncated": True}
        self._used = _size(skeleton) + _NOTE_BYTES

    def take(self, row: Sequence[Any]) -> bool:
        """Keep ``row`` as JSON cells while the output fits; ``False`` once it does not (a ``RowSink``)."""
        values, cut = [], False
        for value in row:
            cell, cut_here = json_cell(value, self.max_cell_chars)
            cut = cut or cut_here
            values.append(cell)
        self._used += _size(values) + 2
        if self._used > self.max_bytes:
            self.overflow = True
            return False
        self.rows.append(values)
        self.cells_cut = self.cells_cut or cut
        return True


def shape(rows: Rows, *, columns: list[str], max_rows: int, limited: bool) -> dict[str, Any]:
    """The tool's output: ``{sql, columns, rows, row_count, truncated, note}`` within ``rows.max_bytes``."""
    taken = len(rows.rows)
    kept = taken
    while True:
        note = _note(
            cut=kept < taken or rows.overflow,
            kept=kept,
            at_limit=limited and taken >= max_rows,
            max_rows=max_rows,
            max_bytes=rows.max_bytes,
            max_cell_chars=rows.max_cell_chars,
            cells_cut=rows.cells_cut,
        )
        output = {
            "sql": rows.sql,
            "columns": list(columns),
            "rows": rows.rows[:kept],
            "row_count": kept,
            "truncated": kept < taken or rows.overflow or rows.cells_cut,
            "note": note,
        }
        if kept == 0 or _size(output) <= rows.max_bytes:
            return output
        kept -= 1


def _note(
    *,
    cut: bool,
    kept: int,
    at_limit: bool,
    max_rows: int,
    max_bytes: int,
    max_cell_chars: int,
    cells_cut: bool,
) -> str | None:
    notes = []
    if cut:
        notes.append(
            f"Only the first {kept} rows are included: the result was cut to fit {max_bytes:,} bytes. "
            "Select fewer columns, filter or aggregate to see the rest."
        )
    if at_limit:
        notes.append(
            f"The query stopped at the limit of {max_rows} rows, so there may be more rows than these; "
            "filter or aggregate to narrow it."
        )
    if cells_cut:
        notes.append(f"Values longer than {max_cell_chars} characters were cut.")
    return " ".join(notes) or None


# -- the DataTable ----------------------------------------------------------------------------------


def _keys(columns: Sequence[str]) -> list[str]:
    keys: list[str] = []
    for index, name in enumerate(columns):
        base = (name or f"column_{index + 1}")[:_TABLE_KEY_CHARS]
        key, n = base, 2
        while key in keys:
            key, n = f"{base[: _TABLE_KEY_CHARS - 4]}_{n}", n + 1
        keys.append(key)
    return keys


def _table_cell(value: Any) -> Any:
    if isinstance(value, list | dict):
        value = json.dumps(value)
    if isinstance(value, str):
        return _cut(value, _TABLE_CELL_CHARS)[0]
    return value


def _numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present)


def data_table(output: Mapping[str, Any]) -> UiComponent | None:
    """The output as a ``DataTable`` (at most 500 rows and 12 columns), or ``None`` for odd output."""
    columns, rows = output.get("columns"), output.get("rows")
    if not isinstance(columns, list) or not columns or not isinstance(rows, list):
        return None
    shown = [str(c) for c in columns][:_TABLE_COLUMNS]
    keys = _keys(shown)
    body = [
        {key: _table_cell(value) for key, value in zip(keys, row, strict=False)}
        for row in rows[:_TABLE_ROWS]
        if isinstance(row, list)
    ]
    numeric = {key for key in keys if _numeric([row.get(key) for row in body])}
    props: dict[str, Any] = {
        "columns": [
            {"key": key, "label": label[:_TABLE_KEY_CHARS], **({"align": "right"} if key in numeric else {})}
            for key, label in zip(keys, shown, strict=True)
        ],
        "rows": body,
    }
    hidden_columns = len(columns) - len(shown)
    hidden_rows = len(rows) - len(body)
    if hidden_columns > 0 or hidden_rows > 0:
        parts = [f"{len(body)} of {len(rows)} rows" if hidden_rows > 0 else "", ""]
        parts[1] = f"{len(shown)} of {len(columns)} columns" if hidden_columns > 0 else ""
        props["title"] = "Showing " + " and ".join(part for part in parts if part)
    return UiComponent(component="DataTable", props=props)
