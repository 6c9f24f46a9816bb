"""``KpiCards`` (headline numbers with their change) and ``Callout`` (a toned message)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import Field

from renderers._formats import format_value, to_decimal
from renderers._props import ComponentProps, at_most
from renderers._textform import bold

__all__ = ["CalloutProps", "Kpi", "KpiCardsProps", "callout_text", "kpi_context", "kpi_text"]

Tone = Literal["up", "down", "flat"]


class Kpi(ComponentProps):
    """One headline number."""

    label: str = Field(max_length=100)
    value: Annotated[str, Field(max_length=100)] | int | float | Decimal
    """Numbers get thousands separators; text is shown as given."""
    unit: str | None = Field(default=None, max_length=20)
    delta: Annotated[str, Field(max_length=40)] | int | float | Decimal | None = None
    """Change against the previous period. A number is a percentage (``12.5`` reads ``+12.5%``);
    text is shown as given and its leading ``+`` or ``-`` picks the colour."""


class KpiCardsProps(ComponentProps):
    """Props of ``KpiCards``: ``{items: [{label, value, unit?, delta?}]}``, 1 to 12 items."""

    title: str | None = Field(default=None, max_length=300)
    items: Annotated[list[Kpi], Field(min_length=1, max_length=12), at_most(12)]


@dataclass(frozen=True, kw_only=True)
class KpiView:
    """A KPI as the template draws it."""

    label: str
    value: str
    unit: str
    tight_unit: bool
    """``%`` and degree units follow the number without a gap."""
    delta: str
    tone: Tone


def _value_text(value: object) -> str:
    return format_value(value, "number") if to_decimal(value) is not None and not isinstance(value, str) else str(value)


def _delta(delta: object) -> tuple[str, Tone]:
    if delta is None:
        return "", "flat"
    if isinstance(delta, str):
        text = delta.strip()
        sign = text[:1]
        tone: Tone = "up" if sign == "+" else "down" if sign in ("-", "−") else "flat"
        return text, tone
    number = to_decimal(delta) or Decimal(0)
    text = format_value(number, "number", decimals=None if number == number.to_integral() else 1)
    if number > 0:
        return f"+{text}%", "up"
    if number < 0:
        return f"{text}%", "down"
    return "0%", "flat"


def kpi_context(props: KpiCardsProps) -> dict[str, Any]:
    """Template variables of ``KpiCards``."""
    items = []
    for item in props.items:
        delta, tone = _delta(item.delta)
        unit = (item.unit or "").strip()
        items.append(
            KpiView(
                label=item.label,
                value=_value_text(item.value),
                unit=unit,
                tight_unit=unit[:1] in ("%", "°", "‰"),
                delta=delta,
                tone=tone,
            )
        )
    return {"kpis": items}


def kpi_text(props: KpiCardsProps) -> str:
    """Text form of ``KpiCards``: one line per number."""
    lines = [bold(props.title)] if props.title else []
    for view in kpi_context(props)["kpis"]:
        unit = ("" if view.tight_unit else " ") + view.unit if view.unit else ""
        delta = f" ({view.delta})" if view.delta else ""
        lines.append(f"• {view.label}: **{view.value}{unit}**{delta}")
    return "\n".join(lines)


class CalloutProps(ComponentProps):
    """Props of ``Callout``: ``{tone: info|success|warning|danger, title?, text}``."""

    tone: Literal["info", "success", "warning", "danger"] = "info"
    title: str | None = Field(default=None, max_length=300)
    text: str = Field(max_length=20_000)


_MARKS = {"info": "ℹ️", "success": "✅", "warning": "⚠️", "danger": "⛔"}


def callout_text(props: CalloutProps) -> str:
    """Text form of ``Callout``: a tone mark, the title in bold, the text."""
    head = f"{_MARKS[props.tone]} {bold(props.title)}" if props.title else _MARKS[props.tone]
    return f"{head}\n{props.text.strip()}" if props.title else f"{head} {props.text.strip()}"
