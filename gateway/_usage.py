"""``UsageMeter``: prices model steps, charges them to the store's ledger, and holds quotas.

The ledger (``Store.add_usage``) has a line per UTC day, actor, agent and model; every process
sharing the store adds to the same lines, so quotas hold across processes. One clock decides the
day: ``time.time()`` in UTC.

When a step is charged, and why it is charged once:

- A step is charged after the batch that journals it is written (``RunDriver.write``), never
  before: a step the store never took is not charged, and a resumed run replays its journal
  (``_load_journal``) without writing those steps again, so it never charges them twice. A
  store may charge them with the write instead (``Batch.usage``: ``RedisStore`` on one server
  adds each step in the write's round trip, by a script that adds it only if the batch applied);
  then the meter only tells its observers.
- A crash between the journal write and the ledger write leaves that one step uncharged (the
  resume finds it journaled). The ledger errs low by at most a step per crash.
- Each step's entry carries the write id ``<run_id>:<step>`` (``UsageEntry.write_id``), the same
  on every retry and every process: a write that landed but whose reply was lost, retried, adds
  nothing (the store keeps write ids ``USAGE_WRITE_DAYS``). The ledger never counts a step twice.
- A store that is away when the step is charged (or when a quota is checked before a step) is
  retried for the runtime's ``store_retry``, as a journal write is; past that the
  ``StoreUnavailableError`` leaves the run to its lease and a resume (a step charged with the
  run's last batch is logged as uncharged instead: the run's end stands). A quota is never
  skipped: no model step runs without its check having read the totals.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from tools import Actor, UserError

from ._errors import StoreUnavailableError
from ._pricing import ModelPrice, Pricing
from ._quotas import Period, Quota
from .events import Usage
from .stores import MAX_STEP_TOKENS, ModelStepEntry, RunRecord, Store, UsageEntry, UsageRow
from .stores._usage import MAX_STEP_COST as MAX_STEP_COST
from .stores._usage import step_usage, utc_day

if TYPE_CHECKING:
    from ._agents import Agent
    from ._runtime import RuntimeObserver

__all__ = ["UsageMeter", "utc_day"]

logger = logging.getLogger("gateway.usage")

T = TypeVar("T")


class UsageMeter:
    """The runtime's pricing table, default quota and ledger writes.

    Args:
        store: Where the ledger is kept.
        pricing: Prices by ``Model.name`` (none: every step costs ``None``).
        quota: The quota of agents that have none of their own (``None``: no budget).
        retry: Seconds a ledger write or a quota check is retried while the store is away.
        observers: The runtime's observers (told of each charged step and quota crossing).
        closed: Whether the runtime closed (a retry gives up then).

    Raises:
        UserError: A price that is not a ``ModelPrice``, a quota that is not a ``Quota``.
    """

    def __init__(
        self,
        *,
        store: Store,
        pricing: Mapping[str, ModelPrice] | None = None,
        quota: Quota | None = None,
        retry: float = 60.0,
        observers: Sequence[RuntimeObserver] = (),
        closed: Callable[[], bool] = lambda: False,
    ) -> None:
        if quota is not None and not isinstance(quota, Quota):
            raise UserError(f"quota must be a Quota or None, not {quota!r}")
        self.store = store
        self.pricing = Pricing(pricing)
        self.quota = quota
        self.retry = retry
        self._observers = observers
        self._closed = closed

    @staticmethod
    def bounded(usage: Usage) -> Usage:
        """A model step's usage as the gateway counts it: each token count within ``0..MAX_STEP_TOKENS``.

        A provider's count is data: a negative one is no refund (and would fail the ledger's write
        and the Prometheus counters), an absurd one no real step.
        """

        def bound(tokens: int) -> int:
            return min(max(tokens, 0), MAX_STEP_TOKENS)

        if 0 <= usage.input_tokens <= MAX_STEP_TOKENS and 0 <= usage.output_tokens <= MAX_STEP_TOKENS:
            return usage
        return usage.model_copy(
            update={"input_tokens": bound(usage.input_tokens), "output_tokens": bound(usage.output_tokens)}
        )

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """What one step cost (``None``: its model is unpriced)."""
        return self.pricing.cost(model, usage)

    def quota_of(self, agent: Agent) -> Quota | None:
        """The quota that applies to ``agent``'s runs: its own, else the default."""
        return agent.quota if agent.quota is not None else self.quota

    async def admit(self, actor: Actor, agent: Agent) -> None:
        """Refuse a turn at send time when the actor's budget is used up (one read; none without a quota).

        Raises:
            QuotaExceededError: A budget of the agent's quota is used up (429).
            StoreUnavailableError: The totals cannot be read (503: the turn is not queued unmetered).
        """
        quota = self.quota_of(agent)
        if quota is None:
            return
        totals = await self.store.usage_totals(actor.key, utc_day())
        reading = quota.read(totals)
        if reading.exceeded is not None:
            self._crossed(agent.name, reading.exceeded[0], "exceeded")
        reading.raise_if_exceeded()

    async def before_step(self, run: RunRecord, agent: Agent) -> tuple[Period, int, int] | None:
        """Check the quota before a model step: raise when used up, or say to warn (once per run).

        Returns:
            ``(period, used, limit)`` when the run should show a ``quota-warning`` now.

        Raises:
            QuotaExceededError: A budget is used up: the step must not run.
            StoreUnavailableError: The totals could not be read within ``retry``.
        """
        quota = self.quota_of(agent)
        if quota is None:
            return None
        key = run.actor.key
        totals = await self._retrying(lambda: self.store.usage_totals(key, utc_day()), run)
        reading = quota.read(totals)
        if reading.exceeded is not None:
            self._crossed(agent.name, reading.exceeded[0], "exceeded")
            reading.raise_if_exceeded()
        if reading.warning is None or run.quota_warned:
            return None
        self._crossed(agent.name, reading.warning[0], "warning")
        return reading.warning

    @staticmethod
    def entries(run: RunRecord, steps: Iterable[ModelStepEntry]) -> list[UsageEntry]:
        """The ledger entries of ``run``'s model steps (a direct call has none): ``Batch.usage``."""
        return [entry for step in steps if (entry := step_usage(run, step)) is not None]

    async def charge(
        self,
        run: RunRecord,
        steps: Iterable[ModelStepEntry],
        *,
        charged: bool = False,
        entries: Sequence[UsageEntry] | None = None,
    ) -> None:
        """Add each model step (just journaled) to the run's actor's ledger, then tell observers.

        ``charged``: the store charged them with the batch that journaled them (``Batch.charged``);
        the observers are told only. ``entries``: the steps' ledger entries made already
        (``entries``, for ``Batch.usage``): the same entries, not made twice.

        Raises:
            StoreUnavailableError: The ledger could not be written within ``retry``.
        """
        steps = [step for step in steps if step.model is not None]  # a direct call: no model step
        made = entries if entries is not None else [step_usage(run, step) for step in steps]
        for step, entry in zip(steps, made, strict=True):
            if entry is None:
                continue
            if not charged:
                await self._retrying(functools.partial(self.store.add_usage, entry), run)
            for observer in self._observers:
                observer.usage_charged(run, step)

    async def rows(self, *, start: str, end: str, actor_key: str | None, limit: int) -> list[UsageRow]:
        """Ledger lines of ``start..end`` (UTC days), of one actor or everyone's (``None``)."""
        return await self.store.usage_rows(start=start, end=end, actor_key=actor_key, limit=limit)

    def _crossed(self, agent: str, period: Period, outcome: str) -> None:
        for observer in self._observers:
            observer.quota_crossed(agent, period, outcome)

    async def _retrying(self, call: Callable[[], Awaitable[T]], run: RunRecord) -> T:
        """``call()``, tried again while the store is away, for up to ``retry`` seconds."""
        try:
            return await call()
        except StoreUnavailableError:
            if self.retry <= 0:
                raise
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry
        delay = 0.025
        logger.warning("run %s: the store is unavailable; the usage ledger waits until it is back", run.run_id)
        while True:
            await asyncio.sleep(delay)  # backoff between attempts, not synchronisation
            delay = min(delay * 2, 1.0)
            try:
                return await call()
            except StoreUnavailableError:
                if loop.time() >= deadline or self._closed():
                    raise
