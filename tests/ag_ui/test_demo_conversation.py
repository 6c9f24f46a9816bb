"""A demo conversation over AG-UI, with the embedded demo model and tools (the default app)."""

from __future__ import annotations

import json
from typing import Any

from .conftest import approve, new_id, of_type, reattach, run, run_input, types


async def test_the_demo_shop_over_ag_ui(make_client: Any) -> None:
    client = await make_client(demo=True)
    thread_id = new_id("t")
    html = {"uiCapabilities": {"formats": ["html"]}}

    frames = await run(client, run_input(thread_id, "What's the weather in Lisbon?", forwarded_props=html))
    assert of_type(frames, "TOOL_CALL_START")[0].data["metadata"]["running"] == "Checking the weather in Lisbon"
    assert of_type(frames, "TOOL_CALL_RESULT")[0].data["metadata"]["done"] == "Checked the weather in Lisbon"
    card = of_type(frames, "CUSTOM")[0].data["value"]
    assert card["component"] == "KpiCards" and "Lisbon" in card["html"] and "<script" not in card["html"]
    assert frames[-1].data["outcome"] == {"type": "success"}

    # An action: the run ends with an interrupt whose message is the filled confirmation title.
    frames = await run(client, run_input(thread_id, "refund order 1042", run_id="refund-1"))
    (interrupt,) = frames[-1].data["outcome"]["interrupts"]
    assert interrupt["message"] == "Refund €129.00 for order 1042?"
    assert interrupt["metadata"] == {
        "tool": "refund_order",
        "verb": "Refund",
        "detail": "Burr grinder · back to the card ending 4242",
    }
    frames = await run(client, run_input(thread_id, run_id="refund-2", resume=[approve(interrupt["id"])]))
    assert "TOOL_CALL_START" not in types(frames)
    result = of_type(frames, "TOOL_CALL_RESULT")[0].data
    assert result["toolCallId"] == interrupt["toolCallId"] and result["metadata"]["done"] == "Refunded order 1042"
    assert json.loads(result["content"])["order_id"] == "1042"
    assert frames[-1].data["runId"] == "refund-2" and frames[-1].data["outcome"] == {"type": "success"}

    # Rejected, with a reason the model reads.
    frames = await run(client, run_input(thread_id, "refund order 1041"))
    (interrupt,) = frames[-1].data["outcome"]["interrupts"]
    frames = await run(client, run_input(thread_id, resume=[approve(interrupt["id"], False, "changed my mind")]))
    assert of_type(frames, "TOOL_CALL_RESULT")[0].data["metadata"]["reason"] == "Rejected by alice: changed my mind."
    text = "".join(f.data["delta"] for f in of_type(frames, "TEXT_MESSAGE_CONTENT"))
    assert "did not go ahead" in text

    # The whole thread again, as AG-UI runs named by the client's runIds where it gave them.
    replay = await reattach(client, thread_id)
    run_ids = [f.data["runId"] for f in of_type(replay, "RUN_STARTED")]
    assert len(run_ids) == 5 and run_ids[1:3] == ["refund-1", "refund-2"]
