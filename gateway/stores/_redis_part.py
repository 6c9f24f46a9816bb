"""``RedisPart``: what the parts of ``RedisStore`` (threads, queues, usage) share.

The store's client, its batched ``send`` and ``send_ordered``, its key names and guard; and the
reader of the bucketed global indexes, ``_merged``: every bucket is read at once (one round trip
per page; each command names one bucket, so on a Cluster each goes to the node of its slot) and
the rows are merged in index order, so the answer is the one a single sorted set would give.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ._redis_batch import Command
from ._redis_client import AnyRedis, guarded
from ._redis_layout import IndexName, RedisKeys, as_text, score_pairs
from ._redis_scripts import RECONCILE, Send, SendOrdered, run_scripts

__all__ = ["RedisPart", "Row", "Verdict"]


Row = tuple[str, str, float]
"""A row read from a global index's bucket: the bucket's key, the member, its score."""

Verdict = tuple[bool, "tuple[Any, Any] | None"]
"""What a reader made of a row: whether the entry stays in place, and its hit (sort key, item) or ``None``."""


@dataclass(kw_only=True)
class _Cursor:
    """How far a merged read went in one bucket."""

    offset: int = 0
    """Entries passed over that stay in place (the next page starts after them)."""
    full: bool = False
    """The last page read was full: the bucket may hold more."""
    bound: float | None = None
    """The score every entry not judged yet is at or beyond; ``None`` before the first read."""
    last: float | None = None
    """The score of the last row judged in the last round."""
    done: bool = False
    """Every entry of the bucket in range was judged."""

    def settle(self) -> None:
        """After a round: bound what is left, or call the bucket done."""
        if self.bound is None:  # every row read was judged
            self.done = not self.full
            self.bound = self.last
        self.last = None

    def open(self, kth: float | None, descending: bool) -> bool:
        """Whether the bucket may still hold one of the first hits (``kth``: the last one's score so far)."""
        if self.done:
            return False
        if kth is None or self.bound is None:
            return True
        return self.bound >= kth if descending else self.bound <= kth


class RedisPart:
    """A part of ``RedisStore`` it delegates to, over the store's client, batched send, keys and guard.

    Args:
        client: The store's client.
        send: The store's batched send.
        keys: The store's key names.
        guard: Makes a call's ``guarded`` scope (Redis failures as ``StoreUnavailableError``).
    """

    def __init__(
        self,
        client: AnyRedis,
        send: Send,
        keys: RedisKeys,
        guard: Callable[[], guarded],
        send_ordered: SendOrdered | None = None,
    ) -> None:
        self._client = client
        self._send = send
        self._keys = keys
        self._guard = guard
        self._send_ordered: SendOrdered = send_ordered or self._one_then_other

    async def _one_then_other(self, first: Sequence[Command], then: Sequence[Command]) -> tuple[list[Any], list[Any]]:
        """``send_ordered`` over ``send`` alone: ``first``, then ``then`` once ``first`` succeeded."""
        done = await self._send(first)
        failed = next((result for result in done if isinstance(result, Exception)), None)
        if failed is not None:
            return done, [failed] * len(then)
        return done, await self._send(then)

    async def _send_one(self, *command: Any) -> Any:
        (result,) = await self._send([command])
        if isinstance(result, Exception):
            raise result
        return result

    async def _send_all(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands together (one round trip, each on its own slot's node); raise the first error."""
        if not commands:
            return []
        results = await self._send(commands)
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results

    async def _merged(
        self,
        name: IndexName | Sequence[str],
        read: Callable[[str, int, int], Command],
        judge: Callable[[list[Row]], Awaitable[list[Verdict]]],
        *,
        limit: int,
        page: int,
        descending: bool,
        rounds: int,
    ) -> list[Any]:
        """The first ``limit`` hits over every bucket of index ``name``, merged in index order.

        Each round reads a page of every bucket that could still hold one of the first ``limit``
        (all of them in one round trip), merges the rows in order and has ``judge`` check the first
        ``page`` of them against the threads' keys (it corrects the entries that lag). The rest
        are read again next round: a bucket's offset counts only its entries that stay in place.

        Args:
            name: The index, or the keys of the buckets to merge (an owner's list of threads).
            read: The command reading ``(bucket key, offset, count)`` rows ``WITHSCORES``.
            judge: For each row, whether its entry stays in the index (else ``judge`` moved or
                removed it) and its hit (``(sort key, item)``) or ``None``.
            limit: Hits wanted.
            page: Rows read per bucket, and judged, per round.
            descending: Newest (highest score) first.
            rounds: Round trips at most.
        """
        keys = self._keys.indexes(cast(IndexName, name)) if isinstance(name, str) else list(name)
        cursors = {key: _Cursor() for key in keys}
        hits: list[tuple[Any, Any]] = []
        for _ in range(rounds):
            kth = None
            if len(hits) >= limit:
                kth = sorted(key for key, _ in hits)[-limit if descending else limit - 1][0]
            wanted = [key for key, cursor in cursors.items() if cursor.open(kth, descending)]
            if not wanted:
                break
            replies = await self._send_all([read(key, cursors[key].offset, page) for key in wanted])
            rows: list[Row] = []
            for key, reply in zip(wanted, replies, strict=True):
                pairs = score_pairs(reply)
                cursors[key].full = len(pairs) == page
                rows.extend((key, as_text(member), float(score)) for member, score in pairs)
            rows.sort(key=lambda row: (row[2], row[1]), reverse=descending)
            judged, unjudged = rows[:page], rows[page:]
            for key in wanted:
                cursors[key].bound = None
            for key, _, score in reversed(unjudged):  # a bucket's first row left unjudged bounds the rest
                cursors[key].bound = score
            for (key, _, score), (stays, hit) in zip(judged, await judge(judged), strict=True):
                cursors[key].offset += stays
                cursors[key].last = score
                if hit is not None:
                    hits.append(hit)
            for key in wanted:
                cursors[key].settle()
        hits.sort(key=lambda hit: hit[0], reverse=descending)
        return [item for _, item in hits[:limit]]

    async def _reconcile(self, corrections: dict[str, list[Any]]) -> None:
        """``RECONCILE`` each bucket's triplets (one key per script), all in one round trip."""
        if corrections:
            commands = [RECONCILE.command([key], triplets) for key, triplets in corrections.items()]
            await run_scripts(self._send, commands, [RECONCILE])
