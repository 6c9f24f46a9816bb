"""What the model and the person see of a query's rows: JSON cells, a byte budget, a ``DataTable``.

The model reads the tool's output as JSON text, so that is what the budget measures: rows are
kept, first to last, while the whole output (SQL, columns, rows and the note) fits ``max_bytes``.
Every value becomes JSON (numbers stay numbers, dates become ISO text, bytes become hex), and a
value longer than ``max_cell_chars`` is cut. The note says what was cut and why.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from .._ui import UiComponent
from ._runners import Fetched

_TABLE_ROWS = 500
_TABLE_COLUMNS = 12
_TABLE_CELL_CHARS = 1_000
_TABLE_KEY_CHARS = 200


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
        return _cut("0x" + bytes(value).hex(), limit)
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


def shape(
    fetched: Fetched,
    *,
    sql: str,
    max_rows: int,
    limited: bool,
    max_bytes: int,
    max_cell_chars: int,
) -> dict[str, Any]:
    """The tool's output: ``{sql, columns, rows, row_count, truncated, note}`` within ``max_bytes``."""
    cells_cut = False
    rows: list[list[Any]] = []
    for row in fetched.rows:
        values = []
        for value in row:
            cell, cut = json_cell(value, max_cell_chars)
            cells_cut = cells_cut or cut
            values.append(cell)
        rows.append(values)
    fetched_count = len(rows)
    kept = _within_budget(rows, sql, fetched.columns, max_bytes)
    while True:
        note = _note(kept, fetched_count, max_rows=max_rows, limited=limited, max_bytes=max_bytes,
                     max_cell_chars=max_cell_chars, cells_cut=cells_cut)  # fmt: skip
        output = {
            "sql": sql,
            "columns": list(fetched.columns),
            "rows": rows[:kept],
            "row_count": kept,
            "truncated": kept < fetched_count or cells_cut,
            "note": note,
        }
        if kept == 0 or _size(output) <= max_bytes:
            return output
        kept -= 1


def _within_budget(rows: list[list[Any]], sql: str, columns: list[str], max_bytes: int) -> int:
    # A first pass by the rows' own sizes (the note is at most ~400 bytes); shape() trims the rest.
    used = _size({"sql": sql, "columns": columns, "rows": [], "row_count": 0, "truncated": True}) + 450
    for index, row in enumerate(rows):
        used += _size(row) + 2
        if used > max_bytes:
            return index
    return len(rows)


def _note(
    kept: int,
    fetched: int,
    *,
    max_rows: int,
    limited: bool,
    max_bytes: int,
    max_cell_chars: int,
    cells_cut: bool,
) -> str | None:
    notes = []
    if kept < fetched:
        notes.append(
            f"Only the first {kept} of the {fetched} rows fetched are included: the result was cut to fit "
            f"{max_bytes:,} bytes. Select fewer columns, filter or aggregate to see the rest."
        )
    if limited and fetched >= max_rows:
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
