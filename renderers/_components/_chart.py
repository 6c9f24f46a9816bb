"""``Chart``: bar and line charts drawn as inline SVG, every coordinate computed here in Python."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from renderers._formats import format_value
from renderers._props import ComponentProps, at_most
from renderers._textform import bold, clip

from ._table import CellValue

__all__ = ["ChartProps", "ChartView", "Series", "chart_context", "chart_text", "nice_ticks"]

PALETTE = ("#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#06b6d4", "#ec4899", "#64748b")
"""Series colours, in order; distinct for the common kinds of colour blindness in the first four."""

WIDTH = 480
HEIGHT = 290
_FONT = 12.5
_CHAR = 7.2  # average advance of a digit or letter at _FONT, for label room
_TOP = 14
_RIGHT = 12
_BOTTOM = 30
_TEXT_POINTS = 15


MAX_VALUE = 1e18
"""The largest magnitude a chart draws: the axis arithmetic stays finite (a span of two floats
near ``1e308`` is infinite) and a label still reads as a number."""


class Series(ComponentProps):
    """One series of a ``Chart``: the key of its values in each data row and its legend label."""

    key: str = Field(min_length=1, max_length=200)
    label: str = Field(max_length=100)
    color: str | None = Field(default=None, pattern=r"^#[0-9a-fA-F]{6}$")
    """``#rrggbb``; default the palette's next colour."""


class ChartProps(ComponentProps):
    """Props of ``Chart``: ``{type: bar|line, title?, x_key, series: [{key, label}], data: [object], unit?}``."""

    type: Literal["bar", "line"]
    title: str | None = Field(default=None, max_length=300)
    x_key: str = Field(min_length=1, max_length=200)
    series: Annotated[list[Series], Field(min_length=1, max_length=8), at_most(8)]
    data: Annotated[list[dict[str, CellValue]], Field(min_length=1, max_length=500), at_most(500)]
    unit: str | None = Field(default=None, max_length=16)
    """Unit of the values, shown on the value axis and in the text form."""
    x_label: str | None = Field(default=None, max_length=80)
    """Title of the category axis."""
    y_label: str | None = Field(default=None, max_length=80)
    """Title of the value axis."""

    @model_validator(mode="after")
    def _numeric_values(self) -> ChartProps:
        for index, row in enumerate(self.data):
            for series in self.series:
                value = row.get(series.key)
                if value is None:
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float | Decimal) or not math.isfinite(value):
                    raise ValueError(f"data.{index}.{series.key}: expected a number or null, got {value!r:.40}")
                if abs(float(value)) > MAX_VALUE:
                    limit = f"±{MAX_VALUE:.0e}"
                    raise ValueError(f"data.{index}.{series.key}: {value:.3g} is beyond the {limit} a chart draws")
        return self


@dataclass(frozen=True, kw_only=True)
class Tick:
    """A value-axis tick: its y and its label."""

    y: float
    label: str


@dataclass(frozen=True, kw_only=True)
class XLabel:
    """A category label under the plot."""

    x: float
    text: str


@dataclass(frozen=True, kw_only=True)
class Bar:
    """One bar."""

    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass(frozen=True, kw_only=True)
class Line:
    """One series as a line: several segments when values are missing."""

    segments: list[str]
    """``points`` attributes of each polyline."""
    markers: list[tuple[float, float]]
    color: str


@dataclass(frozen=True, kw_only=True)
class ChartView:
    """Everything the chart template draws, in SVG user units."""

    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    font: float
    ticks: list[Tick]
    zero_y: float
    x_labels: list[XLabel]
    bars: list[Bar]
    lines: list[Line]
    legend: list[tuple[str, str]]
    axis_title: str


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` with about ``count`` steps of 1, 2, 2.5 or 5 x 10^k."""
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.999)
    start = math.floor(low / step + 1e-9) * step
    stop = math.ceil(high / step - 1e-9) * step
    return [start + i * step for i in range(round((stop - start) / step) + 1)]


def compact_number(value: float) -> str:
    """``1200`` reads ``1.2k``, ``2500000`` reads ``2.5M``; small numbers keep two decimals at most."""
    magnitude = abs(value)
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if magnitude >= limit:
            return f"{value / limit:.3g}{suffix}"
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float | Decimal) and not isinstance(value, bool) else None


def _values(props: ChartProps, series: Series) -> list[float | None]:
    return [_number(row.get(series.key)) for row in props.data]


def _domain(props: ChartProps, columns: list[list[float | None]]) -> tuple[float, float]:
    present = [v for column in columns for v in column if v is not None]
    if not present:
        return 0.0, 1.0
    low, high = min(present), max(present)
    if props.type == "bar" or (low >= 0 and low <= high / 2):
        low, high = min(low, 0.0), max(high, 0.0)
    return low, high


def chart_context(props: ChartProps) -> dict[str, Any]:
    """Template variables of ``Chart``: its geometry, in a ``ChartView`` named ``chart``."""
    colors = [s.color or PALETTE[i % len(PALETTE)] for i, s in enumerate(props.series)]
    columns = [_values(props, s) for s in props.series]
    ticks = nice_ticks(*_domain(props, columns))
    labels = [compact_number(t) for t in ticks]
    left = max(len(label) for label in labels) * _CHAR + 14
    right: float = WIDTH - _RIGHT
    top: float = _TOP + (_FONT + 6 if props.y_label or props.unit else 0)
    bottom: float = HEIGHT - _BOTTOM
    if props.x_label:
        bottom -= _FONT + 6
    low, high = ticks[0], ticks[-1]

    def y_of(value: float) -> float:
        return round(bottom - (value - low) / (high - low) * (bottom - top), 2)

    count = len(props.data)
    plot = right - left
    if props.type == "bar":
        band = plot / count
        centers = [left + band * (i + 0.5) for i in range(count)]
    else:
        inset = min(16.0, plot / 8)  # keep the first and last points (and their labels) off the edges
        band = (plot - 2 * inset) / max(count - 1, 1)
        centers = [left + inset + band * i for i in range(count)] if count > 1 else [left + plot / 2]
    x_texts = [format_value(row.get(props.x_key)) for row in props.data]
    view = ChartView(
        width=WIDTH,
        height=HEIGHT,
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        font=_FONT,
        ticks=[Tick(y=y_of(t), label=label) for t, label in zip(ticks, labels, strict=True)],
        zero_y=y_of(min(max(0.0, low), high)),
        x_labels=_x_labels(centers, x_texts, plot),
        bars=_bars(props, columns, colors, centers, band, y_of, x_texts) if props.type == "bar" else [],
        lines=_lines(columns, colors, centers, y_of) if props.type == "line" else [],
        legend=[(s.label, c) for s, c in zip(props.series, colors, strict=True)],
        axis_title=" ".join(p for p in (props.y_label, f"({props.unit})" if props.unit else None) if p),
    )
    return {"chart": view}


def _x_labels(centers: list[float], texts: list[str], plot: float) -> list[XLabel]:
    clipped = [clip(t, 14) for t in texts]
    widest = max((len(t) for t in clipped), default=1) * _CHAR + 10
    step = max(1, math.ceil(len(centers) / max(1, int(plot // widest))))
    return [XLabel(x=round(centers[i], 2), text=clipped[i]) for i in range(0, len(centers), step)]


def _bars(
    props: ChartProps,
    columns: list[list[float | None]],
    colors: list[str],
    centers: list[float],
    band: float,
    y_of: Callable[[float], float],
    x_texts: list[str],
) -> list[Bar]:
    group = band * (0.72 if len(columns) > 1 else 0.6)
    width = group / len(columns)
    base = y_of(0.0)
    bars: list[Bar] = []
    for s_index, (series, column) in enumerate(zip(props.series, columns, strict=True)):
        for i, value in enumerate(column):
            if value is None:
                continue
            top = y_of(value)
            shown = format_value(value, "number") + (f" {props.unit}" if props.unit else "")
            bars.append(
                Bar(
                    x=round(centers[i] - group / 2 + s_index * width + width * 0.06, 2),
                    y=min(top, base),
                    width=round(width * 0.88, 2),
                    height=max(round(abs(base - top), 2), 0.5),
                    color=colors[s_index],
                    title=f"{x_texts[i]} · {series.label}: {shown}",
                )
            )
    return bars


def _lines(
    columns: list[list[float | None]], colors: list[str], centers: list[float], y_of: Callable[[float], float]
) -> list[Line]:
    lines: list[Line] = []
    for column, color in zip(columns, colors, strict=True):
        segments: list[list[str]] = [[]]
        markers: list[tuple[float, float]] = []
        for x, value in zip(centers, column, strict=True):
            if value is None:
                if segments[-1]:
                    segments.append([])
                continue
            y = y_of(value)
            segments[-1].append(f"{x:.2f},{y:.2f}")
            markers.append((round(x, 2), y))
        lines.append(
            Line(
                segments=[" ".join(s) for s in segments if s],
                markers=markers if len(centers) <= 40 else [],
                color=color,
            )
        )
    return lines


def chart_text(props: ChartProps) -> str:
    """Text form of ``Chart``: one line per category with every series' value."""
    unit = f" {props.unit}" if props.unit else ""
    head = bold(props.title) if props.title else bold(f"{props.type.capitalize()} chart")
    lines = [head]
    for row in props.data[:_TEXT_POINTS]:
        values = " · ".join(
            f"{s.label} {format_value(row.get(s.key), 'number') or '–'}{unit if row.get(s.key) is not None else ''}"
            for s in props.series
        )
        lines.append(f"{clip(format_value(row.get(props.x_key)), 24)}: {values}")
    hidden = len(props.data) - _TEXT_POINTS
    if hidden > 0:
        lines.append(f"... {hidden} more point{'s' if hidden != 1 else ''}")
    return "\n".join(lines)
