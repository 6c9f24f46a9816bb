"""A turn with a tool, a component and an approval decided on a second process is one trace."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

from gateway import SERVICES, Runtime, Settings, Turn, _tracing, create_app
from gateway._logs import actor_hash
from gateway.events import UiEvent
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, SqliteStore, Store
from tools import UiCapabilities, define_tool

from ..engine.conftest import until
from ._scenario import ALICE, KeyInput, make_runtime, span_json
from .conftest import Spans

ROOT = Path(__file__).resolve().parents[2]


def tree(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    return [span_json(span) for span in spans]


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [span for span in spans if span["name"] == name]
    assert len(found) == 1, [span["name"] for span in spans]
    return found[0]


@pytest.fixture
async def app_of() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(runtime: Runtime) -> web.Application:
        settings = Settings(_env_file=None, secret="s" * 32, port=0)  # type: ignore[call-arg]
        runner = web.AppRunner(create_app(settings, runtime=runtime))
        await runner.setup()
        runners.append(runner)
        return runner.app

    yield start
    for runner in runners:
        await runner.cleanup()


async def park(runtime: Runtime, spans: Spans, *, in_request: bool) -> tuple[str, str, str]:
    """Start the scenario's turn (inside a request span, or none); answer (thread, run, call) once parked."""
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    turn = Turn(thread_id=thread_id, actor=ALICE, text="weather, then purge k1")
    if in_request:
        with spans.provider.get_tracer("test").start_as_current_span("POST /agent/send"):
            run_id = await runtime.start_turn(turn)
    else:
        run_id = await runtime.start_turn(turn)
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    [approval] = await runtime.pending_approvals(thread_id)
    return thread_id, run_id, approval.tool_call_id


async def test_the_span_tree_across_two_processes_is_one_trace(spans: Spans, tmp_path: Path, app_of: Any) -> None:
    path = tmp_path / "agora.db"
    store = SqliteStore(path)
    runtime = make_runtime(store, "first")
    app = await app_of(runtime)
    thread_id, run_id, call_id = await park(runtime, spans, in_request=True)
    [ui] = [e for e in await runtime.read_events(thread_id) if isinstance(e, UiEvent)]
    for _ in range(2):  # the second render is the cache's
        delivered = await app[SERVICES].deliver_ui(ui, UiCapabilities(formats=["html"]))
        assert delivered.form == "html"
    stored = await store.get_run(run_id)
    assert stored is not None and stored.trace_context is not None
    await runtime.aclose()
    await store.aclose()

    first = tree(spans.finished())
    request = one(first, "POST /agent/send")
    trace_id = request["trace_id"]
    assert {span["trace_id"] for span in first} == {trace_id}
    # The stored context is the request's: the turn arrived inside it.
    assert stored.trace_context["traceparent"].startswith(f"00-{trace_id}-{request['span_id']}-")

    drive = one(first, "invoke_agent default")
    assert drive["parent_id"] == request["span_id"]
    assert drive["attributes"] == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "default",
        "agora.run_id": run_id,
        "agora.thread_id": thread_id,
        "agora.channel": "api",
        "agora.actor": actor_hash(ALICE.id),
        "agora.resumed": False,
        "agora.run.status": "awaiting-approval",
    }
    chats = [span for span in first if span["name"] == "chat scripted-1"]
    assert [c["attributes"]["agora.step"] for c in chats] == [0, 1]
    assert all(c["parent_id"] == drive["span_id"] for c in chats)
    assert chats[1]["attributes"] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted-1",
        "agora.step": 1,
        "gen_ai.usage.input_tokens": 101,
        "gen_ai.usage.output_tokens": 11,
    }
    weather = one(first, "execute_tool get_weather")
    assert weather["parent_id"] == drive["span_id"]
    assert weather["attributes"]["agora.tool.kind"] == "read"
    assert weather["attributes"]["agora.tool.outcome"] == "completed"
    assert weather["attributes"]["gen_ai.tool.call.id"] == ui.tool_call_id
    asked = one(first, "execute_tool purge_cache")
    assert asked["attributes"] == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "purge_cache",
        "gen_ai.tool.call.id": call_id,
        "agora.tool.kind": "action",
        "agora.tool.outcome": "awaiting-approval",
    }
    assert [e["name"] for e in asked["events"]] == ["agora.approval.requested"]
    assert asked["events"][0]["attributes"]["agora.approval.approver"] == "requester"
    renders = [span for span in first if span["name"] == "render KpiCards"]
    assert [r["attributes"] for r in renders] == [
        {"agora.render.component": "KpiCards", "agora.render.format": "html", "agora.render.cache_hit": hit}
        for hit in (False, True)
    ]
    assert all(r["parent_id"] == drive["span_id"] for r in renders)  # this process drove the run

    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.tracing._resume_child",
        str(path),
        run_id,
        call_id,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, _ = await child.communicate()
    assert child.returncode == 0
    second: list[dict[str, Any]] = json.loads(out)

    decision = one(second, "POST /agent/approvals")
    assert decision["trace_id"] != trace_id  # the decision's request is a trace of its own...
    resumed = one(second, "invoke_agent default")
    assert resumed["trace_id"] == trace_id  # ...the run's drive continues the run's
    assert resumed["parent_id"] == request["span_id"]  # parented on the stored context
    assert resumed["links"] == [decision["span_id"]]
    assert resumed["attributes"]["agora.resumed"] is True
    assert resumed["attributes"]["agora.run.status"] == "completed"
    executed = one(second, "execute_tool purge_cache")
    assert executed["parent_id"] == resumed["span_id"]
    assert executed["attributes"]["agora.tool.outcome"] == "completed"
    [settled] = executed["events"]
    assert settled["name"] == "agora.approval.settled"
    assert settled["attributes"]["agora.approval.decision"] == "approved"
    assert settled["attributes"]["agora.approval.via"] == "web"
    assert 0 <= settled["attributes"]["agora.approval.wait_s"] < 60
    answer = one(second, "chat scripted-1")
    assert answer["attributes"]["agora.step"] == 2
    assert answer["attributes"]["gen_ai.usage.input_tokens"] == 102
    # The second process renders the component too, in the run's trace (under its drive there).
    render = one(second, "render KpiCards")
    assert render["trace_id"] == trace_id and render["parent_id"] == resumed["span_id"]
    assert render["attributes"]["agora.render.cache_hit"] is True  # the store's cache: the first process's render
    everything = json.dumps([*first, *second])
    assert ALICE.id not in everything  # never a raw actor id


async def test_a_run_outside_any_span_is_rooted_at_its_first_drive(spans: Spans) -> None:
    store: Store = MemoryStore()
    first = make_runtime(store, "first")
    second = make_runtime(store, "second")
    try:
        _, run_id, call_id = await park(first, spans, in_request=False)
        await second.decide(call_id, ALICE, approve=False, reason="not now")
        assert await second.wait(run_id, timeout=5) == "completed"
    finally:
        await first.aclose()
        await second.aclose()
    drives = tree(spans.named("invoke_agent"))
    assert [d["attributes"]["agora.resumed"] for d in drives] == [False, True]
    root, resumed = drives
    assert root["parent_id"] is None
    assert resumed["parent_id"] == root["span_id"] and resumed["trace_id"] == root["trace_id"]
    assert resumed["links"] == []  # resumed outside any span
    asked, denied = tree(spans.named("execute_tool purge_cache"))
    assert asked["attributes"]["agora.tool.outcome"] == "awaiting-approval"
    assert denied["attributes"]["agora.tool.outcome"] == "denied"
    assert denied["events"][0]["attributes"]["agora.approval.decision"] == "rejected"
    assert {s["trace_id"] for s in tree(spans.finished())} == {root["trace_id"]}
    # A process that never drove the run (a channel delivering it) finds its context in the store.
    _tracing._runs.clear()
    parent = await _tracing.parent_of(run_id, store.get_run)
    assert parent is not None
    assert format(trace.get_current_span(parent).get_span_context().span_id, "016x") == root["span_id"]


async def test_a_run_recovered_by_a_sweep_continues_its_trace(spans: Spans) -> None:
    store = MemoryStore()
    hanging = asyncio.Event()
    hang = {"on": True}

    @define_tool(name="hangs", description="Hangs the first time.", input=KeyInput)
    async def hangs(input: KeyInput, ctx: Any) -> dict[str, str]:
        if hang["on"]:
            hanging.set()
            await asyncio.Event().wait()
        return {"ok": input.key}

    def steps(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="hangs", args={"key": "k"})])
        return ScriptStep(text="done")

    a = Runtime(tools=[hangs], model=ScriptedModel(steps), store=store, lease_ttl=0.2, instance_id="A")
    b = Runtime(tools=[hangs], model=ScriptedModel(steps), store=store, lease_ttl=0.2, instance_id="B")
    try:
        with spans.provider.get_tracer("test").start_as_current_span("POST /agent/send") as request:
            run_id = await a.start_turn(Turn(thread_id=f"t-{uuid.uuid4().hex[:8]}", actor=ALICE, text="go"))
        async with asyncio.timeout(5):
            await hanging.wait()
        await a.aclose()  # the process dies mid-tool: its lease is not renewed any more
        hang["on"] = False

        async def resumed() -> bool:
            await b.sweep()
            stored = await store.get_run(run_id)
            return stored is not None and stored.status != "running"

        await until(resumed)
        assert await b.wait(run_id, timeout=5) == "completed"
    finally:
        await b.aclose()
    drives = tree(spans.named("invoke_agent"))
    recovered = [d for d in drives if d["attributes"]["agora.resumed"]]
    assert len(recovered) == 1 and recovered[0]["attributes"]["agora.run.status"] == "completed"
    context = request.get_span_context()
    assert recovered[0]["trace_id"] == format(context.trace_id, "032x")
    assert recovered[0]["parent_id"] == format(context.span_id, "016x")
