"""``CommandBatcher``: the commands callers issue in one event-loop turn go to Redis as one pipeline.

A gateway process drives many runs at once, and each store call is one small command. On a busy
process most of a command's cost is the socket write and the pool checkout, not Redis: sending
the commands that many tasks issue in the same loop turn as one pipeline (no MULTI: each command
is independent, as if sent alone, in the order issued) pays that cost once. A lone command is
sent as it is, so a quiet process sees no difference but one loop turn of delay.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

__all__ = ["CommandBatcher"]

_Pending = tuple[tuple[Any, ...], dict[str, Any], "asyncio.Future[Any]"]


class CommandBatcher:
    """Coalesces concurrent commands into pipelines on one client.

    Each flush is a task the batcher owns; ``aclose`` cancels those in flight (their callers get
    ``CancelledError``) and refuses new commands.
    """

    def __init__(self, client: Redis, *, max_batch: int = 512) -> None:
        """Batch commands for ``client``, at most ``max_batch`` per pipeline."""
        self._client = client
        self._max_batch = max_batch
        self._pending: list[_Pending] = []
        self._scheduled = False
        self._flushes: set[asyncio.Task[None]] = set()
        self._closed = False
        self.pipelines = 0
        """Pipelines sent (lone commands not counted), for tests and metrics."""

    async def call(self, *args: Any, **options: Any) -> Any:
        """Send one command (``args`` as for ``execute_command``) and return its parsed reply."""
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._pending.append((args, options, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending:
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            live = [item for item in batch if not item[2].done()]  # callers may have given up
            if live:
                task = asyncio.get_running_loop().create_task(self._send(live))
                self._flushes.add(task)
                task.add_done_callback(self._flushes.discard)

    async def _send(self, batch: list[_Pending]) -> None:
        try:
            if len(batch) == 1:
                args, options, _ = batch[0]
                results: list[Any] = [await self._client.execute_command(*args, **options)]  # type: ignore[no-untyped-call]
            else:
                self.pipelines += 1
                pipe = self._client.pipeline(transaction=False)
                for args, options, _ in batch:
                    pipe.execute_command(*args, **options)
                results = await pipe.execute(raise_on_error=False)
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def aclose(self) -> None:
        """Refuse new commands and cancel the flushes in flight."""
        self._closed = True
        for _, _, future in self._pending:
            if not future.done():
                future.cancel()
        self._pending = []
        for task in list(self._flushes):
            task.cancel()
        await asyncio.gather(*self._flushes, return_exceptions=True)
