"""How cell and KPI values read: numbers, money, percentages and dates, the same in HTML and text.

Formatting never raises: a value that does not fit its format is shown as it is.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Literal

__all__ = ["ValueFormat", "format_value", "is_numeric_format", "to_decimal"]

ValueFormat = Literal["text", "number", "currency", "percent", "date"]
"""How a value is shown: as given, ``1,234.5``, ``$1,234.50``, ``12.5%`` or ``Mar 5, 2024``."""


_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£", "BRL": "R$", "JPY": "¥", "INR": "₹", "CNY": "¥", "KRW": "₩"}
_ZERO_DECIMAL = frozenset({"JPY", "KRW", "CLP", "VND", "ISK"})


def is_numeric_format(fmt: ValueFormat) -> bool:
    """Whether values of this format are numbers (and so align right by default)."""
    return fmt in ("number", "currency", "percent")


def to_decimal(value: object) -> Decimal | None:
    """``value`` as a finite ``Decimal`` when it is a number or a numeric string, else ``None``."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | Decimal):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None
        number = Decimal(repr(value))
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip().replace(",", ""))
        except InvalidOperation:
            return None
    else:
        return None
    return number if number.is_finite() else None


def format_value(
    value: object,
    fmt: ValueFormat = "text",
    *,
    currency: str = "USD",
    decimals: int | None = None,
) -> str:
    """Format one value for display.

    Args:
        value: A JSON scalar, a ``Decimal``, a ``date`` or a ``datetime``.
        fmt: See ``ValueFormat``. ``percent`` takes a ratio (``0.125`` reads ``12.5%``).
        currency: ISO 4217 code for ``currency``; common codes get their symbol.
        decimals: Fixed decimals for numbers; default none for integers and 2 otherwise.

    Returns:
        The text; ``""`` for ``None``. A value that does not fit ``fmt`` is shown as given.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if fmt == "date":
        return _format_date(value)
    if is_numeric_format(fmt):
        number = to_decimal(value)
        if number is not None:
            return _format_number(number, fmt, currency=currency, decimals=decimals)
    if isinstance(value, float):
        return format(value, "g") if math.isfinite(value) else str(value)
    if isinstance(value, dt.datetime | dt.date):
        return _format_date(value)
    return str(value)


def _format_number(number: Decimal, fmt: ValueFormat, *, currency: str, decimals: int | None) -> str:
    if fmt == "percent":
        number *= 100
        places = decimals if decimals is not None else (0 if number == number.to_integral() else 1)
        return _grouped(number, places) + "%"
    if fmt == "currency":
        places = (0 if currency in _ZERO_DECIMAL else 2) if decimals is None else decimals
        text = _grouped(abs(number), places)
        symbol = _SYMBOLS.get(currency)
        money = f"{symbol}{text}" if symbol else f"{text} {currency}"
        return f"-{money}" if number < 0 and text.strip("0.,") else money
    places = (0 if number == number.to_integral() else 2) if decimals is None else decimals
    return _grouped(number, places)


def _grouped(number: Decimal, places: int) -> str:
    quantum = Decimal(1).scaleb(-places)
    rounded = number.quantize(quantum, rounding=ROUND_HALF_UP)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0.00"
    return f"{rounded:,.{places}f}"


def _format_date(value: object) -> str:
    moment: dt.date | None = None
    if isinstance(value, dt.date):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            moment = dt.datetime.fromisoformat(text) if ("T" in text or " " in text) else dt.date.fromisoformat(text)
        except ValueError:
            return value
    if moment is None:
        return str(value)
    day = f"{moment:%b} {moment.day}, {moment.year}"
    if isinstance(moment, dt.datetime) and (moment.hour, moment.minute, moment.second) != (0, 0, 0):
        return f"{day}, {moment:%H:%M}"
    return day
