"""Who decided, after a reload; a conversation the server lost (an in-memory gateway restarted)."""

from __future__ import annotations

from typing import Any

import aiohttp
from playwright.async_api import expect
from pydantic import BaseModel

from gateway import ApprovalPolicy, ApprovalRule, Runtime, sign_actor_token
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore
from tools import Actor, ConfirmTemplate, ToolPresentation, define_tool

from .conftest import BROWSER_TESTS, SECRET, Chat, MakeGateway, OpenPage, stored, widget_page

pytestmark = BROWSER_TESTS

# Holds every frame the page sends until `window.__release()`: the cached transcript is on screen
# while the server has not said who the person is yet.
HOLD_HELLO = """
    let release;
    const held = new Promise((resolve) => { release = resolve; });
    window.__release = release;
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) { held.then(() => send.call(this, data)); };
"""


async def test_after_a_reload_your_own_decision_reads_you_and_no_id_is_shown(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway)
    chat = Chat(page)
    await chat.ready()
    await chat.say("refund order 1041")
    await chat.turn_ends(0, "awaiting-approval")
    await chat.approvals.get_by_role("button", name="Reject").click()
    outcome = chat.approvals.locator(".ac-approval__outcome")
    await expect(outcome).to_have_text("Rejected by you.")
    await chat.turn_ends(0)
    await stored(page, 2)
    await page.add_init_script(HOLD_HELLO)

    await page.reload()

    # Drawn from the cache before the server names anyone: still "you".
    await expect(outcome).to_have_text("Rejected by you.")
    await expect(chat.root.locator(".ac-status")).to_have_attribute("data-state", "connecting")
    assert "anon:" not in await chat.shown()
    await page.evaluate("window.__release()")
    await chat.ready()
    await expect(outcome).to_have_text("Rejected by you.")
    assert "anon:" not in await chat.shown()


class _KeyInput(BaseModel):
    key: str


def _staff_approved_runtime() -> Runtime:
    """``purge`` waits for someone of the ``ops`` role (not the person asking) to decide."""

    @define_tool(
        name="purge",
        description="Purge a cache key.",
        input=_KeyInput,
        kind="action",
        presentation=ToolPresentation(done="Purged {key}", confirm=ConfirmTemplate(title="Purge {key}?", verb="Purge")),
    )
    async def purge(input: _KeyInput, ctx: Any) -> dict[str, str]:
        return {"purged": input.key}

    def script(request: Any, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="purge", args={"key": "k1"})])
        return ScriptStep(text="Purged.")

    runtime = Runtime(tools=[purge], model=ScriptedModel(script), store=MemoryStore())
    runtime.approval_policy = ApprovalPolicy(rules={"purge": ApprovalRule(approver="ops")})
    return runtime


async def test_a_decision_by_someone_else_names_nobody(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    alice = sign_actor_token(Actor(id="alice-7f3a", roles=["member"]), SECRET, 600)
    olga = sign_actor_token(Actor(id="olga-91c2", roles=["ops"]), SECRET, 600)
    url = await make_gateway(_staff_approved_runtime(), pages={"/app": widget_page(f'<agora-chat token="{alice}">')})
    page = await open_page(url + "/app")
    chat = Chat(page)
    await chat.ready()
    await chat.say("purge k1")
    await chat.turn_ends(0, "awaiting-approval")
    card = chat.approvals.first
    call_id = await card.get_attribute("data-tool-call-id")

    async with aiohttp.ClientSession() as http:
        answer = await http.post(
            f"{url}/agent/tool-call/approve",
            json={"tool_call_id": call_id},
            headers={"Authorization": f"Bearer {olga}"},
        )
        assert answer.status == 200, await answer.text()

    await expect(card.locator(".ac-approval__outcome")).to_have_text("Approved by someone else.")
    await chat.turn_ends(0)
    shown = await chat.shown()
    assert "olga" not in shown and "alice" not in shown


async def test_a_conversation_the_restarted_gateway_lost_is_said_so_and_kept_read_only(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    url = await make_gateway()  # the embedded demo: an in-memory store
    page = await open_page(url)
    chat = Chat(page)
    await chat.ready()
    await chat.say("weather in Lisbon")
    await chat.turn_ends(0)
    await chat.say("refund order 1042")
    await chat.turn_ends(1, "awaiting-approval")
    await stored(page, 2)

    # The same gateway, restarted (while the page is away: a reconnect in between would be refused).
    await page.goto("about:blank")
    await make_gateway.stop(url)
    await make_gateway(port=int(url.rsplit(":", 1)[1]))
    await page.goto(url)

    await chat.ready()
    lost = chat.root.locator(".ac-lost")
    await expect(lost).to_have_count(1)
    await expect(lost).to_contain_text("could not be restored")
    await expect(lost).to_contain_text("restarted")
    await expect(lost).to_have_attribute("role", "note")
    # What was on screen stays, read-only: the approval can no longer be given.
    await expect(chat.user_texts).to_have_text(["weather in Lisbon", "refund order 1042"])
    await expect(chat.components).to_have_count(1)
    await expect(chat.approvals.get_by_role("button")).to_have_count(0)
    await expect(chat.approvals.locator(".ac-approval__outcome")).to_contain_text("can no longer be decided")
    assert "Needs your approval" not in (await chat.approvals.first.text_content() or "")

    # New messages go to a new conversation, under the notice.
    await chat.say("show my orders")
    await chat.turn_ends(2)
    await expect(chat.root.locator(".ac-ui[data-component=DataTable]")).to_have_count(1)
    before = await chat.transcript()

    await page.reload()
    await chat.ready()

    # Said once: a reload shows the same page, and no second notice.
    await expect(lost).to_have_count(1)
    assert await chat.transcript() == before
