"""``CommandBatcher``: commands that pile up while others are in flight go to Redis as one pipeline.

A gateway process drives many runs at once, and each store call is one small command. On a busy
process most of a command's cost is the socket write and the pool checkout, not Redis. When no
command is in flight, a call is sent at once from the caller's task (a quiet process pays
nothing); while some are, new calls wait for the end of the loop turn and go out together as one
pipeline (no MULTI: each command runs as if sent alone, in the order issued).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

__all__ = ["CommandBatcher"]

Command = tuple[Any, ...]
"""``execute_command`` arguments: the command's name, then its arguments."""

_Pending = tuple[Command, "asyncio.Future[Any]"]


class CommandBatcher:
    """Coalesces concurrent commands into pipelines on one client.

    Each flush is a task the batcher owns; ``aclose`` cancels those in flight (their callers get
    ``CancelledError``) and refuses new commands.
    """

    def __init__(self, client: Redis, *, max_in_flight: int = 48, max_batch: int = 512) -> None:
        """Batch commands for ``client``.

        Args:
            client: The client whose pool the sends use.
            max_in_flight: Sends (so connections) in flight at most; more commands wait their turn.
            max_batch: Commands per pipeline at most.
        """
        self._client = client
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._pending: list[_Pending] = []
        self._scheduled = False
        self._busy = 0
        """Sends in flight (direct or flushes): while any is, new commands queue."""
        self._flushes: set[asyncio.Task[None]] = set()
        self._closed = False
        self.pipelines = 0
        """Pipelines sent, for tests and metrics."""

    async def call(self, *command: Any) -> Any:
        """Send one command and return its parsed reply (or raise its error)."""
        (result,) = await self.send([command])
        if isinstance(result, Exception):
            raise result
        return result

    async def send(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands together, in order; each reply or error (as a value) in order."""
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        if not self._pending and not self._busy:
            self._busy += 1
            try:
                return await self._execute(commands)
            finally:
                self._busy -= 1
                self._kick()
        loop = asyncio.get_running_loop()
        futures = []
        for command in commands:
            future: asyncio.Future[Any] = loop.create_future()
            self._pending.append((command, future))
            futures.append(future)
        self._kick()
        return list(await asyncio.gather(*futures, return_exceptions=True))

    def _kick(self) -> None:
        """Flush at the end of this loop turn if commands wait and a send may start."""
        if self._pending and not self._scheduled and not self._closed and self._busy < self._max_in_flight:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def _execute(self, commands: Sequence[Command]) -> list[Any]:
        try:
            if len(commands) == 1:
                return [await self._client.execute_command(*commands[0])]  # type: ignore[no-untyped-call]
            self.pipelines += 1
            pipe = self._client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            results: list[Any] = await pipe.execute(raise_on_error=False)
            return results
        except Exception as exc:  # the connection failed: every command shares the failure
            return [exc] * len(commands)

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending and self._busy < self._max_in_flight:
            batch, self._pending = self._pending[: self._max_batch], self._pending[self._max_batch :]
            live = [item for item in batch if not item[1].done()]  # callers may have given up
            if live:
                self._busy += 1
                task = asyncio.get_running_loop().create_task(self._deliver(live))
                self._flushes.add(task)
                task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._busy -= 1
        self._flushes.discard(task)
        self._kick()

    async def _deliver(self, batch: list[_Pending]) -> None:
        try:
            results = await self._execute([command for command, _ in batch])
        except BaseException:
            for _, future in batch:
                future.cancel()
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def aclose(self) -> None:
        """Refuse new commands and cancel the flushes in flight."""
        self._closed = True
        for _, future in self._pending:
            future.cancel()
        self._pending = []
        for task in list(self._flushes):
            task.cancel()
        await asyncio.gather(*self._flushes, return_exceptions=True)
