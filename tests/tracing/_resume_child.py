"""A second gateway process: decides the parked approval, resumes the run, renders its component, prints its spans.

python -m tests.tracing._resume_child SQLITE_PATH RUN_ID TOOL_CALL_ID

Its own SDK provider (the global one: this is its own process) with an in-memory exporter; its
finished spans go to stdout as one JSON array.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway import SERVICES, Settings, create_app
from gateway.events import UiEvent
from gateway.stores import SqliteStore
from tools import UiCapabilities

from ._scenario import ALICE, dumps, make_runtime, span_json


async def main(path: str, run_id: str, tool_call_id: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    runtime = make_runtime(SqliteStore(Path(path)), "second")
    settings = Settings(_env_file=None, secret="s" * 32, port=0)  # type: ignore[call-arg]
    runner = web.AppRunner(create_app(settings, runtime=runtime))
    await runner.setup()  # the app's startup: runtime, renderer, media (no socket)
    try:
        with trace.get_tracer("test").start_as_current_span("POST /agent/approvals"):  # the decision's request
            await runtime.decide(tool_call_id, ALICE, approve=True, via="web")
        assert await runtime.wait(run_id, timeout=10) == "completed"
        run = await runtime.get_run(run_id)
        [ui] = [e for e in await runtime.read_events(run.thread_id) if isinstance(e, UiEvent)]
        await runner.app[SERVICES].deliver_ui(ui, UiCapabilities(formats=["html"]))
    finally:
        await runner.cleanup()
        await runtime.aclose()
    print(dumps([span_json(span) for span in exporter.get_finished_spans()]), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
