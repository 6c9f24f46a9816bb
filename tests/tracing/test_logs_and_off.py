"""Trace ids in the JSON log lines; with no SDK provider nothing records and nothing breaks; a failed step."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from opentelemetry import trace
from pydantic import BaseModel

from gateway import Agent, GuardContext, GuardVerdict, Runtime, Turn, _tracing
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore
from tools import define_tool

from ..conftest import JsonLog
from ..engine.conftest import until
from ._scenario import ALICE, make_runtime
from .conftest import Spans

log = logging.getLogger("gateway.test_tracing")


class Note(BaseModel):
    text: str


def noting_tool(seen: list[bool]) -> Any:
    @define_tool(name="note", description="Note something.", input=Note)
    async def note(input: Note, ctx: Any) -> dict[str, Any]:
        seen.append(trace.get_current_span().is_recording())
        log.info("noting %s", input.text)
        return {"noted": input.text}

    return note


def noting_runtime(seen: list[bool]) -> Runtime:
    steps = [ScriptStep(tool_calls=[ToolCallRequest(name="note", args={"text": "x"})]), ScriptStep(text="Noted.")]
    return Runtime(tools=[noting_tool(seen)], model=ScriptedModel(steps), store=MemoryStore())


async def test_log_lines_carry_the_trace_and_span_ids(spans: Spans, json_log: JsonLog) -> None:
    seen: list[bool] = []
    runtime = noting_runtime(seen)
    try:
        run_id = await runtime.start_turn(Turn(thread_id=f"t-{uuid.uuid4().hex[:8]}", actor=ALICE, text="note x"))
        assert await runtime.wait(run_id, timeout=5) == "completed"
    finally:
        await runtime.aclose()
    log.info("outside any span")
    [tool] = spans.named("execute_tool note")
    ids = tool.get_span_context()
    assert ids is not None
    [inside] = [line for line in json_log.lines("gateway.test_tracing") if line["message"] == "noting x"]
    assert inside["trace_id"] == format(ids.trace_id, "032x") and inside["span_id"] == format(ids.span_id, "016x")
    assert inside["run_id"] == run_id  # beside the run's own fields
    [outside] = [line for line in json_log.lines("gateway.test_tracing") if line["message"] == "outside any span"]
    assert "trace_id" not in outside and "span_id" not in outside
    assert seen == [True]


async def test_without_a_provider_nothing_records_and_the_turn_runs(json_log: JsonLog) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # the API's default, no SDK
    assert _tracing.tracer() is None
    seen: list[bool] = []
    runtime = noting_runtime(seen)
    try:
        thread_id = f"t-{uuid.uuid4().hex[:8]}"
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ALICE, text="note x"))
        assert await runtime.wait(run_id, timeout=5) == "completed"
        run = await runtime.get_run(run_id)
    finally:
        await runtime.aclose()
    assert seen == [False]
    assert run.trace_context is None
    assert all("trace_id" not in line for line in json_log.lines())
    # The helpers hand out the API's invalid span and take it back without complaint.
    with _tracing.render_span("KpiCards", "html") as span:
        assert span is trace.INVALID_SPAN
        _tracing.trace_http_status(200)
    assert await _tracing.parent_of(run_id, runtime.store.get_run) is None


async def test_an_approval_parked_without_a_provider_resumes_untraced() -> None:
    store = MemoryStore()
    runtime = make_runtime(store, "only")
    try:
        run_id = await runtime.start_turn(Turn(thread_id=f"t-{uuid.uuid4().hex[:8]}", actor=ALICE, text="go"))
        assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
        [approval] = await runtime.pending_approvals((await runtime.get_run(run_id)).thread_id)
        await runtime.decide(approval.tool_call_id, ALICE, approve=True)
        assert await runtime.wait(run_id, timeout=5) == "completed"
    finally:
        await runtime.aclose()


async def test_a_failed_model_step_names_its_error_type(spans: Spans) -> None:
    runtime = Runtime(model=ScriptedModel([ScriptStep(error="the provider is down")]), store=MemoryStore())
    try:
        run_id = await runtime.start_turn(Turn(thread_id=f"t-{uuid.uuid4().hex[:8]}", actor=ALICE, text="hi"))
        assert await runtime.wait(run_id, timeout=5) == "failed"
    finally:
        await runtime.aclose()
    [chat] = spans.named("chat ")
    assert chat.status.status_code is trace.StatusCode.ERROR
    assert chat.attributes is not None and chat.attributes["error.type"] == "model_error"
    [drive] = spans.named("invoke_agent")
    assert drive.attributes is not None and drive.attributes["agora.run.status"] == "failed"
    assert drive.status.status_code is trace.StatusCode.ERROR and drive.attributes["error.type"] == "model_error"


class _Refuse:
    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        return GuardVerdict.refuse("no")


async def test_a_run_that_ends_failed_without_raising_marks_its_run_span(spans: Spans) -> None:
    # input_refused (and quota_exceeded, output_refused...) end the run through finish(), no exception.
    agent = Agent(name="default", input_guards=[_Refuse()])
    runtime = Runtime(agents=[agent], model=ScriptedModel([ScriptStep(text="hi")]), store=MemoryStore())
    try:
        run_id = await runtime.start_turn(Turn(thread_id=f"t-{uuid.uuid4().hex[:8]}", actor=ALICE, text="hi"))
        assert await runtime.wait(run_id, timeout=5) == "failed"
    finally:
        await runtime.aclose()
    [drive] = spans.named("invoke_agent")
    assert drive.status.status_code is trace.StatusCode.ERROR
    assert drive.attributes is not None and drive.attributes["error.type"] == "input_refused"


async def test_a_queued_message_run_is_not_in_the_trace_of_the_turn_it_waited_behind(spans: Spans) -> None:
    # Run 1 begins inside a request's span; a second message queues behind it. Its run begins in
    # run 1's task, after run 1 ended: it must not join the first request's trace.
    gate = asyncio.Event()

    async def slow(request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            await gate.wait()  # run 1 waits while the second message queues
        return ScriptStep(text="ok")

    runtime = Runtime(model=ScriptedModel(slow), store=MemoryStore())
    thread = f"t-{uuid.uuid4().hex[:8]}"
    tracer = spans.provider.get_tracer("test")
    try:
        with tracer.start_as_current_span("request 1") as first:
            one = await runtime.send(Turn(thread_id=thread, actor=ALICE, text="one"))
        two = await runtime.send(Turn(thread_id=thread, actor=ALICE, text="two"))
        assert one.run_id is not None and two.queued is not None
        gate.set()
        assert await runtime.wait(one.run_id, timeout=5) == "completed"
        await until(lambda: len(spans.named("invoke_agent")) == 2)
    finally:
        await runtime.aclose()
    drives = spans.named("invoke_agent")
    request_trace = first.get_span_context().trace_id
    assert [d.context.trace_id == request_trace for d in drives if d.context is not None] == [True, False]
