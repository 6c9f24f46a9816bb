"""Spans of a run, its model steps and tool calls, renders and channel sends (OpenTelemetry).

The gateway traces with ``opentelemetry-api`` only: nothing is recorded until an SDK
``TracerProvider`` is installed, by the app (``trace.set_tracer_provider``) or by ``agora-gateway
serve`` from the ``OTEL_*`` variables (``gateway._tracing_setup``). Until then every helper here
returns at once: ``tracer()`` answers ``None`` for the API's default (proxy or no-op) provider, so
a turn pays a function call per hook, no span objects and no context switches.

The spans, under the tracer ``TRACER_NAME`` (GenAI semantic conventions where they name one):

==========================  =====================================================================
``invoke_agent <agent>``    one drive of a run; ``gen_ai.operation.name``, ``gen_ai.agent.name``,
                            ``agora.run_id``, ``agora.thread_id``, ``agora.channel``,
                            ``agora.actor`` (``actor_hash``, never the id), ``agora.resumed``,
                            ``agora.run.status`` at its end (a run that ends ``failed``:
                            ``error.type``, its error's code, and status ERROR)
``chat <model>``            one model step; ``gen_ai.request.model``, ``gen_ai.usage.*_tokens``,
                            ``error.type`` when it failed
``execute_tool <name>``     one tool call (one per drive: an approval's request and its resume are
                            two spans); ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
                            ``agora.tool.kind``, ``agora.tool.outcome``; events
                            ``agora.approval.requested`` and ``agora.approval.settled``
``render <component>``      one render; ``agora.render.component``, ``agora.render.format``,
                            ``agora.render.cache_hit``
``send <channel>``          one part a push channel sends; ``agora.channel``,
                            ``http.response.status_code`` (the provider's)
==========================  =====================================================================

**One trace per run, across processes.** A run's first drive stores the W3C context it continues
(``RunRecord.trace_context``: the request span the turn arrived in, else the first drive's own
span) and every later drive, on any process (a resume after an approval decided elsewhere, a
sweep's recovery), starts as a child of that stored context; the span that was current where it
was resumed (a decision's request) is linked. Renders and sends, which happen in a channel's own
task, find their run's context by the event's ``run_id``: this process's drives first, else the
stored record (read once per run, only while tracing records).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, NoOpTracerProvider, ProxyTracerProvider, Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ._logs import actor_hash

if TYPE_CHECKING:
    from .models import Model
    from .stores import ApprovalRecord, PlannedCall, RunRecord

__all__ = [
    "TRACER_NAME",
    "approval_requested",
    "approval_settled",
    "begin_context",
    "chat_span",
    "detached",
    "parent_of",
    "render_span",
    "run_span",
    "send_span",
    "set_usage",
    "tool_span",
    "trace_http_status",
    "tracer",
    "tracer_provider",
]

TRACER_NAME = "agora-gateway"
"""The instrumentation scope of every span the gateway starts."""

_REMEMBERED = 1024
"""Runs whose trace context this process keeps for their renders and sends (the newest)."""

_INERT: tuple[type, ...] = (ProxyTracerProvider, NoOpTracerProvider)


_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
"""The API builds its global provider from this variable on first use (read once, as the API reads it)."""
_UNREAD = object()


def tracer_provider() -> trace.TracerProvider | None:
    """The provider spans go to: the global one, ``None`` until one is set (tests and the bench replace this).

    Read from the API's module global when it has one: ``trace.get_tracer_provider()`` looks up
    ``os.environ`` on every call (about 1-3 µs, most of what an untraced turn would pay here).
    """
    provider = getattr(trace, "_TRACER_PROVIDER", _UNREAD)
    if provider is _UNREAD or (provider is None and _FROM_ENVIRONMENT):
        return trace.get_tracer_provider()
    return cast("trace.TracerProvider | None", provider)


_cached: tuple[object, trace.Tracer | None] = (object(), None)


def tracer() -> trace.Tracer | None:
    """The gateway's tracer, or ``None`` when nothing would record (no SDK provider installed).

    Cached per provider: one global read and an identity check per call.
    """
    global _cached
    provider = tracer_provider()
    known, cached = _cached
    if provider is known:
        return cached
    made = None if provider is None or isinstance(provider, _INERT) else provider.get_tracer(TRACER_NAME)
    _cached = (provider, made)
    return made


# -- runs -------------------------------------------------------------------------------------------

_runs: OrderedDict[str, otel_context.Context] = OrderedDict()


def _remember(run_id: str, ctx: otel_context.Context) -> None:
    _runs[run_id] = ctx
    _runs.move_to_end(run_id)
    while len(_runs) > _REMEMBERED:
        _runs.popitem(last=False)


def _error_type(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) and code else type(exc).__qualname__


@contextlib.contextmanager
def _failing(span: Span) -> Iterator[None]:
    """Mark ``span`` failed (``error.type``, status ERROR) when the block raises, and re-raise.

    The error's type or code only, never its message: a provider's or a tool's text may name a
    person, and traces leave the process.
    """
    try:
        yield
    except BaseException as exc:
        if span.is_recording():
            kind = _error_type(exc)
            span.set_attribute("error.type", kind)
            span.set_status(Status(StatusCode.ERROR, kind))
        raise


def begin_context(run: RunRecord) -> dict[str, str] | None:
    """The context a run that begins here continues: the current span's, if one is (a request's).

    ``None`` otherwise (or when tracing is off): then the run's first drive stores its own span's.
    """
    if run.trace_context or tracer() is None or not trace.get_current_span().get_span_context().is_valid:
        return run.trace_context
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


_NULL: contextlib.nullcontext[Span] = contextlib.nullcontext(trace.INVALID_SPAN)
"""What every helper hands out while tracing is off: no generator, no span, no context switch."""


def detached() -> contextlib.AbstractContextManager[Any]:
    """No span is current inside the block: a run begun there starts a trace of its own.

    For what a run's task does after the run (a queued message's run begins there): that task
    carries the context the finished run was begun in, which is not the next run's.
    """
    return _NULL if tracer() is None else _detached()


@contextlib.contextmanager
def _detached() -> Iterator[None]:
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def run_span(run: RunRecord, *, resume: bool) -> contextlib.AbstractContextManager[Any]:
    """The span of one drive of ``run``, current inside the block.

    A run without a stored context stores the one it starts in (``run.trace_context``, written
    with the run's next batch); a run with one starts its span as a child of it.
    """
    tracer_ = tracer()
    return _NULL if tracer_ is None else _run_span(tracer_, run, resume)


@contextlib.contextmanager
def _run_span(tracer_: trace.Tracer, run: RunRecord, resume: bool) -> Iterator[None]:
    parent = None
    links: list[Link] = []
    if run.trace_context:
        parent = propagate.extract(run.trace_context)
        here = trace.get_current_span().get_span_context()
        if here.is_valid:
            links.append(Link(here))
    turn = run.turn
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.agent,
        "agora.run_id": run.run_id,
        "agora.thread_id": run.thread_id,
        "agora.channel": turn.channel,
        "agora.actor": actor_hash(turn.actor.id),
        "agora.resumed": resume,
    }
    with tracer_.start_as_current_span(
        f"invoke_agent {run.agent}",
        context=parent,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        if not run.trace_context and span.get_span_context().is_valid:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            run.trace_context = carrier
        _remember(run.run_id, otel_context.get_current())
        try:
            with _failing(span):
                yield
        finally:
            span.set_attribute("agora.run.status", run.status)
            if run.status == "failed" and run.error and span.is_recording():  # ended failed, not raised
                code = str(run.error.get("code") or "failed")
                span.set_attribute("error.type", code)
                span.set_status(Status(StatusCode.ERROR, code))


async def parent_of(
    run_id: str | None, read: Callable[[str], Awaitable[RunRecord | None]]
) -> otel_context.Context | None:
    """The context a render or send of ``run_id`` continues; ``None`` when tracing is off or the run unknown.

    This process's drives are asked first, then the store (``read``: ``Store.get_run``), once per run.
    """
    if not run_id or tracer() is None:
        return None
    known = _runs.get(run_id)
    if known is not None:
        return known
    try:
        run = await read(run_id)
    except Exception:  # a trace is not worth a failed delivery
        return None
    if run is None or not run.trace_context:
        return None
    ctx = propagate.extract(run.trace_context)
    _remember(run_id, ctx)
    return ctx


# -- steps ------------------------------------------------------------------------------------------


def _span(
    name: Callable[[], str], attributes: Callable[[], dict[str, Any]], parent: otel_context.Context | None = None
) -> contextlib.AbstractContextManager[Span]:
    """A current span (``trace.INVALID_SPAN`` when tracing is off); failures mark it."""
    tracer_ = tracer()
    return _NULL if tracer_ is None else _current(tracer_, name(), attributes(), parent)


@contextlib.contextmanager
def _current(
    tracer_: trace.Tracer, name: str, attributes: dict[str, Any], parent: otel_context.Context | None
) -> Iterator[Span]:
    with tracer_.start_as_current_span(
        name, context=parent, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        with _failing(span):
            yield span


def _model_id(model: Model) -> str:
    named = getattr(model, "model", None)  # the SDK models keep the provider's id apart from their name
    return named if isinstance(named, str) else model.name


def chat_span(model: Model, step: int) -> contextlib.AbstractContextManager[Span]:
    """The span of one model step (``set_usage`` fills its token counts)."""
    return _span(
        lambda: f"chat {_model_id(model)}",
        lambda: {"gen_ai.operation.name": "chat", "gen_ai.request.model": _model_id(model), "agora.step": step},
    )


def set_usage(span: Span, input_tokens: int, output_tokens: int) -> None:
    """A model step's token usage, on its span."""
    if span.is_recording():
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)


_TOOL_SPAN_CALL = "agora.tool_span_call"


def tool_span(
    call: PlannedCall, kind: str, outcome: Callable[[], str | None]
) -> contextlib.AbstractContextManager[Any]:
    """The span of one tool call in this drive; ``outcome()`` names how it ended (``None``: parked).

    Nested for the same call (an action's execution inside its approval flow), it is the outer one.
    """
    tracer_ = tracer()
    if tracer_ is None or otel_context.get_value(_TOOL_SPAN_CALL) == call.id:
        return _NULL
    return _tool_span(tracer_, call, kind, outcome)


@contextlib.contextmanager
def _tool_span(
    tracer_: trace.Tracer, call: PlannedCall, kind: str, outcome: Callable[[], str | None]
) -> Iterator[None]:
    token = otel_context.attach(otel_context.set_value(_TOOL_SPAN_CALL, call.id))
    try:
        with tracer_.start_as_current_span(
            f"execute_tool {call.name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "agora.tool.kind": kind,
            },
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                with _failing(span):
                    yield
            finally:
                span.set_attribute("agora.tool.outcome", outcome() or "awaiting-approval")
    finally:
        otel_context.detach(token)


def approval_requested(approval: ApprovalRecord | None) -> None:
    """The current tool call parks for a person's decision (``None``: its request is still pending)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if approval is None:
        span.add_event("agora.approval.waiting")
        return
    attributes: dict[str, AttributeValue] = {
        "agora.approval.approver": approval.approver,
        "agora.approval.ttl_s": _ttl(approval),
    }
    span.add_event("agora.approval.requested", attributes)


def _ttl(approval: ApprovalRecord) -> float:
    return round(approval.expires_ts - approval.requested_ts, 3)


def approval_settled(approval: ApprovalRecord | None, outcome: str) -> None:
    """The current tool call resumes after its approval was decided (``None``: remembered, not asked)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if approval is None:
        span.add_event("agora.approval.settled", {"agora.approval.decision": "remembered"})
        return
    attributes: dict[str, AttributeValue] = {
        "agora.approval.decision": approval.status,
        "agora.approval.via": approval.via or "",
    }
    decided = _timestamp(approval.decided_at) if approval.decided_at else time.time()
    attributes["agora.approval.wait_s"] = round(max(0.0, decided - approval.requested_ts), 3)
    if outcome != "approved" and outcome != approval.status:
        attributes["agora.approval.outcome"] = outcome
    span.add_event("agora.approval.settled", attributes)


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


# -- renders and sends ------------------------------------------------------------------------------


def render_span(
    component: str, fmt: str, parent: otel_context.Context | None = None
) -> contextlib.AbstractContextManager[Span]:
    """The span of one render (the renderer marks ``agora.render.cache_hit`` on it)."""
    return _span(
        lambda: f"render {component}",
        lambda: {"agora.render.component": component, "agora.render.format": fmt},
        parent,
    )


_SENDING: ContextVar[Span | None] = ContextVar("agora_sending", default=None)


def send_span(channel: str, parent: otel_context.Context | None = None) -> contextlib.AbstractContextManager[Span]:
    """The span of one part a push channel sends (``trace_http_status`` records the provider's answer)."""
    tracer_ = tracer()
    return _NULL if tracer_ is None else _sending(tracer_, channel, parent)


@contextlib.contextmanager
def _sending(tracer_: trace.Tracer, channel: str, parent: otel_context.Context | None) -> Iterator[Span]:
    with _current(tracer_, f"send {channel}", {"agora.channel": channel}, parent) as span:
        token = _SENDING.set(span)
        try:
            yield span
        finally:
            _SENDING.reset(token)


def trace_http_status(status: int | None, span: Span | None = None) -> None:
    """Record a provider's HTTP answer on the send being made here (a ``send <channel>`` span), or on ``span``.

    A channel's API client calls it with each response's status: outside a send (a webhook's
    own calls) it records nothing, as with ``None`` (not reached).
    """
    if status is None:
        return
    span = span or _SENDING.get()
    if span is not None and span.is_recording():
        span.set_attribute("http.response.status_code", status)
