"""The traced turn both processes of the cross-process test build: a read tool that shows a component, then an action.

Step 0 asks for the weather (a read tool that shows ``KpiCards``), step 1 for a cache purge (an
action: it parks for the requester's approval), step 2 answers in text. Each step reports tokens.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from pydantic import BaseModel

from gateway import Runtime
from gateway.events import Usage
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import Actor, ToolPresentation, define_tool

ALICE = Actor(id="alice@example.com", roles=["member"])


class CityInput(BaseModel):
    city: str


class KeyInput(BaseModel):
    key: str


@define_tool(
    name="get_weather",
    description="Current weather for a city.",
    input=CityInput,
    presentation=ToolPresentation(label="Weather", running="Checking {city}", done="Checked {city}"),
)
async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
    ctx.emit_ui("KpiCards", {"items": [{"label": input.city, "value": 21, "unit": "°C"}]})
    return {"city": input.city, "temp": 21}


@define_tool(name="purge_cache", description="Purge one cache key.", input=KeyInput, kind="action")
async def purge_cache(input: KeyInput, ctx: Any) -> dict[str, Any]:
    return {"purged": input.key}


def script(request: ModelRequest, index: int) -> ScriptStep:
    usage = Usage(input_tokens=100 + request.step, output_tokens=10 + request.step, model_calls=1)
    if request.step == 0:
        return ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})], usage=usage)
    if request.step == 1:
        return ScriptStep(tool_calls=[ToolCallRequest(name="purge_cache", args={"key": "k1"})], usage=usage)
    return ScriptStep(text="Done: 21 °C in Lisbon, cache purged.", usage=usage)


def make_runtime(store: Store, instance_id: str) -> Runtime:
    return Runtime(
        tools=[get_weather, purge_cache],
        model=ScriptedModel(script, name="scripted-1"),
        store=store,
        instance_id=instance_id,
    )


def span_json(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON (what the child prints, what the parent compares)."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "parent_id": format(span.parent.span_id, "016x") if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
        "events": [{"name": e.name, "attributes": dict(e.attributes or {})} for e in span.events],
        "links": [format(link.context.span_id, "016x") for link in span.links],
        "status": span.status.status_code.name,
    }


def dumps(spans: list[dict[str, Any]]) -> str:
    return json.dumps(spans, default=list)
