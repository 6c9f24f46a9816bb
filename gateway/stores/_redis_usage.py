"""``RedisUsage``: a ``RedisStore``'s usage ledger and rate-limit buckets (keys in ``_redis_layout``).

``add_usage`` is one script over the actor's keys (``{usage:<sha256>}``, one slot): the ledger
line's counters, the day's and the month's totals, their expiry, and a marker of the write
(``write:<sha256 of the entry's write id>``, kept ``USAGE_WRITE_DAYS``; without a write id a
random one, kept two minutes), so the same entry sent again after a lost reply, by this process
or another, adds nothing and answers the totals. The day's index of actors (``P:usage-day:<day>``, its own slot) is
written beside the script (``SADD``: sending it twice is harmless). Costs are integer
nano-dollars (``HINCRBY``, exact; see ``_usage``).

``usage_rows`` reads a range of days without ``SCAN``: one actor's day hashes directly, or
everyone's through the day indexes, in pipelines.

``take_token`` is one script over the bucket's one key: it refills by ``now`` (never backwards:
a process whose clock is behind refills nothing), takes a token or says how long until one is
there, and gives the bucket a ``PEXPIRE`` of the time until it would be full again, so an idle
bucket vanishes just when forgetting it changes nothing. A take sent again after a lost reply
takes a second token: the limit errs on the strict side, never the lenient one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import uuid
from collections import defaultdict
from typing import Any

from ._records import UsageEntry, UsageRow, UsageTotals
from ._redis_batch import Command
from ._redis_layout import as_text
from ._redis_part import RedisPart
from ._redis_scripts import LuaScript, run_scripts
from ._usage import USAGE_WRITE_DAYS, check_bucket, cost_nanos, day_expiry, month_expiry, usage_cost, usage_days

__all__ = ["TAKE_TOKEN", "USAGE_ADD", "RedisUsage"]

_WRITE_TTL_MS = 120_000
"""How long an ``add_usage`` without a write id remembers it ran (a connection's resend comes
within the call's retries)."""

_KEYED_WRITE_TTL_MS = USAGE_WRITE_DAYS * 86_400_000
"""How long an ``add_usage`` remembers its entry's write id."""

_INDEXED_KEPT = 4096
"""(day, actor) pairs a process remembers having put in the day's index (later steps skip it)."""

_CHUNK = 256
"""Day hashes one pipeline of ``usage_rows`` reads."""

USAGE_ADD = LuaScript(
    "usage_add",
    r"""
-- Add one model step to an actor's ledger line and totals, once per write id.
-- KEYS: 1 the day hash, 2 the month total, 3 the write marker (all under the actor's tag).
-- ARGV: 1 the line (JSON [agent, model]), 2 input tokens, 3 output tokens, 4 their sum,
--       5 the cost in nano-dollars ('' when unpriced), 6 the day's EXPIREAT, 7 the month's,
--       8 the actor key, 9 the marker's TTL (ms).
-- With a 4th key (a thread hash, on one server only: it is in another slot) and ARGV 10 (a
-- batch's write id), the step is added only if that batch was applied ('recent' names it: the
-- thread's APPLY ran just before, in the same pipeline); else nil.
-- Returns {day tokens, month tokens} after the addition (or as they are, for a resent write).
if KEYS[4] and not string.find(redis.call('HGET', KEYS[4], 'recent') or '', ARGV[10] .. ':', 1, true) then
  return false
end
if redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[9]) then
  local line = ARGV[1]
  redis.call('HINCRBY', KEYS[1], 'i|' .. line, ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'o|' .. line, ARGV[3])
  redis.call('HINCRBY', KEYS[1], 's|' .. line, 1)
  if ARGV[5] == '' then
    redis.call('HINCRBY', KEYS[1], 'u|' .. line, 1)
  else
    redis.call('HINCRBY', KEYS[1], 'c|' .. line, ARGV[5])
  end
  redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[4])
  redis.call('HSET', KEYS[1], 'actor', ARGV[8])
  redis.call('INCRBY', KEYS[2], ARGV[4])
  redis.call('EXPIREAT', KEYS[1], ARGV[6])
  redis.call('EXPIREAT', KEYS[2], ARGV[7])
end
return {redis.call('HGET', KEYS[1], 'tokens') or '0', redis.call('GET', KEYS[2]) or '0'}
""",
)

TAKE_TOKEN = LuaScript(
    "take_token",
    r"""
-- Take a token from a bucket of ARGV[2] tokens refilled at ARGV[1] per second, at time ARGV[3].
-- KEYS: 1 the bucket (hash: t tokens, ts last refill). ARGV: 4 the longest TTL (ms).
-- Returns '0' when a token was taken, else the seconds until one is there (as text: Lua
-- numbers come back as integers).
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 't', 'ts')
local tokens, last = burst, now
if state[1] then
  tokens, last = tonumber(state[1]), tonumber(state[2])
end
if now > last then
  tokens = math.min(burst, tokens + (now - last) * rate)
  last = now
end
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
elseif rate > 0 then
  wait = (1 - tokens) / rate
else
  wait = 60
end
local ttl = tonumber(ARGV[4])
if rate > 0 then
  ttl = math.min(ttl, math.floor((burst - tokens) / rate * 1000) + 1)
end
redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens), 'ts', string.format('%.17g', last))
redis.call('PEXPIRE', KEYS[1], math.max(1, ttl))
return string.format('%.17g', wait)
""",
)

_LONGEST_BUCKET_MS = 86_400_000
"""A bucket that never fills (no refill rate) is forgotten after a day."""


@functools.lru_cache(maxsize=1024)
def _line(agent: str, model: str) -> str:
    """A ledger line's name: ``["agent","model"]`` as JSON."""
    return json.dumps([agent, model], separators=(",", ":"))


class RedisUsage(RedisPart):
    """The usage part of ``RedisStore``: the ledger, its totals, and the rate-limit buckets."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._indexed: dict[tuple[str, str], None] = {}
        """(day, actor) pairs this process put in the day's index, oldest first."""

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        """Add one step to its actor's ledger line and totals (one script, once per write id)."""
        first, script = self.add_commands(entry)
        async with self._guard():
            if not first:
                day_tokens, month_tokens = (await run_scripts(self._send, [script], []))[0]
            else:
                # The day's index first (its own slot on a Cluster): a failure after it leaves an
                # actor listed with nothing that day, never a line ``usage_rows`` cannot find.
                done, (totals,) = await self._send_ordered(first, [script])
                for result in (*done, totals):
                    if isinstance(result, Exception):
                        raise result
                day_tokens, month_tokens = totals
                self.indexed(entry)
        return UsageTotals(day_tokens=int(day_tokens), month_tokens=int(month_tokens))

    def add_commands(
        self, entry: UsageEntry, *, applied: tuple[str, str] | None = None
    ) -> tuple[list[Command], Command]:
        """What adds ``entry``: the day index's entries (none once this process wrote them) and the script.

        ``applied``: a thread hash and a batch's write id; the script adds the step only if
        that batch was applied (one server only: the thread's key is in another slot). The
        index entries go before the script (``send_ordered``), and ``indexed`` is told once they
        are written.
        """
        now = time.time()
        actor = entry.actor_key
        if entry.write_id is None:
            marker, ttl = uuid.uuid4().hex, _WRITE_TTL_MS
        else:
            marker, ttl = hashlib.sha256(entry.write_id.encode()).hexdigest(), _KEYED_WRITE_TTL_MS
        keys = [
            self._keys.usage(actor, f"day:{entry.day}"),
            self._keys.usage(actor, f"month:{entry.day[:7]}"),
            self._keys.usage(actor, f"write:{marker}"),
        ]
        cost = "" if entry.cost_usd is None else cost_nanos(entry.cost_usd)
        tokens = entry.input_tokens + entry.output_tokens
        line = _line(entry.agent, entry.model)
        expires = day_expiry(entry.day, now)
        args: list[Any] = [line, entry.input_tokens, entry.output_tokens, tokens, cost, expires]
        args += [month_expiry(entry.day, now), actor, ttl]
        if applied is not None:
            keys.append(applied[0])
            args.append(applied[1])
        script = USAGE_ADD.command(keys, args)
        if (entry.day, actor) in self._indexed:
            return [], script
        index = self._keys.usage_day(entry.day)
        return [("SADD", index, actor), ("EXPIREAT", index, expires)], script

    def indexed(self, entry: UsageEntry) -> None:
        """The day's index lists ``entry``'s actor now: later steps of that day skip it."""
        self._indexed[(entry.day, entry.actor_key)] = None
        while len(self._indexed) > _INDEXED_KEPT:
            self._indexed.pop(next(iter(self._indexed)))

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        """The actor's tokens on ``day`` and in its month (one round trip)."""
        commands = [
            ("HGET", self._keys.usage(actor_key, f"day:{day}"), "tokens"),
            ("GET", self._keys.usage(actor_key, f"month:{day[:7]}")),
        ]
        async with self._guard():
            day_tokens, month_tokens = await run_scripts(self._send, commands, [])
        return UsageTotals(day_tokens=int(day_tokens or 0), month_tokens=int(month_tokens or 0))

    async def usage_rows(
        self, *, start: str, end: str, actor_key: str | None = None, limit: int = 1000
    ) -> list[UsageRow]:
        """Ledger lines within ``start..end``, ordered by day, actor, agent and model.

        Raises:
            ValueError: A bound is no day, or the range spans more than ``MAX_USAGE_DAYS``.
        """
        days = usage_days(start, end)
        if limit <= 0 or not days:
            return []
        rows: list[UsageRow] = []
        async with self._guard():
            if actor_key is not None:
                pairs = [(day, actor_key) for day in days]
            else:
                members = await run_scripts(self._send, [("SMEMBERS", self._keys.usage_day(day)) for day in days], [])
                pairs = [(day, actor) for day, found in zip(days, members, strict=True) for actor in _sorted(found)]
            for first in range(0, len(pairs), _CHUNK):
                chunk = pairs[first : first + _CHUNK]
                commands = [("HGETALL", self._keys.usage(actor, f"day:{day}")) for day, actor in chunk]
                for (day, actor), flat in zip(chunk, await run_scripts(self._send, commands, []), strict=True):
                    rows.extend(_lines(day, actor, flat))
                if len(rows) >= limit:
                    break
        return rows[:limit]

    async def take_token(self, key: str, *, rate: float, burst: float, now: float) -> float:
        """Take a token from ``key``'s bucket (one script, atomic across processes).

        Raises:
            ValueError: ``rate`` or ``burst`` is negative or not finite, or ``now`` is not finite.
        """
        check_bucket(rate, burst, now)
        args = [repr(float(rate)), repr(float(burst)), repr(float(now)), _LONGEST_BUCKET_MS]
        async with self._guard():
            wait = await TAKE_TOKEN(self._send_one, [self._keys.bucket(key)], args)
        return float(wait)


def _sorted(members: Any) -> list[str]:
    # Code point order, as the SQL stores sort (SQLite's BINARY, PostgreSQL's "C" collation).
    return sorted(as_text(member) for member in members)


def _lines(day: str, actor: str, reply: Any) -> list[UsageRow]:
    """The ledger lines of one day hash (``HGETALL``'s reply), ordered by agent and model."""
    # A RESP3 connection answers a map, a RESP2 one a flat list of fields and values.
    pairs = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2], strict=True)
    counters: defaultdict[str, dict[str, int]] = defaultdict(dict)
    for name, value in pairs:
        kind, bar, line = as_text(name).partition("|")
        if bar:
            counters[line][kind] = int(value)
    rows = []
    for line, counts in counters.items():
        agent, model = json.loads(line)
        steps, unpriced = counts.get("s", 0), counts.get("u", 0)
        rows.append(
            UsageRow(
                day=day,
                actor_key=actor,
                agent=agent,
                model=model,
                input_tokens=counts.get("i", 0),
                output_tokens=counts.get("o", 0),
                steps=steps,
                cost_usd=usage_cost(counts.get("c", 0), steps - unpriced),
                unpriced_steps=unpriced,
            )
        )
    return sorted(rows, key=lambda row: (row.agent, row.model))
