"""``Leases``: who drives a running run, and the rules for holding and taking it over.

A running run is driven by exactly one process: the one whose lease (``Store.claim_run``,
``Store.renew_lease``) is live. The rules, all here:

- **Renew.** The driving process renews every lease it holds on each maintenance pass
  (``maintenance_interval``, a third of ``lease_ttl`` by default).
- **Hold.** A step that could not be written because the store was away is held by its driver and
  written once the store is back (``store_retry`` seconds at most). Before writing, the driver
  takes its lease back (:meth:`Leases.reclaim`): renewed if still its own, claimed again if it
  lapsed and nobody took the run meanwhile; if somebody did, the driver stops and drops the step.
- **Take over.** A lease that lapsed means its process died, or that the store was away for
  longer than the lease. In the second case the holder is alive and may hold a finished tool's
  result: taking the run then would run that tool again. So a process takes over a run only after
  its sweeps have seen the lease lapsed for ``takeover_grace`` seconds (:meth:`Leases.due`);
  the holder's first attempt after the store is back comes well within that grace
  (:meth:`Leases.retry_delay`), so it renews first and wins.
- **Resume.** A run taken over resumes from its journal: settled calls never run again; a call
  that started and never settled runs again with the same idempotency key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tools import UserError

from .stores import RunRecord, Store

__all__ = ["Leases"]

_RUNNING = frozenset({"running"})


@dataclass(kw_only=True)
class Leases:
    """The lease rules of one process (see the module docstring)."""

    store: Store
    owner: str
    """This process's name in leases."""
    ttl: float
    """Seconds a lease lasts without renewal."""
    grace: float
    """Seconds a lease must stay lapsed, as this process sees it, before the run is taken over."""
    _lapsed: dict[str, float] = field(default_factory=dict)
    """Runs whose lapsed lease a pass saw, and when first (monotonic)."""

    def __post_init__(self) -> None:
        if self.ttl <= 0:
            raise UserError("lease_ttl must be positive")
        if self.grace < 0:
            raise UserError("takeover_grace must not be negative")

    def retry_delay(self, previous: float) -> float:
        """The next pause of a holder waiting for the store: doubling, well inside the grace."""
        return min(previous * 2, 2.0, self.grace / 4 or 0.25)

    async def claim(self, run_id: str, *, expect: frozenset[str]) -> RunRecord | None:
        """Take a run whose status is in ``expect`` and that no live lease holds."""
        return await self.store.claim_run(run_id, owner=self.owner, ttl=self.ttl, expect=expect)

    async def renew(self, run: RunRecord) -> bool:
        """Extend this process's lease; ``False`` when it lapsed or is another's."""
        return await self.store.renew_lease(run.thread_id, run.run_id, owner=self.owner, ttl=self.ttl)

    async def reclaim(self, run: RunRecord) -> bool:
        """Hold the lease of a run this process drives.

        Renews it, or takes it back if it lapsed (a store outage outlasted it) and nobody else
        took the run. ``False`` when someone did, or the run is no longer running.
        """
        if await self.renew(run):
            return True
        return await self.claim(run.run_id, expect=_RUNNING) is not None

    async def due(self, driving: set[str]) -> list[str]:
        """Runs to take over now: lapsed for ``grace`` and not driven here.

        Each call is one sweep's look: a lapse first seen now is remembered and is due on a
        later call, once the grace has passed; a run whose lease came back is forgotten.
        """
        now = time.monotonic()
        seen: dict[str, float] = {}
        due: list[str] = []
        try:
            expired = await self.store.expired_leases()
        except BaseException:
            self.forget()
            raise
        for _thread_id, run_id in expired:
            if run_id in driving:
                continue
            first = seen[run_id] = self._lapsed.get(run_id, now)
            if now - first >= self.grace:
                due.append(run_id)
                del seen[run_id]
        self._lapsed = seen
        return due

    def forget(self) -> None:
        """Forget every lapse seen so far: after a pass that failed (the store away, say).

        A lapse first seen before an outage must not count toward the grace after it: the
        holder could not renew meanwhile, and must get the whole grace once the store is back.
        """
        self._lapsed = {}
