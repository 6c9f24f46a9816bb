"""``Document``: a titled document of sections, tables and totals (an invoice, a report)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any

from pydantic import Field, model_validator

from renderers._formats import format_value, to_decimal
from renderers._props import ComponentProps, at_most
from renderers._textform import bold

from ._table import DataTableProps, TableView, table_text, table_view

__all__ = ["DocumentProps", "DocumentSection", "LabelledValue", "document_context", "document_text"]

MAX_DOCUMENT_ROWS = 2_000

Scalar = Annotated[str, Field(max_length=300)] | int | float | Decimal


class LabelledValue(ComponentProps):
    """A label and its value: a line of the header (``meta``) or of the ``totals``."""

    label: str = Field(max_length=100)
    value: Scalar


class DocumentSection(ComponentProps):
    """A part of a document: an optional heading, paragraphs and a table, in that order."""

    heading: str | None = Field(default=None, max_length=300)
    text: str | None = Field(default=None, max_length=20_000)
    """Paragraphs are separated by blank lines; single line breaks are kept."""
    table: DataTableProps | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> DocumentSection:
        if not (self.heading or self.text or self.table):
            raise ValueError("a section needs a heading, a text or a table")
        return self


class DocumentProps(ComponentProps):
    """Props of ``Document``: ``{title, subtitle?, sections: [{heading?, text?, table?}], totals?: [{label, value}]}``.

    ``meta`` (label/value pairs under the title: invoice number, dates, customer) and ``currency``
    (ISO code: numeric totals read as money) are optional additions.
    """

    title: str = Field(max_length=300)
    subtitle: str | None = Field(default=None, max_length=500)
    meta: Annotated[list[LabelledValue], Field(max_length=12), at_most(12)] = Field(default_factory=list)
    sections: Annotated[list[DocumentSection], Field(min_length=1, max_length=100), at_most(100)]
    totals: Annotated[list[LabelledValue], Field(max_length=20), at_most(20)] = Field(default_factory=list)
    """The last line is the grand total and stands out."""
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$")

    @model_validator(mode="after")
    def _bounded_rows(self) -> DocumentProps:
        rows = sum(len(s.table.rows) for s in self.sections if s.table)
        if rows > MAX_DOCUMENT_ROWS:
            raise ValueError(f"sections: {rows} table rows in all, at most {MAX_DOCUMENT_ROWS}")
        return self

    def value_text(self, value: object) -> str:
        """A meta or total value: money when ``currency`` is set and the value is a number."""
        if isinstance(value, str) or to_decimal(value) is None:
            return str(value)
        return format_value(value, "currency" if self.currency else "number", currency=self.currency or "USD")


@dataclass(frozen=True, kw_only=True)
class SectionView:
    """A section as the template draws it."""

    heading: str
    paragraphs: list[str]
    table_title: str
    table: TableView | None


def document_context(props: DocumentProps) -> dict[str, Any]:
    """Template variables of ``Document``."""
    sections = [
        SectionView(
            heading=s.heading or "",
            paragraphs=_paragraphs(s.text),
            table_title=(s.table.title or "") if s.table else "",
            table=table_view(s.table.columns, s.table.rows, s.table.empty) if s.table else None,
        )
        for s in props.sections
    ]
    return {
        "wide": any(section.table is not None and section.table.wide for section in sections),
        "sections": sections,
        "meta": [(m.label, props.value_text(m.value)) for m in props.meta],
        "totals": [(t.label, props.value_text(t.value)) for t in props.totals],
    }


def _paragraphs(text: str | None) -> list[str]:
    if not text:
        return []
    blocks = text.replace("\r\n", "\n").split("\n\n")
    return [block.strip("\n") for block in blocks if block.strip()]


def document_text(props: DocumentProps) -> str:
    """Text form of ``Document``: title, header lines, each section (tables of 15 rows at most), totals."""
    parts = [bold(props.title)]
    if props.subtitle:
        parts[0] += f"\n{props.subtitle.strip()}"
    if props.meta:
        parts.append("\n".join(f"{m.label}: {props.value_text(m.value)}" for m in props.meta))
    for section in props.sections:
        lines = [bold(section.heading)] if section.heading else []
        if section.text and section.text.strip():
            lines.append(section.text.strip())
        if section.table:
            if section.table.title:
                lines.append(section.table.title.strip())
            lines.append(table_text(section.table.columns, section.table.rows, section.table.empty))
        parts.append("\n".join(lines))
    if props.totals:
        totals = [f"{t.label}: {props.value_text(t.value)}" for t in props.totals]
        totals[-1] = bold(totals[-1])
        parts.append("\n".join(totals))
    return "\n\n".join(parts)
