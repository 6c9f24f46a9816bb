"""The AG-UI routes: ``POST /agent/ag-ui`` and ``GET /agent/ag-ui/threads/{thread_id}/events``.

Everything that can be refused without a side effect is refused before the stream starts, as an
HTTP error ``{code, message}``: identity (401), the body (400, 413, 415), the thread (403), a
turn the runtime will not take (404 unknown agent, 409 busy thread for an agent that rejects,
429 rate limit or a full queue). A turn sent to a thread with a running run waits in the
thread's queue: its request streams ``RUN_STARTED`` at once, then that turn's run when it
begins (``AgUiStream.queued``). A thread whose run waits for an interrupt (an approval) still
wants ``resume[]`` first: AG-UI's own protocol for it. What the
protocol reports in-band (a missing or bad ``resume``) and anything after the first byte is a
``RUN_ERROR`` that ends the stream.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web

from gateway import CHANNEL_SERVICES, Turn, one_line

from ._input import MAX_BODY, AgUiRequestError, parse_run_input, read_run_input
from ._resume import InterruptError, plan_resume
from ._runs import RunIds
from ._stream import KEEPALIVE_SECONDS, AgUiStream

__all__ = ["AG_UI_OPTIONS", "AgUiOptions", "run_agent", "setup", "thread_events"]

logger = logging.getLogger("channels.ag_ui")


def _log_refusal(request: web.Request, status: int | str, code: str, reason: str) -> None:
    """The one line of a refusal answered in-band (a ``RUN_ERROR``), never a traceback.

    A refusal raised before the stream (a bad body, a bad token) is the gateway's error
    middleware's to answer and to log.
    """
    route = request.match_info.route.resource
    where = route.canonical if route is not None else request.path
    # one_line: the reason may quote the client's input (a role, an id), which must not split the line.
    logger.info("AG-UI refused %s %s: %s %s: %s", request.method, one_line(where, 120), status, code, one_line(reason))


@dataclass(frozen=True, kw_only=True)
class AgUiOptions:
    """How the AG-UI routes of one app behave."""

    max_body: int = MAX_BODY
    """Bytes in a request body (413 above)."""
    keepalive: float = KEEPALIVE_SECONDS
    """Seconds of silence before a keep-alive comment on a stream."""


AG_UI_OPTIONS = web.AppKey("agora_ag_ui_options", AgUiOptions)
"""Where an app keeps its ``AgUiOptions`` (replace them before the app starts to tune it)."""


async def run_agent(request: web.Request) -> web.StreamResponse:
    """``POST /agent/ag-ui``: a ``RunAgentInput`` in, a stream of AG-UI events out.

    The last user message is the turn on ``threadId``; with ``resume`` the request decides the
    thread's open interrupts instead and streams what follows. A refusal (before the stream, or
    as its ``RUN_ERROR``) is logged on one line.
    """
    services = request.app[CHANNEL_SERVICES]
    options = request.app[AG_UI_OPTIONS]
    actor = await services.resolve_actor(request)
    ask = parse_run_input(await read_run_input(request, max_body=options.max_body))
    runtime = services.runtime
    if await runtime.get_thread(ask.thread_id) is not None:
        await runtime.check_thread_access(ask.thread_id, actor)
    stream = AgUiStream(request, services, ask.thread_id, capabilities=ask.capabilities, keepalive=options.keepalive)
    if ask.resume is not None:
        try:
            plan = await plan_resume(runtime, actor, ask.thread_id, ask.resume)
            return await stream.resume(ask.run_id, actor, plan)
        except InterruptError as exc:
            _log_refusal(request, "RUN_ERROR", exc.code, str(exc))
            return await stream.refuse(ask.run_id, exc)
    if ask.text is None and not ask.files:
        raise AgUiRequestError("no_user_message", "messages has no user message with text, and there is no resume")
    pending = await runtime.pending_approvals(ask.thread_id)
    if pending:
        ids = ", ".join(a.tool_call_id for a in pending)
        error = InterruptError("interrupt_pending", f"Answer the open interrupts first with resume[] ({ids})")
        _log_refusal(request, "RUN_ERROR", error.code, str(error))
        return await stream.refuse(ask.run_id, error)
    # An unknown agent (404) or persona (400) is refused before anything is kept.
    runtime.agent_for(ask.agent, actor).persona(ask.persona)
    # Charged before any file is kept: a refused message (429) leaves nothing behind.
    await services.limit(actor, services.client_address(request))
    # Refused here (413, 415) before anything starts: the error middleware answers and logs it.
    attachments = [
        await services.attachments.store_upload(actor, ask.thread_id, name, mime, data)
        for name, mime, data in ask.files
    ]
    turn = Turn(
        attachments=tuple(attachments),
        thread_id=ask.thread_id,
        actor=actor,
        text=ask.text or "",
        ui_capabilities=ask.capabilities,
        page_context=ask.page_context,
        channel="ag-ui",
        agent=ask.agent,
        persona=ask.persona,
    )
    after = await runtime.last_seq(ask.thread_id)
    accepted = await runtime.send(turn)  # the rate limit was charged above
    if accepted.run_id is not None:  # begun at once
        await RunIds(services.state("ag-ui")).remember_turn(ask.thread_id, accepted.run_id, ask.run_id)
        return await stream.turn(ask.run_id, accepted.run_id, after)
    queued = accepted.queued
    if queued is None:  # pragma: no cover - Runtime.send answers a run or a queued message
        raise RuntimeError("Runtime.send answered neither a run nor a queued message")
    return await stream.queued(ask.run_id, queued, accepted.position or 1, after)


async def thread_events(request: web.Request) -> web.StreamResponse:
    """``GET /agent/ag-ui/threads/{thread_id}/events?after=``: re-attach to a thread's runs.

    Streams the thread's events after ``after`` (or the ``Last-Event-ID`` header, which wins)
    as AG-UI runs, and ends when it has caught up with no run in progress. A refusal is logged
    on one line (by the error middleware).
    """
    services = request.app[CHANNEL_SERVICES]
    options = request.app[AG_UI_OPTIONS]
    actor = await services.resolve_actor(request)
    thread_id = request.match_info["thread_id"]
    raw = request.headers.get("Last-Event-ID") or request.query.get("after") or "0"
    try:
        after = int(raw)
    except ValueError:
        raise AgUiRequestError("invalid_after", "after (or Last-Event-ID) must be an integer") from None
    if after < 0:
        raise AgUiRequestError("invalid_after", "after (or Last-Event-ID) must not be negative")
    await services.runtime.check_thread_access(thread_id, actor)
    stream = AgUiStream(request, services, thread_id, keepalive=options.keepalive)
    return await stream.reattach(after)


def setup(app: web.Application, *, options: AgUiOptions | None = None) -> None:
    """Mount an ``AgUiChannel`` on an app from ``gateway.create_app`` (which does it by default)."""
    from ._channel import AgUiChannel

    AgUiChannel(options).setup(app, app[CHANNEL_SERVICES])
