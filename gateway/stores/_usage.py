"""What every store shares about the usage ledger: days and months, cost as integers, retention.

Costs are kept as integer nano-dollars (``cost_nanos``) in Redis and SQL, so sums are exact
whatever the order of additions (a float sum is not, and ``HINCRBYFLOAT`` keeps 17 digits of
text); a step is rounded to a billionth of a dollar once, when it is added.
"""

from __future__ import annotations

import functools
import math
import time
from datetime import UTC, date, datetime, timedelta

from ._records import MAX_STEP_TOKENS, ModelStepEntry, RunRecord, UsageEntry

__all__ = [
    "LEDGER_DAYS",
    "MAX_STEP_COST",
    "MAX_USAGE_DAYS",
    "MEMORY_USAGE_WRITES",
    "USAGE_WRITE_DAYS",
    "check_bucket",
    "cost_nanos",
    "day_expiry",
    "month_expiry",
    "oldest_kept",
    "parse_day",
    "step_usage",
    "usage_cost",
    "usage_days",
    "utc_day",
]

MAX_STEP_COST = 1_000_000.0
"""US dollars one step is charged at most (``UsageEntry`` refuses more)."""

MAX_USAGE_DAYS = 366
"""Days one ``usage_rows`` call may span at most."""

LEDGER_DAYS = 400
"""Days a ledger line and a day's total are kept after their day, and a month's after its month."""

USAGE_WRITE_DAYS = 2
"""Days a store remembers an ``add_usage`` write id (a retry, or a resume on another process, comes
well within them); the memory store keeps the newest ``MEMORY_USAGE_WRITES`` at most."""

MEMORY_USAGE_WRITES = 100_000
"""Write ids ``MemoryStore`` remembers at most (the oldest are forgotten first)."""

_NANOS = 1_000_000_000


def utc_day(now: float | None = None) -> str:
    """The UTC day of ``now`` (``time.time()`` when ``None``) as ``YYYY-MM-DD``."""
    return _day_of(int((time.time() if now is None else now) // 86_400))


@functools.lru_cache(maxsize=64)
def _day_of(number: int) -> str:
    """The ``YYYY-MM-DD`` of a UNIX day number (seconds // 86,400: UTC days have no leap seconds)."""
    return time.strftime("%Y-%m-%d", time.gmtime(number * 86_400))


def step_usage(run: RunRecord, step: ModelStepEntry) -> UsageEntry | None:
    """The ledger entry of a journaled model step of ``run``, charged today (``None``: a direct call, no model).

    Bounded as the ledger bounds a step (a provider's absurd count is no real step); its write id
    ``<run_id>:<step>`` is the same on every retry and every process.
    """
    if step.model is None:
        return None
    cost = None if step.cost_usd is None else min(max(step.cost_usd, 0.0), MAX_STEP_COST)
    return UsageEntry(
        actor_key=run.actor.key,
        day=utc_day(),
        agent=run.agent,
        model=step.model,
        input_tokens=min(max(step.usage.input_tokens, 0), MAX_STEP_TOKENS),
        output_tokens=min(max(step.usage.output_tokens, 0), MAX_STEP_TOKENS),
        cost_usd=cost,
        write_id=f"{run.run_id}:{step.step}",
    )


def cost_nanos(cost_usd: float) -> int:
    """A step's cost in nano-dollars."""
    return round(cost_usd * _NANOS)


def usage_cost(nanos: int, priced_steps: int) -> float | None:
    """A line's cost in dollars; ``None`` when none of its steps was priced."""
    return nanos / _NANOS if priced_steps else None


def parse_day(day: str, name: str = "day") -> date:
    """``day`` as a date: exactly ``YYYY-MM-DD`` in ASCII digits, a day the calendar has.

    Raises:
        ValueError: Anything else (``name`` says which value it was).
    """
    try:
        if len(day) != 10 or not day.isascii():
            raise ValueError(day)
        return date.fromisoformat(day)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a day, YYYY-MM-DD: {day!r}") from None


def usage_days(start: str, end: str) -> list[str]:
    """The days ``start..end`` (both included), in order; empty when ``end`` is before ``start``.

    Raises:
        ValueError: A bound is no ``YYYY-MM-DD`` day, or the range spans more than ``MAX_USAGE_DAYS``.
    """
    first, last = parse_day(start, "start"), parse_day(end, "end")
    span = (last - first).days + 1
    if span > MAX_USAGE_DAYS:
        raise ValueError(f"A usage range spans at most {MAX_USAGE_DAYS} days: {start}..{end} spans {span}")
    return [(first + timedelta(days=offset)).isoformat() for offset in range(max(0, span))]


def _epoch(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def day_expiry(day: str, now: float) -> int:
    """When a day's ledger lines and total may go (UNIX seconds): ``LEDGER_DAYS`` after the day.

    A day older than that (a late write) is kept a day after ``now``, never dropped at once.
    """
    return max(_day_end(day), int(now) + 86_400)


@functools.lru_cache(maxsize=64)
def _day_end(day: str) -> int:
    return _epoch(date.fromisoformat(day) + timedelta(days=1 + LEDGER_DAYS))


@functools.lru_cache(maxsize=64)
def _month_end(day: str) -> int:
    first = date.fromisoformat(day).replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return _epoch(following + timedelta(days=LEDGER_DAYS))


def month_expiry(day: str, now: float) -> int:
    """When the total of ``day``'s month may go (UNIX seconds): ``LEDGER_DAYS`` after the month."""
    return max(_month_end(day), int(now) + 86_400)


def oldest_kept(now: float) -> str:
    """The oldest day whose ledger lines and total an SQL sweep keeps (``LEDGER_DAYS`` back)."""
    return (datetime.fromtimestamp(now, UTC).date() - timedelta(days=LEDGER_DAYS)).isoformat()


def check_bucket(rate: float, burst: float, now: float) -> None:
    """Refuse a bucket no arithmetic can keep.

    Raises:
        ValueError: ``rate`` or ``burst`` is negative or not finite, or ``now`` is not finite.
    """
    if not (math.isfinite(rate) and math.isfinite(burst) and math.isfinite(now)) or rate < 0 or burst < 0:
        raise ValueError(f"A bucket needs a finite rate and burst >= 0 and a finite now: {rate}, {burst}, {now}")
