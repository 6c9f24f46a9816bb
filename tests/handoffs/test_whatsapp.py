"""Handoffs on WhatsApp: the child's approval reaches the same person (button or typed yes)."""

from __future__ import annotations

from gateway import Agent, Runtime
from gateway.models import ToolCallRequest

from ..whatsapp.conftest import ALICE, Gateway, MakeGateway, button, make_gateway, thread_of
from .conftest import asks, purge_tool, replying

__all__ = ["make_gateway"]  # the WhatsApp tests' fixture

PURGE = ToolCallRequest(name="purge_cache", args={"key": "sessions:42"})


def pair(executed: list[str]) -> Runtime:
    ops = Agent(name="ops", model=replying(PURGE, text="Purged it."))
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done."))
    return Runtime(tools=[purge_tool(executed)], agents=[main, ops])


async def asked(gw: Gateway) -> dict[str, str]:
    await gw.say("purge it")
    await gw.http.wait_for(lambda h: any("ContentSid" in r.data for r in h.messages()))
    (approval,) = [r for r in gw.http.messages() if "ContentSid" in r.data]
    assert approval.data["To"] == f"whatsapp:{ALICE}"
    return approval.variables


async def test_the_childs_approval_button_reaches_the_person_and_resumes_both(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    runtime = pair(executed)
    gw = await make_gateway(runtime)
    variables = await asked(gw)
    assert variables["1"] == "Purge sessions:42?"
    assert executed == []
    assert (await gw.post(button(variables["3"], "Purge"))).status == 200
    await gw.http.wait_for(lambda h: "All done." in h.bodies())
    await gw.settle()
    assert len(executed) == 1
    bodies = gw.http.bodies()
    assert "✓ Purged sessions:42" in bodies  # the sub-agent's line, shown as narration is
    assert bodies.index("✓ Purged sessions:42") < bodies.index("All done.")
    runs = await runtime.thread_runs(thread_of(ALICE))
    assert [r.status for r in runs] == ["completed"]


async def test_a_typed_yes_decides_the_childs_approval(make_gateway: MakeGateway) -> None:
    executed: list[str] = []
    runtime = pair(executed)
    gw = await make_gateway(runtime)
    await asked(gw)
    await gw.say("yes")
    await gw.http.wait_for(lambda h: "All done." in h.bodies())
    await gw.settle()
    assert len(executed) == 1
    runs = await runtime.thread_runs(thread_of(ALICE))
    assert [(r.status, r.turn.text) for r in runs] == [("completed", "purge it")]  # "yes" began no run
    assert await runtime.pending_approvals(thread_of(ALICE)) == []
