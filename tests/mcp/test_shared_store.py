"""Sessions and approvals live in the store: a second process sharing it (Redis) serves the same session."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from mcp import types

from channels.mcp import APPROVAL_ID_PREFIX

from ..conftest import own_redis_store
from .conftest import ALICE, BOB, Gateway, Router, texts
from .shop import Shop

pytestmark = pytest.mark.redis

MakeGateway = Callable[..., Awaitable[Gateway]]


@contextlib.asynccontextmanager
async def two_processes(redis_url: str, make_gateway: MakeGateway) -> AsyncIterator[tuple[Shop, Gateway, Gateway]]:
    """Two gateways, each with its own runtime and store client over one Redis prefix."""
    shop = Shop()
    async with (
        own_redis_store(redis_url) as first_store,
        own_redis_store(redis_url, first_store.prefix) as second_store,
    ):
        first = await make_gateway(shop.runtime(first_store, "process-a"))
        second = await make_gateway(shop.runtime(second_store, "process-b"))
        yield shop, first, second
        for gw in (first, second):
            assert gw.runtime is not None
            await gw.runtime.aclose()
            gw.runtime = None


async def test_a_session_opened_on_one_process_is_served_by_another(redis_url: str, make_gateway: MakeGateway) -> None:
    async with two_processes(redis_url, make_gateway) as (_shop, first, second):
        router = Router(first.base_url)
        async with first.session(router=router) as (session, _):
            router.to = second.base_url
            listed = await session.list_tools()
            assert [t.name for t in listed.tools] == ["stock"]
            result = await session.call_tool("stock", {"item": "mug"})
            session_id = _session_id(router)
        assert not result.isError and texts(result)[:2] == ["Counting mug", "Counted mug"]
        assert set(router.sent_to[:1]) == {first.base_url} and set(router.sent_to[1:]) == {second.base_url}
        router.messages()
        # The client ended its session (DELETE, on the second): the first knows it is gone.
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        gone = await first.http(**{"Mcp-Session-Id": session_id}).post(first.url, json=ping)
        assert gone.status_code == 404


async def test_an_elicitation_answered_on_another_process_completes_the_call(
    redis_url: str, make_gateway: MakeGateway
) -> None:
    async with two_processes(redis_url, make_gateway) as (shop, first, second):
        router = Router(first.base_url)
        asked: list[str] = []

        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(str(context.request_id))
            router.to = second.base_url  # the answer lands on the other process
            return types.ElicitResult(action="accept", content={"approve": True})

        async with first.session(elicit=elicit, router=router) as (session, _):
            result = await session.call_tool("send_gift", {"to": "Ana"})
        assert not result.isError, result
        assert "Sent a gift to Ana" in texts(result)
        assert shop.gifts == ["Ana"]
        assert router.sent_to[-2:] == [second.base_url, second.base_url]  # the answer, then the DELETE
        [request_id] = asked
        tool_call_id = request_id.removeprefix(APPROVAL_ID_PREFIX)
        assert second.runtime is not None
        approval = await second.runtime.get_approval(tool_call_id)
        assert approval is not None and (approval.status, approval.via) == ("approved", "mcp")
        router.messages()

        # The same answer again, or one for it from another actor, changes nothing.
        replay = {"jsonrpc": "2.0", "id": request_id, "result": {"action": "decline"}}
        for actor in (ALICE, BOB):
            async with first.session(actor) as (_session, bob_router):
                session_id = _session_id(bob_router)
                answered = await second.http(actor, **{"Mcp-Session-Id": session_id}).post(second.url, json=replay)
                assert answered.status_code == 202
        approval = await second.runtime.get_approval(tool_call_id)
        assert approval is not None and approval.status == "approved"
        assert shop.gifts == ["Ana"]


async def test_someone_elses_answer_to_a_pending_approval_is_refused(redis_url: str, make_gateway: MakeGateway) -> None:
    async with two_processes(redis_url, make_gateway) as (shop, first, second):
        asked: list[str] = []
        forged_by_bob: list[int] = []

        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(str(context.request_id))
            async with second.session(BOB) as (_session, router):
                session_id = _session_id(router)
                forged = {"jsonrpc": "2.0", "id": str(context.request_id), "result": {"action": "accept"}}
                http = second.http(BOB, **{"Mcp-Session-Id": session_id})
                forged_by_bob.append((await http.post(second.url, json=forged)).status_code)
            assert shop.gifts == []  # Bob's answer did not approve Alice's action
            return types.ElicitResult(action="decline")

        async with first.session(elicit=elicit) as (session, _):
            result = await session.call_tool("send_gift", {"to": "Ana"})
        assert forged_by_bob == [202]
        assert result.isError and shop.gifts == []


async def test_the_agent_is_chosen_at_initialize_and_refused_when_unknown_or_not_usable(
    redis_url: str, make_gateway: MakeGateway
) -> None:
    async with two_processes(redis_url, make_gateway) as (_shop, first, _second):
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        }
        http = first.http()
        for agent, status in (("shop", 200), ("staff", 404), ("nobody", 404)):
            answer = await http.post(f"{first.url}?agent={agent}", json=init)
            assert answer.status_code == status, answer.text
            assert ("mcp-session-id" in answer.headers) is (status == 200)
        staff = first.http(ALICE.model_copy(update={"roles": ["staff"]}))
        assert (await staff.post(f"{first.url}?agent=staff", json=init)).status_code == 200


def _session_id(router: Router) -> str:
    """The session id the gateway gave (read back from the client's requests)."""
    return router.session_id or ""
