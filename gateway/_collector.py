"""Components a tool pushes while it runs, turned into ``ui`` events and written live."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tools import UiComponent

from .events import RunEvent, UiEvent
from .stores import Batch

__all__ = ["UI_FLUSH_SECONDS", "UiCollector"]

UI_FLUSH_SECONDS = 0.05
"""Components a tool pushes are written live after this delay, or with the call's outcome if the
tool finishes first (one write instead of two)."""


@dataclass(kw_only=True)
class UiCollector:
    """Turns a tool's ``emit_ui`` pushes into ``ui`` events, written live while the tool runs."""

    make_event: Callable[[UiComponent, str | None], UiEvent]
    """Builds the run's ``ui`` event for a component."""
    write: Callable[[Batch], Awaitable[list[RunEvent]]]
    """Writes a batch of the run."""
    call_id: str
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    thread: int = field(default_factory=threading.get_ident)
    pending: list[UiEvent] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    flusher: asyncio.Task[None] | None = None

    def push(self, item: UiComponent) -> None:
        if threading.get_ident() != self.thread:
            # A sync tool runs in a worker thread: hand the push to the event loop's thread.
            self.loop.call_soon_threadsafe(self._push, item)
        else:
            self._push(item)

    def _push(self, item: UiComponent) -> None:
        self.pending.append(self.make_event(item, self.call_id))
        if self.timer is None and (self.flusher is None or self.flusher.done()):
            self.timer = self.loop.call_later(UI_FLUSH_SECONDS, self._start_flush)

    def _start_flush(self) -> None:
        self.timer = None
        self.flusher = self.loop.create_task(self._flush())  # owned: drain() awaits it

    async def _flush(self) -> None:
        events, self.pending = self.pending, []
        if events:
            await self.write(Batch(events=list[RunEvent](events)))
        if self.pending and self.timer is None:  # pushed while this flush was writing
            self.timer = self.loop.call_later(UI_FLUSH_SECONDS, self._start_flush)

    async def drain(self) -> list[UiEvent]:
        """Stop live flushing; return what is still unwritten (for the call's last write)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.flusher is not None:
            await self.flusher
        events, self.pending = self.pending, []
        return events
