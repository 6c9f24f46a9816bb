"""The demo's made-up shop: orders, customers and sales, the same for every visitor."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ORDERS", "PERIODS", "Order", "Period", "sales_series", "weather_for"]


@dataclass(frozen=True)
class Order:
    """One order of the demo shop."""

    id: str
    date: str
    item: str
    quantity: int
    unit_price: float
    status: str
    card: str = "4242"

    @property
    def total(self) -> float:
        """Quantity times unit price."""
        return round(self.quantity * self.unit_price, 2)


ORDERS: dict[str, Order] = {
    o.id: o
    for o in (
        Order("1040", "2026-10-02", "Espresso machine", 1, 249.00, "delivered"),
        Order("1041", "2026-10-19", "Coffee beans, 1 kg", 3, 18.50, "delivered"),
        Order("1042", "2026-11-03", "Burr grinder", 1, 129.00, "delivered"),
        Order("1043", "2026-11-12", "Milk frother", 2, 34.90, "shipped"),
        Order("1044", "2026-11-21", "Ceramic cups (set of 4)", 1, 42.00, "processing"),
        Order("1045", "2026-11-27", "Descaling tablets", 5, 6.99, "processing"),
    )
}

_CONDITIONS = ("Sunny", "Partly cloudy", "Cloudy", "Light rain", "Windy", "Clear")


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.strip().lower().encode()).hexdigest(), 16)


def weather_for(city: str) -> dict[str, object]:
    """A made-up but stable forecast for ``city``."""
    seed = _digest(city)
    return {
        "city": city.strip().title(),
        "temp_c": 8 + seed % 22,
        "condition": _CONDITIONS[seed % len(_CONDITIONS)],
        "wind_kmh": 5 + (seed >> 8) % 30,
        "humidity": 40 + (seed >> 16) % 50,
    }


Period = Literal["day", "week", "month", "quarter", "year"]
"""A span of sales to chart, each up to now. ``day`` is today: "for the day" reads right in every
narration ("Charting sales for the {period}"), where "for the today" would not."""

PERIODS: dict[Period, str] = {
    "day": "today",
    "week": "this week",
    "month": "this month",
    "quarter": "this quarter",
    "year": "this year",
}
"""How a sentence names each period: ``f"Revenue {PERIODS[period]}"``."""

_BUCKETS: dict[Period, tuple[list[str], float]] = {
    # The labels of a period's buckets, and the size of a bucket against a day of the week.
    "day": (["09:00", "11:00", "13:00", "15:00", "17:00", "19:00"], 1 / 6),
    "week": (["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"], 1),
    "month": (["W1", "W2", "W3", "W4"], 6),
    "quarter": (["Sep", "Oct", "Nov"], 25),
    "year": (["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 25),
}


def sales_series(period: Period) -> list[dict[str, Any]]:
    """Made-up revenue per region for each bucket of ``period``."""
    buckets, scale = _BUCKETS[period]
    rows = []
    for index, label in enumerate(buckets):
        seed = _digest(f"{period}:{label}")
        rows.append(
            {
                "period": label,
                "online": round((1200 + seed % 900 + index * 80) * scale, 2),
                "stores": round((800 + (seed >> 12) % 700) * scale, 2),
            }
        )
    return rows
