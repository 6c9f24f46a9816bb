"""The examples for tool authors work as written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway import Runtime, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from tools import Actor, discover_tools

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


async def test_the_example_tool_module_is_discovered_and_runs() -> None:
    tools = discover_tools(EXAMPLES / "shop_tools.py")
    assert sorted(t.name for t in tools) == ["discontinue_product", "reorder", "stock_level"]
    kinds = {t.name: t.kind for t in tools}
    assert kinds == {"stock_level": "read", "reorder": "action", "discontinue_product": "read"}

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="stock_level", args={"sku": "espresso-beans"})]),
            ScriptStep(tool_calls=[ToolCallRequest(name="reorder", args={"sku": "espresso-beans", "units": 10})]),
            ScriptStep(text="Ordered."),
        ]
    )
    runtime = Runtime(tools=tools, model=model)
    actor = Actor(id="shopkeeper", roles=["member"])
    try:
        run_id = await runtime.start_turn(Turn(thread_id="ex-1", actor=actor, text="restock beans"))
        assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
        events: list[Any] = [e async for e in runtime.events("ex-1")]
        card = next(e for e in events if e.type == "ui")
        assert card.props["items"][0] == {"label": "espresso-beans", "value": 42, "unit": "units"}
        request = next(e for e in events if e.type == "approval-requested")
        assert request.confirmation.title == "Order 10 x espresso-beans?"
        await runtime.decide(request.tool_call_id, actor)
        assert await runtime.wait(run_id, timeout=5) == "completed"
    finally:
        await runtime.aclose()
