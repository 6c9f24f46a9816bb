"""The official ``mcp`` client against our ``/mcp``: list, call, approvals by elicitation, confirmed tools."""

from __future__ import annotations

from typing import Any

from mcp import types

from .conftest import Gateway, texts


async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": True})


async def test_without_elicitation_only_reads_are_listed(demo: Gateway) -> None:
    async with demo.session() as (session, router):
        listed = await session.list_tools()
        names = {tool.name: tool for tool in listed.tools}
        assert "get_weather" in names and "refund_order" not in names
        assert names["get_weather"].annotations.readOnlyHint is True
        assert names["get_weather"].title
        assert all(tool.annotations.readOnlyHint for tool in listed.tools)
    assert router.messages()


async def test_a_read_tool_answers_its_words_and_output(demo: Gateway) -> None:
    async with demo.session() as (session, router):
        result = await session.call_tool("get_weather", {"city": "Lisbon"})
        print(result)
        assert not result.isError
        assert "Checking the weather in Lisbon" in texts(result)
        assert "Checked the weather in Lisbon" in texts(result)
        assert result.structuredContent is not None
    router.messages()
