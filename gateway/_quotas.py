"""``Quota``: token budgets per actor per UTC day and month, and how totals measure against one.

A budget counts input plus output tokens of every model step charged to the actor (``Actor.key``)
in the store's ledger, across every agent and every process sharing the store. The quota that
applies is the one of the agent in use (``Agent.quota``, else the runtime's default quota,
``AGORA_QUOTA_DAY`` / ``AGORA_QUOTA_MONTH``): an actor who used 900 tokens today with one agent
has 100 left with another agent whose day budget is 1 000.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tools import UserError

from ._errors import QuotaExceededError
from .stores import UsageTotals

__all__ = ["EXCEEDED_TEXTS", "Period", "Quota", "QuotaReading", "used_percent"]

Period = Literal["day", "month"]

EXCEEDED_TEXTS: dict[str, str] = {
    "day": "You have used today's allowance of the assistant. Please come back tomorrow.",
    "month": "You have used this month's allowance of the assistant. Please come back next month.",
}
"""What a person is told (web, AG-UI, A2A show it as is; push channels' ``ChatTexts`` start from it)."""


def used_percent(used: int, limit: int) -> int:
    """The share of a budget ``used`` is, in whole percent (at most 100; 100 for no limit)."""
    return min(100, int(100 * used / limit)) if limit else 100


@dataclass(frozen=True)
class Quota:
    """Token budgets (input plus output) per actor per UTC day and per UTC month.

    Attributes:
        day: Tokens one actor may use per UTC day (``None``: no daily budget).
        month: Tokens one actor may use per UTC month (``None``: no monthly budget).
        warn_at: The share of a budget (``0 < warn_at <= 1``) from which a run shows a
            ``quota-warning`` event, once per run.
    """

    day: int | None = None
    month: int | None = None
    warn_at: float = 0.8

    def __post_init__(self) -> None:
        for name in ("day", "month"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(f"Quota.{name} must be a positive int (tokens) or None, not {value!r}")
        warn = self.warn_at
        if isinstance(warn, bool) or not isinstance(warn, int | float) or not math.isfinite(warn):
            raise UserError(f"Quota.warn_at must be a number in (0, 1], not {warn!r}")
        if not 0 < warn <= 1:
            raise UserError(f"Quota.warn_at must be in (0, 1], not {warn!r}")

    @property
    def limits(self) -> list[tuple[Period, int]]:
        """The budgets set, the day's first."""
        out: list[tuple[Period, int]] = []
        if self.day is not None:
            out.append(("day", self.day))
        if self.month is not None:
            out.append(("month", self.month))
        return out

    def read(self, totals: UsageTotals) -> QuotaReading:
        """Where ``totals`` stand against this quota."""
        used = {"day": totals.day_tokens, "month": totals.month_tokens}
        exceeded: tuple[Period, int, int] | None = None
        warning: tuple[Period, int, int] | None = None
        for period, limit in self.limits:
            count = used[period]
            if count >= limit and exceeded is None:
                exceeded = (period, count, limit)
            elif count >= self.warn_at * limit and warning is None:
                warning = (period, count, limit)
        return QuotaReading(exceeded=exceeded, warning=warning)


@dataclass(frozen=True, kw_only=True)
class QuotaReading:
    """A quota against an actor's totals: a budget used up, or one near it (``period, used, limit``)."""

    exceeded: tuple[Period, int, int] | None = None
    warning: tuple[Period, int, int] | None = None

    def raise_if_exceeded(self) -> None:
        """Raise when a budget is used up.

        Raises:
            QuotaExceededError: with its ``period``, ``used`` and ``limit``.
        """
        if self.exceeded is not None:
            period, used, limit = self.exceeded
            raise QuotaExceededError(EXCEEDED_TEXTS[period], period=period, used=used, limit=limit)
