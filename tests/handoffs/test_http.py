"""Handoffs over HTTP: the child's approval is the person's to decide; one conversation listed, erased whole."""

from __future__ import annotations

from typing import Any

from gateway import Agent, Runtime

from ..web.conftest import ALICE, BOB, make_client, token_for
from .conftest import asks, new_thread, purge_tool, replying, turn, until
from .test_park_and_cancel import PURGE

__all__ = ["make_client"]  # the web tests' fixture


def bearer(actor: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(actor)}"}


async def test_the_childs_approval_over_http_then_the_thread_listed_once_and_erased_whole(make_client: Any) -> None:
    executed: list[str] = []
    ops = Agent(name="ops", model=replying(PURGE, text="Purged it."))
    main = Agent(name="main", handoffs=["ops"], model=asks("ask_ops", "Purge sessions:42", then="All done."))
    runtime = Runtime(tools=[purge_tool(executed)], agents=[main, ops])
    client = await make_client(runtime)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread, "purge it", actor=ALICE))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (approval,) = await runtime.pending_approvals(thread)

    refused = await client.post(
        "/agent/tool-call/approve", json={"tool_call_id": approval.tool_call_id}, headers=bearer(BOB)
    )
    assert refused.status == 403 and executed == []
    decided = await client.post(
        "/agent/tool-call/approve", json={"tool_call_id": approval.tool_call_id}, headers=bearer(ALICE)
    )
    assert decided.status == 200 and (await decided.json())["status"] == "approved"
    await until(lambda: _completed(runtime, run_id))
    assert len(executed) == 1

    listed = await client.get("/agent/threads", headers=bearer(ALICE))
    assert [t["thread_id"] for t in (await listed.json())["threads"]] == [thread]
    erased = await client.delete(f"/agent/threads/{thread}", headers=bearer(ALICE))
    assert erased.status in (200, 204)
    assert await runtime.get_thread(approval.thread_id) is None
    assert await runtime.store.get_approval(approval.tool_call_id) is None


async def _completed(runtime: Runtime, run_id: str) -> bool:
    return (await runtime.get_run(run_id)).status == "completed"
