"""``DataTable``: columns with alignment and formats, up to 500 rows."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from renderers._catalog import MediaKind
from renderers._formats import ValueFormat, format_value, is_numeric_format
from renderers._props import ComponentProps, at_most
from renderers._textform import bold, fixed_table

__all__ = [
    "LONG_TABLE_ROWS",
    "CellValue",
    "Column",
    "DataTableProps",
    "TableView",
    "datatable_context",
    "datatable_media",
    "datatable_text",
    "table_text",
    "table_view",
]

LONG_TABLE_ROWS = 25
"""More rows than this make a table "long": it prefers PDF to an image."""

MAX_ROWS = 500
MAX_COLUMNS = 12
TEXT_ROWS = 15

_PHONE_WIDTH = 356.0
"""CSS px a table gets on a phone-width image page (420 px page, less margins and padding)."""
_CHAR = 7.2
"""Average advance of a character at the table's 13 px, in CSS px."""
_CELL_PADDING = 20.0

MAX_CELL_CHARS = 1_000


def _cell(value: object) -> object:
    if isinstance(value, str):
        if len(value) > MAX_CELL_CHARS:
            raise PydanticCustomError(
                "string_too_long", "String should have at most {max_length} characters", {"max_length": MAX_CELL_CHARS}
            )
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    if value is None or isinstance(value, bool | int | float | Decimal | dt.date):
        return value
    raise PydanticCustomError(
        "cell_type",
        "A cell holds text, a number, a boolean, a date or null, not {kind}",
        {"kind": type(value).__name__},
    )


CellValue = Annotated[
    object,
    PlainValidator(_cell),
    WithJsonSchema({"type": ["string", "number", "boolean", "null"], "maxLength": MAX_CELL_CHARS}),
]
"""What a cell holds: text (up to 1,000 characters), a number, a boolean, null, a ``Decimal`` or a
date. One check instead of a union, so an error names the cell once."""


class Column(ComponentProps):
    """One column of a ``DataTable``."""

    key: str = Field(min_length=1, max_length=200)
    """Key of the value in each row."""
    label: str = Field(max_length=200)
    """Header text."""
    align: Literal["left", "right", "center"] | None = None
    """Cell alignment; numbers, money and percentages default to right, the rest to left."""
    format: ValueFormat = "text"
    """``text``, ``number`` (``1,234.5``), ``currency`` (``$1,234.50``), ``percent`` (ratio:
    ``0.125`` reads ``12.5%``) or ``date`` (ISO text or date: ``Mar 5, 2024``)."""
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    """ISO 4217 code for ``currency`` columns."""
    decimals: int | None = Field(default=None, ge=0, le=6)
    """Fixed decimals for numeric formats."""

    @property
    def alignment(self) -> Literal["left", "right", "center"]:
        """The effective alignment."""
        if self.align is not None:
            return self.align
        return "right" if is_numeric_format(self.format) else "left"

    def cell(self, value: object) -> str:
        """The display text of one value of this column."""
        return format_value(value, self.format, currency=self.currency, decimals=self.decimals)


Row = Annotated[dict[str, CellValue], at_most(100)]


class DataTableProps(ComponentProps):
    """Props of ``DataTable``: ``{title?, columns: [{key, label, align?, format?}], rows: [object]}``."""

    title: str | None = Field(default=None, max_length=300)
    columns: Annotated[list[Column], Field(min_length=1, max_length=MAX_COLUMNS), at_most(MAX_COLUMNS)]
    rows: Annotated[list[Row], Field(max_length=MAX_ROWS), at_most(MAX_ROWS)] = Field(default_factory=list)
    empty: str = Field(default="No rows.", max_length=200)
    """Shown in place of the rows when there are none."""

    @model_validator(mode="after")
    def _unique_keys(self) -> DataTableProps:
        keys = [c.key for c in self.columns]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"columns: duplicate keys {', '.join(duplicates)}")
        return self


@dataclass(frozen=True, kw_only=True)
class ColumnView:
    """A column as the template draws it."""

    label: str
    align: str
    css: str
    """Class names of its cells."""


@dataclass(frozen=True, kw_only=True)
class TableView:
    """A table with every cell already formatted, for the ``table`` macro."""

    columns: list[ColumnView]
    rows: list[list[str]]
    empty: str
    wide: bool
    """Too wide for a phone-width image: laid out on a wider image page (and smaller type)."""


def table_view(columns: list[Column], rows: list[dict[str, Any]], empty: str) -> TableView:
    """Format every cell of a table for the template."""
    views = [
        ColumnView(
            label=c.label,
            align=c.alignment,
            css=f"ag-al-{c.alignment}" + (" ag-num" if is_numeric_format(c.format) else ""),
        )
        for c in columns
    ]
    cells = [[c.cell(row.get(c.key)) for c in columns] for row in rows]
    wide = _natural_width(columns, cells) > _PHONE_WIDTH
    return TableView(columns=views, rows=cells, empty=empty, wide=wide)


def _natural_width(columns: list[Column], cells: list[list[str]]) -> float:
    """About how wide the table wants to be, in CSS px.

    Numbers do not wrap, text wraps past 18 characters, headers are uppercase and spaced.
    """
    total = 0.0
    for index, column in enumerate(columns):
        numeric = is_numeric_format(column.format)
        header = max((len(word) for word in column.label.split()), default=0) * 1.15
        longest = max((len(row[index]) for row in cells[:100]), default=0)
        total += max(header, longest if numeric else min(longest, 18)) * _CHAR + _CELL_PADDING
    return total


def datatable_context(props: DataTableProps) -> dict[str, Any]:
    """Template variables of ``DataTable``."""
    count = len(props.rows)
    return {
        "table": table_view(props.columns, props.rows, props.empty),
        "count_label": f"{count:,} row{'s' if count != 1 else ''}",
    }


def table_text(columns: list[Column], rows: list[dict[str, Any]], empty: str) -> str:
    """A fixed-width text table of at most 15 rows, or the ``empty`` text."""
    if not rows:
        return empty
    return fixed_table(
        [c.label for c in columns],
        [[c.cell(row.get(c.key)) for c in columns] for row in rows[:TEXT_ROWS]],
        [c.alignment for c in columns],
        max_rows=TEXT_ROWS,
        total=len(rows),
    )


def datatable_text(props: DataTableProps) -> str:
    """Text form of ``DataTable``: the title in bold, then the fixed-width table."""
    body = table_text(props.columns, props.rows, props.empty)
    return f"{bold(props.title)}\n{body}" if props.title else body


def datatable_media(props: DataTableProps | None) -> MediaKind:
    """Long tables (more than ``LONG_TABLE_ROWS`` rows) read better as a PDF than as images."""
    return "pdf" if props is not None and len(props.rows) > LONG_TABLE_ROWS else "image"
