"""The official ``mcp`` client against our ``/mcp``: list, call, approvals by elicitation, confirmed tools."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from channels.mcp import APPROVAL_ID_PREFIX, MCP_CHANNEL
from gateway import ApprovalPolicy, ApprovalRule, Runtime
from gateway.stores import MemoryStore

from .conftest import ALICE, Gateway, texts
from .shop import Shop


class Asked:
    """An elicitation callback answering ``action`` (and ``approve``), keeping what it was asked."""

    def __init__(self, action: str = "accept", approve: bool = True) -> None:
        self.action, self.approve = action, approve
        self.asked: list[tuple[str, types.ElicitRequestFormParams]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append((str(context.request_id), params))
        content = {"approve": self.approve} if self.action == "accept" else None
        return types.ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]

    @property
    def tool_call_id(self) -> str:
        [(request_id, _)] = self.asked
        return request_id.removeprefix(APPROVAL_ID_PREFIX)


def runtime_of(gw: Gateway) -> Runtime:
    runtime = gw.app[MCP_CHANNEL].services.runtime
    assert isinstance(runtime, Runtime)
    return runtime


async def test_without_elicitation_only_reads_are_listed(demo: Gateway) -> None:
    async with demo.session() as (session, router):
        assert session.get_server_capabilities() is not None
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert {"get_weather", "list_orders", "cancel_subscription"} <= set(tools)
    assert "refund_order" not in tools
    assert all(tool.annotations and tool.annotations.readOnlyHint for tool in listed.tools)
    weather = tools["get_weather"]
    assert weather.title == weather.annotations.title == "Weather"  # type: ignore[union-attr]
    runtime = runtime_of(demo)
    expected = await runtime.registry.definitions_for(ALICE, runtime.default_agent, None)
    assert {t.name for t in listed.tools} == {d.name for d in expected if d.kind == "read"}
    assert {t.name: t.inputSchema for t in listed.tools} == {d.name: d.parameters for d in expected if d.kind == "read"}
    assert router.messages()


async def test_with_elicitation_actions_are_listed_too(demo: Gateway) -> None:
    async with demo.session(elicit=Asked()) as (session, router):
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert "refund_order" in tools
    assert tools["refund_order"].annotations.readOnlyHint is False  # type: ignore[union-attr]
    assert tools["refund_order"].title == "Refund"
    router.messages()


async def test_a_read_tool_answers_its_words_output_and_card(demo: Gateway) -> None:
    async with demo.session() as (session, router):
        result = await session.call_tool("get_weather", {"city": "Lisbon"})
    assert not result.isError
    said = texts(result)
    assert said[0] == "Checking the weather in Lisbon"
    assert "Checked the weather in Lisbon" in said
    assert result.structuredContent is not None and result.structuredContent["city"] == "Lisbon"
    assert json.loads(said[-1]) == result.structuredContent
    assert any(text.startswith("Lisbon:") for text in said)  # the card's text form
    [image] = [block for block in result.content if isinstance(block, types.ImageContent)]
    assert image.mimeType == "image/png" and image.data.startswith("iVBOR")
    messages = router.messages()
    assert any(isinstance(m.root, types.JSONRPCResponse) and "content" in m.root.result for m in messages)


async def test_arguments_that_fail_validation_fail_the_tool_as_the_model_sees_it(demo: Gateway) -> None:
    async with demo.session() as (session, _):
        result = await session.call_tool("get_weather", {"city": 12})
    assert result.isError
    assert "city" in texts(result)[0]


async def test_an_unknown_or_hidden_tool_is_the_same_protocol_error(demo: Gateway) -> None:
    refused = []
    async with demo.session() as (session, router):
        for name in ("no_such_tool", "refund_order"):  # refund_order: an action, and no elicitation
            with pytest.raises(McpError) as caught:
                await session.call_tool(name, {"order_id": "1042"})
            refused.append((caught.value.error.code, caught.value.error.message))
    assert refused == [
        (types.INVALID_PARAMS, "Unknown tool: no_such_tool"),
        (types.INVALID_PARAMS, "Unknown tool: refund_order"),
    ]
    assert len([m for m in router.messages() if isinstance(m.root, types.JSONRPCError)]) == 2
    assert await runtime_of(demo).store.open_approvals(limit=10) == []


async def test_an_action_accepted_by_elicitation_runs_once_audited_via_mcp(demo: Gateway) -> None:
    asked = Asked()
    async with demo.session(elicit=asked) as (session, router):
        result = await session.call_tool("refund_order", {"order_id": "1042"})
    assert not result.isError, result
    [(_, params)] = asked.asked
    assert params.message == "Refund €129.00 for order 1042?\n\nBurr grinder · back to the card ending 4242"
    assert params.requestedSchema["properties"]["approve"]["type"] == "boolean"
    assert params.requestedSchema["properties"]["approve"]["title"] == "Refund"
    assert "Refunded order 1042" in texts(result)
    assert result.structuredContent is not None and result.structuredContent["order_id"] == "1042"
    runtime = runtime_of(demo)
    approval = await runtime.get_approval(asked.tool_call_id)
    assert approval is not None
    assert (approval.status, approval.via, approval.decided_by) == ("approved", "mcp", "alice")
    events = await runtime.read_events(approval.thread_id)
    assert [e.type for e in events].count("tool-completed") == 1
    assert [e.type for e in events][-1] == "run-finished"
    elicitations = [m.root for m in router.messages() if isinstance(m.root, types.JSONRPCRequest)]
    assert [e.method for e in elicitations] == ["elicitation/create"]


async def test_an_action_declined_by_elicitation_does_not_run(demo: Gateway) -> None:
    for answer in (Asked("decline"), Asked("cancel"), Asked("accept", approve=False)):
        async with demo.session(elicit=answer) as (session, _):
            result = await session.call_tool("refund_order", {"order_id": "1042"})
        assert result.isError
        assert texts(result)[0].startswith("Not done:")
        runtime = runtime_of(demo)
        approval = await runtime.get_approval(answer.tool_call_id)
        assert approval is not None and (approval.status, approval.via) == ("rejected", "mcp")
        types_seen = [e.type for e in await runtime.read_events(approval.thread_id)]
        assert "tool-completed" not in types_seen and "tool-started" not in types_seen


async def test_a_confirmed_tool_previews_then_commits_with_its_token(demo: Gateway) -> None:
    async with demo.session() as (session, _):
        preview = await session.call_tool("cancel_subscription", {"plan": "coffee-club"})
        assert not preview.isError, preview
        assert preview.structuredContent is not None
        assert preview.structuredContent["status"] == "preview"
        token = preview.structuredContent["confirm_token"]
        assert "Looking at your subscription" in texts(preview)
        forged = await session.call_tool(
            "cancel_subscription", {"plan": "coffee-club", "confirm": True, "confirm_token": token[:-2] + "xx"}
        )
        assert forged.isError
        commit = await session.call_tool(
            "cancel_subscription", {"plan": "coffee-club", "confirm": True, "confirm_token": token}
        )
        assert not commit.isError, commit
        assert "Subscription cancelled" in texts(commit)
        again = await session.call_tool(
            "cancel_subscription", {"plan": "coffee-club", "confirm": True, "confirm_token": token}
        )
        assert again.isError  # single use


async def test_an_action_a_role_approves_waits_for_that_role_without_asking_the_client(make_gateway: Any) -> None:
    shop = Shop()
    rt = shop.runtime(MemoryStore(), "process-a")
    rt.approval_policy = ApprovalPolicy(rules={"send_gift": ApprovalRule(approver="staff")})
    gw = await make_gateway(rt)
    asked = Asked()
    async with gw.session(elicit=asked) as (session, _):
        result = await session.call_tool("send_gift", {"to": "Ana"})
    assert asked.asked == [] and shop.gifts == []
    assert texts(result) == ["Waiting for approval (staff): Send a gift to Ana?"]
    [pending] = await rt.store.open_approvals()
    assert pending.approver == "staff" and pending.status == "pending"
    staff = ALICE.model_copy(update={"id": "sam", "roles": ["staff"]})
    await rt.decide(pending.tool_call_id, staff, approve=True, via="console")
    assert await rt.wait(pending.run_id, 5) == "completed" and shop.gifts == ["Ana"]
