"""The per-thread message queue: what a message sent to a busy thread does, and its management.

A message that arrives while its thread has an active run (running, or parked for an approval)
waits in the thread's queue in the store (``Store.enqueue_message``), FIFO, and becomes the
thread's next turn when the thread is free: every process that ends or parks a run, or enqueues
a message, *drains* the queue by beginning its first message's run with
``Store.begin_run(..., dequeue=message_id)``. Two processes draining at once is fine: the store
lets one begin, the other loses with ``ThreadBusyError`` or ``QueuedMessageNotFoundError``. A
process killed between a run's end and the drain leaves a queue behind an idle thread; the
maintenance sweep drains those (``Store.queued_threads``).

The queue belongs to the thread's owner: listing, editing, removing, clearing and moving a
message first ("interrupt with") check the caller owns the thread. Each change is written to
the thread's log (``message-queued`` with ``edited``, ``message-dequeued`` with ``removed`` or
``cleared``), so every channel that follows the thread shows it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from tools import Actor

from ._errors import QueuedMessageNotFoundError, ThreadForbiddenError, ThreadNotFoundError
from .events import MessageDequeuedEvent, MessageQueuedEvent, RunEvent, Turn, new_id
from .stores import Batch, QueuedMessage, Store, ThreadRecord

__all__ = ["Accepted", "ThreadQueue", "queued_event"]

logger = logging.getLogger("gateway.queue")

_ACTIVE = frozenset({"running", "awaiting-approval"})


@dataclass(frozen=True, kw_only=True)
class Accepted:
    """What ``Runtime.send`` did with a message.

    Attributes:
        run_id: The run it began now (``None`` when it waits in the queue).
        queued: The queued message (``None`` when it began at once).
        position: Its 1-based place in the queue when queued.
        interrupting: The active run was asked to stop so that this message runs next.
    """

    run_id: str | None = None
    queued: QueuedMessage | None = None
    position: int | None = None
    interrupting: bool = False


def queued_event(item: QueuedMessage, *, run_id: str, position: int, edited: bool = False) -> MessageQueuedEvent:
    """The ``message-queued`` event of ``item`` (``run_id``: the thread's active run, or ``""``)."""
    return MessageQueuedEvent(
        thread_id=item.thread_id,
        run_id=run_id,
        message_id=item.message_id,
        text=item.turn.text,
        position=position,
        attachments=list(item.turn.attachments),
        edited=edited,
    )


@dataclass(kw_only=True)
class ThreadQueue:
    """A thread's queue as its owner manages it, and the runtime's side of queueing."""

    store: Store
    write: Callable[[str, Batch], Awaitable[list[RunEvent]]]
    """Writes a batch to a thread (and tells the runtime's observers)."""
    drain: Callable[[str], Awaitable[str | None]]
    """Begins the thread's first queued message when the thread is free (its run id, or ``None``)."""
    stop: Callable[[str], Awaitable[bool]]
    """Stops the thread's active run at its next safe point (``False`` when it has none)."""

    async def active_run(self, thread_id: str) -> str:
        """The id of the thread's running or parked run (``""`` when none)."""
        for run in reversed(await self.store.thread_runs(thread_id)):
            if run.status in _ACTIVE:
                return run.run_id
        return ""

    async def put(self, turn: Turn, *, limit: int, first: bool) -> tuple[QueuedMessage, int]:
        """Queue ``turn`` behind the active run (``first``: ahead of the others) and say so.

        Raises:
            QueueFullError: The queue holds ``limit`` messages already (nothing was written).
            ThreadNotFoundError: The thread was erased meanwhile.
        """
        item = QueuedMessage(message_id=new_id("qm"), thread_id=turn.thread_id, turn=turn)
        position = await self.store.enqueue_message(item, limit=limit, first=first)
        run_id = await self.active_run(turn.thread_id)
        await self.write(turn.thread_id, Batch(events=[queued_event(item, run_id=run_id, position=position)]))
        logger.info("message %s queued at %d behind run %s", item.message_id, position, run_id or "-")
        return item, position

    async def started(self, thread_id: str, message_id: str, after_seq: int) -> str | None:
        """Wait until a queued message leaves the queue; the id of the run it began as.

        ``None`` when it was removed or cleared instead. Follows the thread's events after
        ``after_seq`` (read before the message was queued), so it cannot miss the moment; a
        caller bounds the wait with its own timeout.
        """
        # Stores' subscriptions are async generators: closed at once when we stop reading.
        subscription = cast(AsyncGenerator[RunEvent, None], self.store.subscribe(thread_id, after_seq))
        async with contextlib.aclosing(subscription) as events:
            async for event in events:
                if isinstance(event, MessageDequeuedEvent) and event.message_id == message_id:
                    return event.run_id if event.reason == "started" else None
        return None  # pragma: no cover - a subscription never ends by itself

    async def _owned(self, thread_id: str, actor: Actor) -> ThreadRecord:
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise ThreadNotFoundError(f"No thread {thread_id!r}")
        if not thread.owned_by(actor):
            raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")
        return thread

    async def _owned_item(self, message_id: str, actor: Actor) -> QueuedMessage:
        item = await self.store.get_queued(message_id)
        if item is None:
            raise QueuedMessageNotFoundError(f"No queued message {message_id!r}")
        thread = await self.store.get_thread(item.thread_id)
        if thread is None or not thread.owned_by(actor):
            raise ThreadForbiddenError("That message belongs to another actor")
        return item

    async def messages(self, thread_id: str, actor: Actor) -> list[QueuedMessage]:
        """The thread's queue, first first.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        await self._owned(thread_id, actor)
        return await self.store.queued_messages(thread_id)

    async def clear(self, thread_id: str, actor: Actor) -> list[QueuedMessage]:
        """Empty the thread's queue; answer what it held.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        await self._owned(thread_id, actor)
        held = await self.store.clear_queue(thread_id)
        if held:
            run_id = await self.active_run(thread_id)
            events: list[RunEvent] = [
                MessageDequeuedEvent(thread_id=thread_id, run_id=run_id, message_id=i.message_id, reason="cleared")
                for i in held
            ]
            await self.write(thread_id, Batch(events=events))
        return held

    async def edit(self, message_id: str, actor: Actor, text: str) -> QueuedMessage:
        """Replace a queued message's text (its channel, attachments and the rest stay).

        Raises:
            QueuedMessageNotFoundError: It ran already or was removed (404).
            ThreadForbiddenError: Another actor's message (403; nothing changed).
        """
        item = await self._owned_item(message_id, actor)
        turn = Turn.model_validate({**item.turn.model_dump(), "text": text})  # validated as a sent text is
        updated = await self.store.update_queued(message_id, turn=turn)
        if updated is None:
            raise QueuedMessageNotFoundError(f"No queued message {message_id!r}")
        await self._announce(updated, edited=True)
        return updated

    async def remove(self, message_id: str, actor: Actor) -> QueuedMessage:
        """Take a queued message out of its queue.

        Raises:
            QueuedMessageNotFoundError: It ran already or was removed (404).
            ThreadForbiddenError: Another actor's message (403; nothing changed).
        """
        await self._owned_item(message_id, actor)
        removed = await self.store.remove_queued(message_id)
        if removed is None:
            raise QueuedMessageNotFoundError(f"No queued message {message_id!r}")
        run_id = await self.active_run(removed.thread_id)
        event = MessageDequeuedEvent(
            thread_id=removed.thread_id, run_id=run_id, message_id=message_id, reason="removed"
        )
        await self.write(removed.thread_id, Batch(events=[event]))
        return removed

    async def interrupt_with(self, message_id: str, actor: Actor) -> QueuedMessage:
        """Move a queued message first and stop the active run, so that it runs next.

        Raises:
            QueuedMessageNotFoundError: It ran already or was removed (404).
            ThreadForbiddenError: Another actor's message (403; nothing changed).
        """
        await self._owned_item(message_id, actor)
        moved = await self.store.update_queued(message_id, first=True)
        if moved is None:
            raise QueuedMessageNotFoundError(f"No queued message {message_id!r}")
        await self._announce(moved, edited=True)
        if not await self.stop(moved.thread_id):
            await self.drain(moved.thread_id)
        return moved

    async def _announce(self, item: QueuedMessage, *, edited: bool) -> None:
        queue = await self.store.queued_messages(item.thread_id)
        position = next((n for n, q in enumerate(queue, 1) if q.message_id == item.message_id), 1)
        run_id = await self.active_run(item.thread_id)
        event = queued_event(item, run_id=run_id, position=position, edited=edited)
        await self.write(item.thread_id, Batch(events=[event]))
