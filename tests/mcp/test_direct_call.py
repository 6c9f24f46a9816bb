"""``Runtime.call_tool``: a run whose step 0 is one call, governed as a model's call, and no model step."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from gateway import Runtime, ThreadForbiddenError, UnknownAgentError
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore, ModelStepEntry, ToolSettledEntry
from tools import Actor, ToolContext, define_tool

from .conftest import ALICE, BOB
from .shop import Shop


class Nothing(BaseModel):
    pass


def never_asked(request: ModelRequest, index: int) -> ScriptStep:
    raise AssertionError("a direct call takes no model step")


def runtime(store: MemoryStore, name: str = "a", shop: Shop | None = None) -> Runtime:
    @define_tool(name="staff_only", description="For staff.", input=Nothing, roles=["staff"])
    async def staff_only(input: Nothing, ctx: ToolContext) -> str:
        return "secret"

    @define_tool(name="slow", description="Too slow.", input=Nothing, timeout=0.05)
    async def slow(input: Nothing, ctx: ToolContext) -> str:
        await asyncio.sleep(5)
        return "late"

    tools = [*(shop or Shop()).tools(), staff_only, slow]
    return Runtime(tools=tools, model=ScriptedModel(never_asked), store=store, instance_id=name)


async def test_a_read_call_is_step_zero_of_a_run_without_a_model_step() -> None:
    store = MemoryStore()
    async with runtime(store) as rt:
        run_id = await rt.call_tool(ALICE, "stock", {"item": "mug"}, thread_id="mcp-t1")
        assert await rt.wait(run_id, 5) == "completed"
        journal = await store.read_journal("mcp-t1", run_id)
        [step, settled] = journal
        assert isinstance(step, ModelStepEntry) and step.step == 0 and step.text is None
        assert [(c.name, c.args) for c in step.calls] == [("stock", {"item": "mug"})]
        assert isinstance(settled, ToolSettledEntry) and settled.status == "completed"
        assert settled.output == {"item": "mug", "count": 7}
        events = await rt.read_events("mcp-t1")
        assert [e.type for e in events] == ["run-started", "tool-started", "tool-completed", "run-finished"]
        run = await rt.get_run(run_id)
        assert run.direct_call is not None and run.direct_call.name == "stock"
        assert run.usage.model_calls == 0 and run.turn.channel == "mcp"
        thread = await rt.get_thread("mcp-t1")
        assert thread is not None and thread.owned_by(ALICE)


async def test_gates_validation_and_timeouts_fail_the_call_as_a_model_would_see_it() -> None:
    async with runtime(MemoryStore()) as rt:
        for thread_id, name, args, code in (
            ("mcp-g1", "staff_only", {}, "tool_forbidden"),
            ("mcp-g2", "stock", {"item": ""}, "tool_input_invalid"),
            ("mcp-g3", "slow", {}, "tool_timeout"),
            ("mcp-g4", "made_up", {}, "tool_not_found"),
        ):
            run_id = await rt.call_tool(ALICE, name, args, thread_id=thread_id)
            assert await rt.wait(run_id, 5) == "completed"
            [failed] = [e for e in await rt.read_events(thread_id) if e.type == "tool-failed"]
            assert failed.error["code"] == code, failed.error  # type: ignore[attr-defined]


async def test_another_actors_thread_and_an_unknown_agent_are_refused() -> None:
    async with runtime(MemoryStore()) as rt:
        await rt.wait(await rt.call_tool(ALICE, "stock", {"item": "mug"}, thread_id="mcp-owned"), 5)
        with pytest.raises(ThreadForbiddenError):
            await rt.call_tool(BOB, "stock", {"item": "mug"}, thread_id="mcp-owned")
        with pytest.raises(UnknownAgentError):
            await rt.call_tool(ALICE, "stock", {"item": "mug"}, thread_id="mcp-new", agent="nobody")


async def test_an_action_parks_and_another_process_resumes_it_from_the_journal() -> None:
    store, shop = MemoryStore(), Shop()
    first = runtime(store, "process-a", shop)
    run_id = await first.call_tool(ALICE, "send_gift", {"to": "Ana"}, thread_id="mcp-park")
    assert await first.wait(run_id, 5) == "awaiting-approval"
    [approval] = await first.pending_approvals("mcp-park")
    assert approval.confirmation.title == "Send a gift to Ana?"
    await first.aclose()  # the first process is gone

    async with runtime(store, "process-b", shop) as second:
        await second.decide(approval.tool_call_id, ALICE, approve=True, via="mcp")
        assert await second.wait(run_id, 5) == "completed"
        assert shop.gifts == ["Ana"]
        journal = await store.read_journal("mcp-park", run_id)
        assert [type(e).__name__ for e in journal].count("ModelStepEntry") == 1
        types_seen = [e.type for e in await second.read_events("mcp-park")]
        assert types_seen.count("tool-completed") == 1 and types_seen[-1] == "run-finished"
        decided = await second.get_approval(approval.tool_call_id)
        assert decided is not None and decided.via == "mcp"


async def test_an_actor_is_who_the_call_runs_as() -> None:
    staff = Actor(id="sam", roles=["staff"])
    async with runtime(MemoryStore()) as rt:
        run_id = await rt.call_tool(staff, "staff_only", {}, thread_id="mcp-staff")
        assert await rt.wait(run_id, 5) == "completed"
        [done] = [e for e in await rt.read_events("mcp-staff") if e.type == "tool-completed"]
        assert done.output == "secret"  # type: ignore[attr-defined]
