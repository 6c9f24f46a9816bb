import datetime as dt
from decimal import Decimal

import pytest

from renderers import format_value
from renderers._components._chart import compact_number, nice_ticks


@pytest.mark.parametrize(
    ("value", "fmt", "kwargs", "expected"),
    [
        (None, "number", {}, ""),
        (True, "text", {}, "Yes"),
        (1234, "number", {}, "1,234"),
        (1234.5, "number", {}, "1,234.50"),
        (2.0, "number", {}, "2"),
        ("1234.5", "number", {}, "1,234.50"),
        ("n/a", "number", {}, "n/a"),
        (1234.5, "number", {"decimals": 1}, "1,234.5"),
        (-0.004, "currency", {}, "$0.00"),
        (-12.5, "currency", {}, "-$12.50"),
        (1234.5, "currency", {"currency": "EUR"}, "€1,234.50"),
        (1234, "currency", {"currency": "JPY"}, "¥1,234"),
        (5, "currency", {"currency": "CHF"}, "5.00 CHF"),
        (Decimal("0.005"), "currency", {}, "$0.01"),
        (0.125, "percent", {}, "12.5%"),
        (0.5, "percent", {}, "50%"),
        ("2024-03-05", "date", {}, "Mar 5, 2024"),
        ("2024-03-05T14:30:00", "date", {}, "Mar 5, 2024, 14:30"),
        (dt.date(2024, 1, 9), "date", {}, "Jan 9, 2024"),
        ("next week", "date", {}, "next week"),
        (1e20, "text", {}, "1e+20"),
        (float("nan"), "number", {}, "nan"),
    ],
)
def test_format_value(value: object, fmt: str, kwargs: dict[str, object], expected: str) -> None:
    assert format_value(value, fmt, **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0, 64, [0, 20, 40, 60, 80]),
        (0, 3120, [0, 1000, 2000, 3000, 4000]),
        (-5, 5, [-6, -4, -2, 0, 2, 4, 6]),
        (7, 7, [6.0, 6.5, 7.0, 7.5, 8.0]),
        (0, 0.9, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    ],
)
def test_nice_ticks_cover_the_range_with_round_steps(low: float, high: float, ticks: list[float]) -> None:
    assert nice_ticks(low, high) == pytest.approx(ticks)


def test_compact_numbers() -> None:
    assert [compact_number(v) for v in (0, 12, 0.25, 1200, 2_500_000, 3e9)] == ["0", "12", "0.25", "1.2k", "2.5M", "3B"]
