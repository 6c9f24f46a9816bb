"""The demo's own phrasings: which demo tool a message asks for, and with what.

Each rule reads one message and names a demo tool, with its arguments or with what to say first
(a question, or why the message cannot be used). Whether the tool is on offer is the model's
business, not this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ._data import Period

__all__ = ["DemoIntent", "confirms", "declines", "demo_intent"]


@dataclass(frozen=True, kw_only=True)
class DemoIntent:
    """A demo tool a message asks for."""

    tool: str
    """The demo tool's name."""
    args: dict[str, Any] | None = None
    """Its arguments, or ``None`` when ``reply`` must be said instead of calling it."""
    reply: str = ""
    """What to say instead of calling (a question for a missing value, say)."""


_YES = re.compile(r"^\s*(yes|yep|confirm|confirmed|sure|ok|okay|do it|sim|confirmar)\b", re.IGNORECASE)
# Anywhere in the message, and read before _YES: "ok, keep it" keeps it. A refusal that is
# taken for a yes cancels a subscription; a yes taken for a refusal only asks again.
_NO = re.compile(r"\b(no|nope|nah|keep|don'?t|don’t|do not|not now|never ?mind|não|nao|cancel that)\b", re.IGNORECASE)
_ORDER_NUMBER = re.compile(r"\D*?(\d+)")
_PERIODS: dict[str, Period] = {
    "today": "day", "day": "day", "daily": "day", "hoje": "day",
    "week": "week", "weekly": "week", "semana": "week",
    "month": "month", "monthly": "month", "mês": "month", "mes": "month",
    "quarter": "quarter", "quarterly": "quarter", "trimestre": "quarter",
    "year": "year", "yearly": "year", "annual": "year", "ano": "year",
}  # fmt: skip
_PERIOD = re.compile(r"\b(" + "|".join(_PERIODS) + r")\b", re.IGNORECASE)
_WEATHER = re.compile(r"\bweather\b(.*)$", re.IGNORECASE | re.DOTALL)
# Words around a city that are not the city: "what's the weather like in Lisbon today?".
_NOT_CITY = frozenset({"in", "for", "at", "em", "like", "is", "the", "today", "tomorrow", "now", "right", "please"})
# Letters, with single spaces, apostrophes, dots or hyphens between them: "São Paulo",
# "N'Djamena", "St. Louis", "Castellón de la Plana". Markup, digits and symbols are no city.
_CITY = re.compile(r"[^\W\d_]+(?:(?:[ '’-]|\. ?)[^\W\d_]+)*")


def confirms(text: str) -> bool:
    """Whether ``text`` agrees to a pending preview (a refusal anywhere in it wins)."""
    return not declines(text) and _YES.match(text) is not None


def declines(text: str) -> bool:
    """Whether ``text`` turns a pending preview or question down: "no", "no thanks", "keep it", "não"."""
    return _NO.search(text) is not None


def demo_intent(text: str) -> DemoIntent | None:
    """The demo tool ``text`` asks for, if one of the demo's phrasings matches."""
    lowered = text.lower()
    if match := _WEATHER.search(text):
        return _weather(match.group(1))
    for word, tool in (("refund", "refund_order"), ("invoice", "get_invoice")):
        if match := re.search(rf"\b{word}\b", text, re.IGNORECASE):
            return _for_order(tool, text[match.end() :])
    if "subscription" in lowered and ("cancel" in lowered or "stop" in lowered):
        return DemoIntent(tool="cancel_subscription", args={})
    if "sales" in lowered or "revenue" in lowered:
        said = _PERIOD.search(text)
        period: Period = _PERIODS[said.group(1).lower()] if said else "month"
        return DemoIntent(tool="sales_report", args={"period": period})
    return None


def _weather(after: str) -> DemoIntent:
    words = after.strip(" \t\n?!.,;:").split()
    while words and words[0].strip("?!.,;:").lower() in _NOT_CITY:
        words.pop(0)
    rest = " ".join(words)
    # The city is the run of letters the rest starts with: "Lisbon?" and "Lisbon \ufffd" (a
    # character lost on the way) are Lisbon; "<img src=x ...>" starts with none.
    city_words = match.group().split() if (match := _CITY.match(rest)) else []
    while city_words and city_words[-1].lower() in _NOT_CITY:
        city_words.pop()
    city = " ".join(city_words)
    if not rest:
        return DemoIntent(tool="get_weather", reply="Which city? For example *weather in Lisbon*.")
    if not city or len(city) > 60:
        # Never echoed: it may be markup, and a channel need not escape what it does not expect.
        return DemoIntent(
            tool="get_weather",
            reply="That does not look like a city name. Tell me a city, for example *weather in Lisbon*.",
        )
    return DemoIntent(tool="get_weather", args={"city": city})


def _for_order(tool: str, after: str) -> DemoIntent:
    # Any number is the order's: the tool says so when there is no such order ("order 1").
    if match := _ORDER_NUMBER.match(after):
        return DemoIntent(tool=tool, args={"order_id": match.group(1)})
    return DemoIntent(tool=tool, reply="Which order number? For example *1042*.")
