"""``AgUiStream``: one SSE answer that follows a thread and speaks AG-UI.

The run never depends on the stream: it runs in the runtime, writes its events to the store and
goes on when the client leaves. The stream is a reader of the thread's log: a task group where
the pump (follow, translate, write) and the keep-alive race, and the first to finish (the pump at
the end of its segment, either one when the client is gone) stops the other.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Coroutine, Sequence
from typing import Any, cast

from ag_ui.core import BaseEvent, CustomEvent
from aiohttp import web

from gateway import ChannelServices, GatewayError, RunNotFoundError, SseStream, sse_frame
from gateway.events import ApprovalSettledEvent, RunEvent, UiEvent
from gateway.stores import QueuedMessage
from tools import Actor, UiCapabilities

from ._input import AG_UI_DEFAULT_CAPABILITIES
from ._resume import InterruptError, ResumePlan
from ._runs import RunIds
from ._translate import CUSTOM_MESSAGE_QUEUED, AgUiTranslator

__all__ = ["KEEPALIVE_SECONDS", "AgUiStream", "encode_frames"]

logger = logging.getLogger("channels.ag_ui")

KEEPALIVE_SECONDS = 15.0
"""Seconds between the keep-alive comments that keep proxies from closing a quiet stream."""


def encode_frames(events: Sequence[BaseEvent], event_id: int) -> str:
    """The SSE frames of ``events``, each with ``id: event_id`` (the thread's position after them).

    A client that reconnects with ``Last-Event-ID`` (or ``?after=``) gets exactly what follows.
    Every frame made from one of our events carries that event's ``seq`` and they go out in one
    write (with the frames of the other events ready at the same time), so a position never
    splits an event.
    """
    return "".join(sse_frame(event.model_dump_json(by_alias=True), id=event_id) for event in events)


class AgUiStream:
    """The SSE answer to one AG-UI request on one thread.

    Args:
        request: The HTTP request being answered.
        services: The gateway's services.
        thread_id: The thread followed.
        capabilities: What the client declared; ``None`` uses what each run's turn declared
            (and ``AG_UI_DEFAULT_CAPABILITIES`` when that is nothing).
        keepalive: Seconds of silence before a keep-alive comment.
    """

    def __init__(
        self,
        request: web.Request,
        services: ChannelServices,
        thread_id: str,
        *,
        capabilities: UiCapabilities | None = None,
        keepalive: float = KEEPALIVE_SECONDS,
    ) -> None:
        self.request = request
        self.services = services
        self.runtime = services.runtime
        self.thread_id = thread_id
        self.sse = SseStream(request, heartbeat=keepalive)
        self.run_ids = RunIds(services.state("ag-ui"))
        self.translator = AgUiTranslator(thread_id, deliver_ui=self._deliver_ui, name_run=self.run_ids.name)
        self.position = 0
        """The ``seq`` of the last frame sent: the ``id:`` of frames that have no event of their own."""
        self._capabilities = capabilities
        self._run_capabilities: dict[str, UiCapabilities] = {}

    # -- the answers ---------------------------------------------------------------------------------

    async def refuse(self, run_id: str, error: GatewayError) -> web.StreamResponse:
        """Answer with ``RUN_STARTED`` then ``RUN_ERROR``: the request did nothing."""
        self.position = await self.runtime.last_seq(self.thread_id)
        await self._open()
        with contextlib.suppress(ConnectionError):
            await self._send([self.translator.start(run_id, None), self.translator.error(error.code, str(error))])
        await self.sse.close()
        return self.sse.response

    async def turn(self, run_id: str, agora_run_id: str, after: int) -> web.StreamResponse:
        """Stream the run a turn just started, from ``RUN_STARTED`` to the end of its first segment."""
        self.position = after
        await self._open()
        return await self._serve(
            self._pump_run(agora_run_id, after, first=[self.translator.start(run_id, agora_run_id)])
        )

    async def queued(self, run_id: str, queued: QueuedMessage, position: int, after: int) -> web.StreamResponse:
        """Stream a turn that waits in the thread's queue: ``RUN_STARTED`` now, its run once it begins.

        The segment opens at once with a ``CUSTOM`` ``agora.message-queued`` (its place in the
        queue); the events of the run ahead are not this request's and are skipped. When the
        message begins, its run streams as ``turn`` streams one; when it is removed from the
        queue instead, the segment ends with ``RUN_ERROR`` ``message_removed``.
        """
        self.position = after
        await self._open()
        return await self._serve(self._wait_then_pump(run_id, queued, position, after))

    async def _wait_then_pump(self, run_id: str, queued: QueuedMessage, position: int, after: int) -> None:
        note = CustomEvent(
            name=CUSTOM_MESSAGE_QUEUED,
            value={"messageId": queued.message_id, "text": queued.turn.text, "position": position, "edited": False},
        )
        await self._send([self.translator.start(run_id, None), note])
        agora_run_id = await self.runtime.queue.started(self.thread_id, queued.message_id, after)
        if agora_run_id is None:
            await self._send([self.translator.error("message_removed", "The queued message was removed")])
            return
        self.translator.agora_run_id = agora_run_id
        await self.run_ids.remember_turn(self.thread_id, agora_run_id, run_id)
        first_seq = (await self.runtime.get_run(agora_run_id)).first_seq
        await self._pump_run(agora_run_id, first_seq - 1)

    async def resume(self, run_id: str, actor: Actor, plan: ResumePlan) -> web.StreamResponse:
        """Decide what ``plan`` says (as ``actor``, via ``ag-ui``) and stream what follows.

        A replayed resume decides nothing: it streams again what followed the first one.
        """
        agora = await self.runtime.get_run(plan.run_id)
        if plan.decisions:
            after = await self.runtime.last_seq(self.thread_id)
        else:
            after = await self._settled_at(agora.first_seq, plan.replayed[0]) - 1
        events = await self.runtime.read_events(
            self.thread_id, agora.first_seq - 1, limit=max(0, after - agora.first_seq + 1)
        )
        await self.translator.prime(events)
        self.position = after
        await self._open()
        return await self._serve(self._decide_then_pump(run_id, actor, plan, after))

    async def reattach(self, after: int) -> web.StreamResponse:
        """Stream the thread from ``after``: the rest of a running run, or a finished one again."""
        await self._prime_thread(after)
        self.position = after
        first: list[BaseEvent] = []
        if self.translator.open:
            opened_by = self.translator.opened_by
            name = await self.run_ids.name(opened_by) if opened_by else self.translator.agora_run_id
            first = self.translator.reopen(name or self.thread_id)
        await self._open()
        return await self._serve(self._pump_thread(after, first=first))

    # -- pumps ---------------------------------------------------------------------------------------

    async def _pump_run(self, agora_run_id: str, after: int, *, first: Sequence[BaseEvent] = ()) -> None:
        """Follow one run of ours from ``after`` until its segment closes."""
        await self._send(first)
        async with contextlib.aclosing(self._events(after)) as events:
            async for event in events:
                if event.run_id != agora_run_id:
                    continue
                await self._send(await self.translator.translate(event), event.seq)
                if not self.translator.open:
                    return

    async def _decide_then_pump(self, run_id: str, actor: Actor, plan: ResumePlan, after: int) -> None:
        await self._send([self.translator.start(run_id, plan.run_id)])
        for decision in plan.decisions:
            await self.run_ids.remember_resume(self.thread_id, decision.tool_call_id, run_id)
            await self.runtime.decide(
                decision.tool_call_id,
                actor,
                approve=decision.approve,
                reason=decision.reason,
                via="ag-ui",
                remember=decision.remember,
            )
        await self._pump_run(plan.run_id, after)

    async def _pump_thread(self, after: int, *, first: Sequence[BaseEvent] = ()) -> None:
        """Follow every run of the thread from ``after`` until caught up between segments."""
        await self._send(first)
        if not self.translator.open and after >= await self.runtime.last_seq(self.thread_id):
            return
        async with contextlib.aclosing(self._events(after)) as events:
            async for event in events:
                await self._send(await self.translator.translate(event), event.seq)
                if not self.translator.open and event.seq >= await self.runtime.last_seq(self.thread_id):
                    return

    # -- plumbing ------------------------------------------------------------------------------------

    def _events(self, after: int, *, follow: bool = True) -> AsyncGenerator[RunEvent, None]:
        # Runtime.events is an async generator: closed at once when a reader stops, so the
        # store's subscription ends with the stream rather than when it is collected.
        return cast(AsyncGenerator[RunEvent, None], self.runtime.events(self.thread_id, after, follow=follow))

    async def _open(self) -> None:
        self.services.attach_identity(self.request, self.sse.response)
        await self.sse.prepare()

    async def _send(self, events: Sequence[BaseEvent], seq: int | None = None) -> None:
        if seq is not None:
            self.position = seq
        await self.sse.queue(encode_frames(events, self.position))

    async def _serve(self, pump: Coroutine[Any, Any, None]) -> web.StreamResponse:
        if not await self.sse.serve(self._guarded(pump)):
            logger.debug("an AG-UI client left thread %s; its run goes on", self.thread_id)
        return self.sse.response

    async def _guarded(self, pump: Coroutine[Any, Any, None]) -> None:
        """Run ``pump``; a failure after the stream started ends it with ``RUN_ERROR``."""
        try:
            await pump
        except ConnectionError:
            raise
        except GatewayError as exc:
            await self._fail(exc.code, str(exc))
        except Exception:
            logger.exception("the AG-UI stream of thread %s failed", self.thread_id)
            await self._fail("internal_error", "The stream failed.")

    async def _fail(self, code: str, message: str) -> None:
        frames: list[BaseEvent] = []
        if not self.translator.open:
            frames.append(self.translator.start(self.translator.last_run_id or self.thread_id, None))
        frames.append(self.translator.error(code, message))
        await self._send(frames)

    async def _deliver_ui(self, event: UiEvent) -> dict[str, Any]:
        capabilities = self._capabilities or await self._capabilities_of(event.run_id)
        delivery = (await self.services.deliver_ui(event, capabilities)).wire()
        text = delivery.pop("text", None)
        delivery["fallbackText"] = text if text is not None else await self.services.ui_text(event)
        return delivery

    async def _capabilities_of(self, run_id: str) -> UiCapabilities:
        if run_id not in self._run_capabilities:
            try:
                declared = (await self.runtime.get_run(run_id)).turn.ui_capabilities
            except RunNotFoundError:
                declared = None
            self._run_capabilities[run_id] = declared or AG_UI_DEFAULT_CAPABILITIES
        return self._run_capabilities[run_id]

    async def _settled_at(self, first_seq: int, tool_call_id: str) -> int:
        """The ``seq`` of the decision of ``tool_call_id`` (the start of what a resume replays)."""
        async with contextlib.aclosing(self._events(first_seq - 1, follow=False)) as events:
            async for event in events:
                if isinstance(event, ApprovalSettledEvent) and event.tool_call_id == tool_call_id:
                    return event.seq
        raise InterruptError("interrupt_settled", f"Interrupt {tool_call_id!r} was already decided")

    async def _prime_thread(self, after: int) -> None:
        """Put the translator where a client that saw everything up to ``after`` is."""
        if after <= 0:
            return
        at: list[RunEvent] = await self.runtime.read_events(self.thread_id, after - 1, limit=1)
        if not at:
            return
        try:
            first_seq = (await self.runtime.get_run(at[0].run_id)).first_seq
        except RunNotFoundError:
            return
        start = min(first_seq, at[0].seq) - 1
        await self.translator.prime(await self.runtime.read_events(self.thread_id, start, limit=after - start))
