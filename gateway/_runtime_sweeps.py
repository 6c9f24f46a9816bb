"""``Sweeps``: a runtime's background passes: leases, remote Stops, takeovers, expiries, retention.

A part of ``Runtime`` (``gateway._runtime``), kept apart as its own concept: the methods are the
runtime's own and read its state.
"""

from __future__ import annotations

import asyncio
import logging

from ._errors import StoreUnavailableError
from ._runtime_parts import _CANCEL_KEY, RuntimeParts

__all__ = ["Sweeps"]

logger = logging.getLogger("gateway.runtime")


class Sweeps:
    """The background work of ``Runtime``."""

    async def _maintain(self: RuntimeParts) -> None:
        delay = self.maintenance_interval
        while True:
            await asyncio.sleep(delay)
            delay = self.maintenance_interval
            try:
                await self.sweep()
            except StoreUnavailableError:
                # Soon again: once the store is back, the leases held here must be renewed
                # before another process's takeover grace runs out.
                delay = min(self.maintenance_interval, self.leases.retry_delay(1.0))
                logger.warning("store unavailable; maintenance retries in %.2f s", delay)
            except Exception:
                logger.exception("maintenance pass failed")

    async def sweep(self: RuntimeParts) -> None:
        """Run one background pass.

        It renews leases, honours remote Stops, resumes runs whose process died, expires
        lapsed approvals, begins queued messages left behind an idle thread and, with
        ``retention_days``, erases idle threads (at most once a minute). Runs every
        ``maintenance_interval``; tests may call it directly.
        """
        try:
            await self._sweep()
        except BaseException:
            self.leases.forget()  # a lapse seen before a failure gets the whole grace again
            raise

    async def _sweep(self: RuntimeParts) -> None:
        drivers = list(self._drivers.items())
        # One round trip for all: the store batches concurrent calls (a lease renewed late is a
        # run another process may take over).
        held = await asyncio.gather(*(self.leases.renew(driver.run) for _, driver in drivers))
        flags = await asyncio.gather(
            *(self.store.channel_get(_CANCEL_KEY.format(run_id=run_id)) for run_id, _ in drivers)
        )
        for (run_id, driver), still_held, cancel_flag in zip(drivers, held, flags, strict=True):
            task = self._tasks.get(run_id)
            if not still_held and task is not None and driver.run.status == "running":
                if await self.leases.reclaim(driver.run):
                    logger.info("took back the lease of run %s, which lapsed while the store was away", run_id)
                else:
                    logger.warning("lost the lease of run %s; stopping here", run_id)
                    task.cancel()
                    continue
            if cancel_flag and not driver.cancel_requested:
                driver.request_cancel()
        for run_id in await self.leases.due(set(self._tasks)):
            run = await self.leases.claim(run_id, expect=frozenset({"running"}))
            if run is not None:
                self._resume_claimed(run)
                logger.info("resumed run %s whose process stopped", run_id)
        await self.approvals.expire_lapsed()
        await self.handoffs.sweep()  # parents whose child ended, answers not delivered, left by a stopped process
        # A process stopped between a run's end and its drain leaves a queue behind an idle thread.
        for thread_id in await self.store.queued_threads():
            await self.drain(thread_id)
        await self.threads.sweep()
