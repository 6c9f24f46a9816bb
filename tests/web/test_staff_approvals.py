"""Staff approvers over HTTP and the web socket: ``GET /agent/approvals``, the feed, the console's doors."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from gateway import ApprovalPolicy, ApprovalRule, Runtime, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, Store
from tools import Actor, ConfirmTemplate, ToolPresentation, define_tool

from ..conftest import RefusalLog
from .conftest import ALICE, connect, token_for

Client = TestClient[web.Request, web.Application]

SHOP_ALICE = Actor(id="alice", roles=["member"], tenant_ref="shop")
SHOP_BOB = Actor(id="bob", roles=["member"], tenant_ref="shop")
OLGA = Actor(id="olga", roles=["staff"], tenant_ref="shop")
"""Staff of the shop: she decides its refunds."""
OTTO = Actor(id="otto", roles=["staff"], tenant_ref="other")
"""Staff of another tenant: nothing of the shop's is his."""


class RefundInput(BaseModel):
    order: str
    amount: int


def staff_runtime(store: Store | None = None, executed: list[str] | None = None) -> Runtime:
    """Refunds need a person of role ``staff``; ``note`` is the requester's own to approve."""
    done = executed if executed is not None else []

    @define_tool(
        name="refund",
        description="Refund an order.",
        input=RefundInput,
        kind="action",
        presentation=ToolPresentation(
            confirm=ConfirmTemplate(
                title="Refund {amount} EUR on order {order}?", detail="Paid back to the card.", verb="Refund"
            )
        ),
    )
    async def refund(input: RefundInput, ctx: Any) -> dict[str, Any]:
        done.append(input.order)
        return {"refunded": input.order}

    @define_tool(
        name="note",
        description="Add a note.",
        input=RefundInput,
        kind="action",
        presentation=ToolPresentation(confirm=ConfirmTemplate(title="Note on {order}?", verb="Save")),
    )
    async def note(input: RefundInput, ctx: Any) -> dict[str, Any]:
        return {"noted": input.order}

    def script(request: Any, index: int) -> ScriptStep:
        words = request.last_user_text.split()
        if request.step == 0 and words[0] in ("refund", "note"):
            return ScriptStep(tool_calls=[ToolCallRequest(name=words[0], args={"order": words[1], "amount": 30})])
        return ScriptStep(text=f"Done: {request.last_user_text}")

    policy = ApprovalPolicy(rules={"refund": ApprovalRule(approver="staff")})
    return Runtime(
        tools=[refund, note], model=ScriptedModel(script), store=store or MemoryStore(), approval_policy=policy
    )


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> Iterator[RefusalLog]:
    caplog.set_level(logging.INFO)
    caplog.clear()
    ignore = ("channels.whatsapp", "channels.web", "gateway.runtime", "gateway.staff", "gateway.approvals")
    yield RefusalLog(caplog, route="/agent/approvals", ignore=ignore)


async def park(runtime: Runtime, actor: Actor, text: str, channel: str = "web") -> str:
    """Start ``text`` as ``actor`` on a new thread; answer the tool call id it waits on."""
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=actor, text=text, channel=channel))
    assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
    (pending,) = await runtime.pending_approvals(thread_id)
    return pending.tool_call_id


async def listed(client: Client, actor: Actor, query: str = "") -> tuple[int, dict[str, Any]]:
    response = await client.get(f"/agent/approvals{query}", headers={"Authorization": f"Bearer {token_for(actor)}"})
    return response.status, await response.json()


async def test_staff_list_the_role_approvals_of_their_tenant_and_others_only_their_own(make_client: Any) -> None:
    runtime = staff_runtime()
    client = await make_client(runtime)
    refund = await park(runtime, SHOP_ALICE, "refund A-1", channel="whatsapp")
    own_note = await park(runtime, SHOP_ALICE, "note A-2")
    await park(runtime, SHOP_BOB, "note B-1")

    status, body = await listed(client, OLGA)
    assert status == 200 and body["next_cursor"] is None
    (approval,) = body["approvals"]
    assert approval == {
        "tool_call_id": refund,
        "tool": "refund",
        "confirmation": {"title": "Refund 30 EUR on order A-1?", "verb": "Refund", "detail": "Paid back to the card."},
        "tone": None,
        "approver": "staff",
        "requester": {"id": "alice", "tenant": "shop"},
        "channel": "whatsapp",
        "thread_id": approval["thread_id"],
        "run_id": approval["run_id"],
        "requested_at": approval["requested_at"],
        "expires_at": approval["expires_at"],
    }
    # A non-staff caller sees only what is theirs to decide: not the refund they asked for (four eyes).
    status, body = await listed(client, SHOP_ALICE)
    assert status == 200 and [a["tool_call_id"] for a in body["approvals"]] == [own_note]
    # Staff of another tenant: never the shop's.
    status, body = await listed(client, OTTO)
    assert (status, body) == (200, {"approvals": [], "next_cursor": None})


async def test_pages_go_newest_first_with_a_signed_cursor(make_client: Any, refusals: RefusalLog) -> None:
    runtime = staff_runtime()
    client = await make_client(runtime)
    ids = [await park(runtime, SHOP_ALICE if i % 2 else SHOP_BOB, f"refund R-{i}") for i in range(5)]
    await park(runtime, SHOP_ALICE, "note N-1")  # not staff's: skipped without ending a page

    status, first = await listed(client, OLGA, "?limit=2")
    assert status == 200 and [a["tool_call_id"] for a in first["approvals"]] == ids[::-1][:2]
    cursor = first["next_cursor"]
    status, second = await listed(client, OLGA, f"?limit=2&cursor={cursor}")
    assert [a["tool_call_id"] for a in second["approvals"]] == ids[::-1][2:4]
    status, third = await listed(client, OLGA, f"?limit=2&cursor={second['next_cursor']}")
    assert [a["tool_call_id"] for a in third["approvals"]] == ids[:1] and third["next_cursor"] is None

    # Tampered, another caller's, garbled: 400, one line each.
    body, mac = cursor.split(".")
    forged = f"{body[:-2]}{'AA' if body[-2:] != 'AA' else 'BB'}.{mac}"
    refusals.caplog.clear()
    for actor, bad in ((OLGA, forged), (OTTO, cursor), (OLGA, "not-a-cursor"), (OLGA, cursor + "x")):
        status, answer = await listed(client, actor, f"?cursor={bad}")
        assert (status, answer["code"]) == (400, "invalid_request"), bad
        refusals.one(400, "invalid_request")
    for limit in ("0", "101", "x"):
        status, answer = await listed(client, OLGA, f"?limit={limit}")
        assert status == 400
        refusals.one(400)
    status, answer = await listed(client, OLGA, "?limit=100")
    assert status == 200 and len(answer["approvals"]) == 5
    response = await client.get("/agent/approvals")  # an anonymous visitor decides nothing
    assert response.status == 200 and (await response.json())["approvals"] == []


async def test_a_page_scans_a_bounded_number_of_records(make_client: Any) -> None:
    from gateway import StaffApprovals

    runtime = staff_runtime()
    await make_client(runtime)
    for i in range(3):
        await park(runtime, SHOP_ALICE, f"note N-{i}")
    refund = await park(runtime, SHOP_ALICE, "refund R-0")
    note_last = await park(runtime, SHOP_ALICE, "note N-9")
    staff = StaffApprovals(source=runtime, scan_limit=2)
    page, position = await staff.page(OLGA, limit=10)
    # Two records read: the newest note (not hers) and the refund; the page stops there, and goes on.
    assert [a.tool_call_id for a in page] == [refund] and position is not None
    page, position = await staff.page(OLGA, before=position, limit=10)
    assert page == [] and position is not None
    assert note_last != refund


async def test_the_feed_tells_staff_of_new_and_closed_approvals(make_client: Any) -> None:
    runtime = staff_runtime()
    client = await make_client(runtime)
    waiting = await park(runtime, SHOP_ALICE, "refund W-1")

    olga = await connect(client, token=token_for(OLGA))
    await olga.send({"type": "hello", "watch_approvals": True})
    frames = await olga.until(lambda f: f.get("type") == "approval-pending")
    assert frames[0]["type"] == "welcome" and frames[-1]["approval"]["tool_call_id"] == waiting
    otto = await connect(client, token=token_for(OTTO))
    await otto.hello(watch_approvals=True)

    # A new one: asked on this process (the observer wakes the feed) and seen at once.
    fresh = await park(runtime, SHOP_BOB, "refund W-2")
    frame = (await olga.until_type("approval-pending"))[-1]
    assert frame["approval"]["tool_call_id"] == fresh and frame["approval"]["requester"]["id"] == "bob"
    await runtime.decide(fresh, OLGA, approve=False, reason="not eligible")
    frame = (await olga.until_type("approval-closed"))[-1]
    assert frame == {"type": "approval-closed", "tool_call_id": fresh, "status": "rejected"}

    # Otto (another tenant) was told nothing: his next frame is the answer to his own request.
    await otto.send({"type": "cancel", "run_id": "nope", "id": "probe"})
    assert (await otto.recv())["id"] == "probe"
    await olga.ws.close()
    await otto.ws.close()


async def test_an_approval_asked_on_another_process_reaches_the_feed(make_client: Any) -> None:
    store = MemoryStore()
    watched, elsewhere = staff_runtime(store), staff_runtime(store)
    client = await make_client(watched)
    olga = await connect(client, token=token_for(OLGA))
    await olga.hello(watch_approvals=True)
    async with elsewhere:
        asked = await park(elsewhere, SHOP_ALICE, "refund X-1")
        frame = (await olga.until_type("approval-pending", timeout=5))[-1]
        assert frame["approval"]["tool_call_id"] == asked
        await elsewhere.decide(asked, OLGA)
        frame = (await olga.until_type("approval-closed", timeout=5))[-1]
        assert frame["status"] == "approved"
    await olga.ws.close()


async def test_only_staff_may_watch(make_client: Any) -> None:
    client = await make_client(staff_runtime())
    alice = await connect(client, token=token_for(ALICE))
    await alice.send({"type": "hello", "watch_approvals": True, "id": "h"})
    frames = await alice.until(lambda f: f.get("type") == "error")
    assert frames[-1]["code"] == "watch_forbidden" and frames[-1]["id"] == "h"
    # The session goes on as any other.
    done = await alice.turn("hello")
    assert done[-1]["status"] == "completed"
    await alice.ws.close()


async def test_the_console_is_for_staff_only(make_client: Any, refusals: RefusalLog) -> None:
    runtime = staff_runtime()
    client = await make_client(runtime)
    refund = await park(runtime, SHOP_ALICE, "refund C-1")
    refusals.caplog.clear()
    response = await client.get("/console")
    assert response.status == 401 and (await response.json())["code"] == "unauthenticated"
    refusals.one(401, "unauthenticated", route="/console")
    response = await client.get("/console?token=forged.token")
    assert response.status == 401
    refusals.one(401, "invalid_token", route="/console")
    response = await client.get(f"/console?token={token_for(SHOP_ALICE)}")
    assert response.status == 403 and (await response.json())["code"] == "console_forbidden"
    refusals.one(403, "console_forbidden", route="/console")
    response = await client.get("/console/runs", headers={"Authorization": f"Bearer {token_for(SHOP_ALICE)}"})
    assert response.status == 403

    response = await client.get(f"/console?token={token_for(OLGA)}")
    assert response.status == 200 and response.headers["Cache-Control"] == "no-store"
    page = await response.text()
    assert "Refund 30 EUR on order C-1?" in page and refund in page
    response = await client.get("/console/runs", headers={"Authorization": f"Bearer {token_for(OLGA)}"})
    runs = (await response.json())["runs"]
    assert [(r["requester"], r["status"]) for r in runs] == [("alice", "awaiting-approval")]
    response = await client.get("/console/runs", headers={"Authorization": f"Bearer {token_for(OTTO)}"})
    assert (await response.json())["runs"] == []  # another tenant's runs are not his


async def test_remember_is_refused_where_a_role_decides_on_http_and_the_socket(
    make_client: Any, refusals: RefusalLog
) -> None:
    runtime = staff_runtime()
    client = await make_client(runtime)
    refund = await park(runtime, SHOP_ALICE, "refund M-1")
    body = {"tool_call_id": refund, "remember": True}
    refusals.caplog.clear()
    response = await client.post(
        "/agent/tool-call/approve", json=body, headers={"Authorization": f"Bearer {token_for(OLGA)}"}
    )
    answer = await response.json()
    assert (response.status, answer["code"]) == (403, "remember_refused")
    assert "role 'staff' each time" in answer["message"]
    refusals.one(403, "remember_refused", route="/agent/tool-call/approve")
    olga = await connect(client, token=token_for(OLGA))
    await olga.hello()
    await olga.send({"type": "approve", "tool_call_id": refund, "remember": True, "id": "a1"})
    error = (await olga.until_type("error"))[-1]
    assert (error["code"], error["id"]) == ("remember_refused", "a1")
    pending = await runtime.get_approval(refund)
    assert pending is not None and pending.status == "pending"  # nothing was decided
    await olga.send({"type": "approve", "tool_call_id": refund, "id": "a2"})
    assert (await olga.until(lambda f: f.get("id") == "a2"))[-1]["status"] == "approved"
    await olga.ws.close()
