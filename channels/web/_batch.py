"""``FrameOutbox``: a batch client's run events, several to a ``batch`` text frame.

A client whose ``hello`` says ``batch: true`` gets ``{"type": "batch", "events": [...]}`` frames:
every event ready at one flush, in ``seq`` order. When to flush:

- one event-loop turn after the first event is queued (the flusher is a task, which starts on the
  loop's next turn): events the store hands over in one turn travel together, and the first one
  waits for nothing else;
- a text delta of the message whose delta the last flush carried waits until ``window`` seconds
  after that flush, so a fast stream goes out at most once a window; any other event ends the
  wait (the deltas go with it, in order);
- at once, in the producer's task, once ``limit`` bytes are queued: a replay or a client that reads
  slowly holds back its producer instead of growing the queue (replay goes out in pages).

The outbox owns its flusher: ``aclose`` (or leaving ``async with``) cancels it and drops what was
not sent (a client that comes back replays it by ``seq``). A failed send (the client left) is
raised to the producer at its next ``put`` or ``flush``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType

__all__ = ["FLUSH_BYTES", "FrameOutbox"]

FLUSH_BYTES = 32 * 1024
"""Queued characters past which the outbox flushes at once, in the producer's task."""

_HEAD = '{"type":"batch","events":['
_TAIL = "]}"


class FrameOutbox:
    """The events of one socket waiting for their ``batch`` frame.

    Args:
        send_text: Sends one text frame (the session's send: its lock, its timeout).
        window: Seconds a further text delta of the message just flushed may wait for company.
        limit: Queued characters past which ``put`` flushes at once.
    """

    __slots__ = (
        "_due",
        "_failure",
        "_hold_message",
        "_hold_until",
        "_lock",
        "_loop",
        "_pending",
        "_pending_delta",
        "_send",
        "_size",
        "_task",
        "_wake",
        "limit",
        "window",
    )

    def __init__(self, send_text: Callable[[str], Awaitable[None]], *, window: float, limit: int = FLUSH_BYTES) -> None:
        self._send = send_text
        self.window = window
        self.limit = limit
        self._loop = asyncio.get_running_loop()
        self._pending: list[str] = []
        self._size = 0
        self._pending_delta: str | None = None
        """The message of the last text delta queued (what the next flush holds back)."""
        self._hold_message: str | None = None
        self._hold_until = 0.0
        """Loop time until which a further delta of ``_hold_message`` waits."""
        self._due: float | None = None
        """Loop time at which the queued events go (``None``: nothing queued)."""
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        self._lock = asyncio.Lock()  # one flush at a time, each taking what was queued before it

    async def __aenter__(self) -> FrameOutbox:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def put(self, text: str, *, delta_of: str | None = None) -> None:
        """Queue one event's JSON; ``delta_of`` is the message id when it is a text delta.

        Raises:
            Exception: What a send of this outbox failed with (the client is gone).
        """
        self._raise_failure()
        self._pending.append(text)
        self._size += len(text)
        if self._size >= self.limit:
            await self.flush()
            return
        due = 0.0
        if delta_of is not None:
            if delta_of == self._hold_message and self._loop.time() < self._hold_until:
                due = self._hold_until
            self._pending_delta = delta_of
        self._arm(due)

    async def flush(self) -> None:
        """Send what is queued now, in one frame (after any flush under way).

        Raises:
            Exception: What this or an earlier send of this outbox failed with.
        """
        self._raise_failure()
        async with self._lock:
            if not self._pending:
                return
            events, self._pending, self._size, self._due = self._pending, [], 0, None
            if self._pending_delta is not None:
                self._hold_message, self._pending_delta = self._pending_delta, None
                self._hold_until = self._loop.time() + self.window
            await self._send(_HEAD + ",".join(events) + _TAIL)

    async def aclose(self) -> None:
        """Stop the flusher and drop what was not sent."""
        task, self._task = self._task, None
        self._pending, self._size, self._due = [], 0, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _arm(self, due: float) -> None:
        """Make the queued events go at ``due`` (loop time; 0: the next turn) or earlier."""
        if self._due is not None and self._due <= due:
            return
        self._due = due
        if self._task is None:
            self._task = self._loop.create_task(self._flusher(), name="agora-ws-outbox")
        elif self._wake is not None and not self._wake.done():
            self._wake.set_result(None)  # it waits for a later time: it looks again on the next turn

    async def _flusher(self) -> None:
        try:
            while self._due is not None:
                delay = self._due - self._loop.time()
                if delay > 0:
                    wake = self._wake = self._loop.create_future()
                    timer = self._loop.call_later(delay, _resolve, wake)
                    try:
                        await wake
                    finally:
                        timer.cancel()
                        self._wake = None
                    continue
                await self.flush()
        except Exception as exc:  # the producer raises it at its next put
            self._failure = exc
        finally:
            if self._task is asyncio.current_task():
                self._task = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
