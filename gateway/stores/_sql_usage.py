"""The SQL stores' usage ledger and rate-limit buckets, as functions over a ``Tx`` (see ``_sql_tx``).

``add_usage`` is one transaction: the entry's write id is inserted into ``usage_writes`` unless
its actor added it already (then the transaction only reads the totals: a retried write adds
nothing), then two upserts: the ledger line's counters (``usage_lines``), then the day's and the
month's totals (``usage_totals``, one statement for both, ``RETURNING`` what they hold now).
Concurrent additions for one actor wait on each other's row locks (SQLite: on its one writer),
always in the same order, so each is counted once and none deadlocks; two with one write id, on
its ``usage_writes`` row: the second adds nothing. Costs are integer nano-dollars (exact sums; see ``_usage``).

``take_token`` runs in one locked transaction: a full bucket is inserted unless one exists, read
with a row lock (``FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` holds the whole database), refilled
by ``now`` (never backwards), and written back with the time it would be full again
(``full_ts``). Every process sharing the database takes from the same row.

``sweep`` (``_sql_state``) deletes the ledger's lines and totals older than ``LEDGER_DAYS``, the
write ids older than ``USAGE_WRITE_DAYS`` and the buckets that are full again.
"""

from __future__ import annotations

import time

from ._records import UsageEntry, UsageRow, UsageTotals
from ._sql_tx import Tx
from ._usage import USAGE_WRITE_DAYS, cost_nanos, oldest_kept, usage_cost, usage_days

__all__ = ["add_usage", "sweep_usage", "take_token", "usage_rows", "usage_totals"]

_NEVER_FULL = 86_400.0
"""A bucket that never fills (no refill rate) is forgotten after a day."""


async def add_usage(tx: Tx, entry: UsageEntry) -> UsageTotals:
    """Add one step to its ledger line and its actor's totals (in a ``locked`` transaction), once per write id."""
    if entry.write_id is not None:
        new = await tx.fetch(
            "INSERT INTO usage_writes (actor_key, write_id, written_ts) VALUES ($1, $2, $3) "
            "ON CONFLICT (actor_key, write_id) DO NOTHING RETURNING write_id",
            entry.actor_key,
            entry.write_id,
            time.time(),
        )
        if not new:
            return await usage_totals(tx, entry.actor_key, entry.day)
    unpriced = entry.cost_usd is None
    await tx.execute(
        "INSERT INTO usage_lines (day, actor_key, agent, model, input_tokens, output_tokens, steps, cost_nanos, "
        "unpriced_steps) VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8) ON CONFLICT (day, actor_key, agent, model) "
        "DO UPDATE SET input_tokens = usage_lines.input_tokens + excluded.input_tokens, "
        "output_tokens = usage_lines.output_tokens + excluded.output_tokens, steps = usage_lines.steps + 1, "
        "cost_nanos = usage_lines.cost_nanos + excluded.cost_nanos, "
        "unpriced_steps = usage_lines.unpriced_steps + excluded.unpriced_steps",
        entry.day,
        entry.actor_key,
        entry.agent,
        entry.model,
        entry.input_tokens,
        entry.output_tokens,
        0 if entry.cost_usd is None else cost_nanos(entry.cost_usd),
        1 if unpriced else 0,
    )
    rows = await tx.fetch(
        "INSERT INTO usage_totals (actor_key, period, tokens) VALUES ($1, $2, $4), ($1, $3, $4) "
        "ON CONFLICT (actor_key, period) DO UPDATE SET tokens = usage_totals.tokens + excluded.tokens "
        "RETURNING period, tokens",
        entry.actor_key,
        entry.day,
        entry.day[:7],
        entry.input_tokens + entry.output_tokens,
    )
    totals = {period: int(tokens) for period, tokens in rows}
    return UsageTotals(day_tokens=totals[entry.day], month_tokens=totals[entry.day[:7]])


async def usage_totals(tx: Tx, actor_key: str, day: str) -> UsageTotals:
    """The actor's tokens on ``day`` and in its month."""
    rows = await tx.fetch(
        "SELECT period, tokens FROM usage_totals WHERE actor_key = $1 AND period IN ($2, $3)",
        actor_key,
        day,
        day[:7],
    )
    totals = {period: int(tokens) for period, tokens in rows}
    return UsageTotals(day_tokens=totals.get(day, 0), month_tokens=totals.get(day[:7], 0))


async def usage_rows(tx: Tx, start: str, end: str, actor_key: str | None, limit: int) -> list[UsageRow]:
    """Ledger lines within ``start..end``, ordered by day, actor, agent and model (code points).

    Raises:
        ValueError: A bound is no day, or the range spans more than ``MAX_USAGE_DAYS``.
    """
    if not usage_days(start, end) or limit <= 0:
        return []
    mine = "AND actor_key = $4 " if actor_key is not None else ""
    rows = await tx.fetch(
        "SELECT day, actor_key, agent, model, input_tokens, output_tokens, steps, cost_nanos, unpriced_steps "
        f"FROM usage_lines WHERE day >= $1 AND day <= $2 {mine}ORDER BY day, actor_key, agent, model LIMIT $3",
        start,
        end,
        limit,
        *([actor_key] if actor_key is not None else []),
    )
    return [
        UsageRow(
            day=day,
            actor_key=actor,
            agent=agent,
            model=model,
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
            steps=int(steps),
            cost_usd=usage_cost(int(nanos), int(steps) - int(unpriced)),
            unpriced_steps=int(unpriced),
        )
        for day, actor, agent, model, input_tokens, output_tokens, steps, nanos, unpriced in rows
    ]


async def take_token(tx: Tx, key: str, rate: float, burst: float, now: float) -> float:
    """Take a token from ``key``'s bucket (in a ``locked`` transaction); ``0.0`` or the wait in seconds."""
    await tx.execute(
        "INSERT INTO buckets (key, tokens, last_ts, full_ts) VALUES ($1, $2, $3, $3) ON CONFLICT (key) DO NOTHING",
        key,
        float(burst),
        now,
    )
    row = await tx.fetchrow(f"SELECT tokens, last_ts FROM buckets WHERE key = $1{tx.dialect.lock}", key)
    tokens, last = (float(row[0]), float(row[1])) if row is not None else (float(burst), now)  # swept meanwhile
    if now > last:
        tokens, last = min(burst, tokens + (now - last) * rate), now
    wait = 0.0
    if tokens >= 1.0:
        tokens -= 1.0
    else:
        wait = (1.0 - tokens) / rate if rate > 0 else 60.0
    full = last + ((burst - tokens) / rate if rate > 0 else _NEVER_FULL)
    await tx.execute(
        "INSERT INTO buckets (key, tokens, last_ts, full_ts) VALUES ($1, $2, $3, $4) ON CONFLICT (key) "
        "DO UPDATE SET tokens = excluded.tokens, last_ts = excluded.last_ts, full_ts = excluded.full_ts",
        key,
        tokens,
        last,
        full,
    )
    return wait


async def sweep_usage(tx: Tx, now: float) -> None:
    """Delete the ledger older than ``LEDGER_DAYS``, older write ids and the buckets that are full again."""
    oldest = oldest_kept(now)
    await tx.put("DELETE FROM usage_writes WHERE written_ts < $1", now - USAGE_WRITE_DAYS * 86_400.0)
    await tx.put("DELETE FROM usage_lines WHERE day < $1", oldest)
    await tx.put("DELETE FROM usage_totals WHERE period < $1 AND length(period) = 10", oldest)
    await tx.put("DELETE FROM usage_totals WHERE period < $1 AND length(period) = 7", oldest[:7])
    await tx.put("DELETE FROM buckets WHERE full_ts <= $1", now)
