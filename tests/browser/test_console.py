"""The staff console in Chromium: a WhatsApp customer's refund, decided by staff from ``GET /console``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio
from aiohttp.test_utils import TestServer
from playwright.async_api import expect
from twilio.rest import Client

from channels.web import WebChannel
from channels.whatsapp import WhatsAppChannel
from gateway import Agent, ApprovalPolicy, ApprovalRule, Runtime, create_app, sign_actor_token
from gateway.demo import DemoModel, demo_tools
from gateway.events import ToolCompletedEvent
from tools import Actor

from ..whatsapp.conftest import (
    ACCOUNT_SID,
    ALICE,
    AUTH_TOKEN,
    FAST,
    INBOUND_URL,
    PUBLIC,
    SECRET,
    RecordingHttp,
    channel_options,
    inbound,
    settings,
    sign,
    thread_of,
)
from .conftest import BROWSER_TESTS, SCREENSHOTS, OpenPage

pytestmark = BROWSER_TESTS

OLGA = Actor(id="olga", roles=["staff"])
"""Staff: she decides refunds (the customer's tenant: none, as WhatsApp's)."""


class Shop:
    """A gateway with WhatsApp (recording Twilio) whose refunds need role ``staff``, on a loopback port."""

    def __init__(self) -> None:
        self.http = RecordingHttp()
        self.runtime = Runtime(
            tools=demo_tools(SECRET.encode()),
            agents=[Agent(name="assistant", instructions="Demo.")],
            model=DemoModel(),
            approval_policy=ApprovalPolicy(rules={"refund_order": ApprovalRule(approver="staff")}),
        )
        twilio, senders = channel_options()
        channel = WhatsAppChannel(
            twilio, senders=senders, twilio_client=Client(ACCOUNT_SID, AUTH_TOKEN, http_client=self.http), options=FAST
        )
        self.server = TestServer(
            create_app(settings(), runtime=self.runtime, channels=[WebChannel(), channel]), host="127.0.0.1"
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    async def customer_says(self, text: str) -> None:
        """A WhatsApp message of the customer, signed as Twilio signs it."""
        fields = inbound(text, number=ALICE)
        async with aiohttp.ClientSession() as session:
            response = await session.post(
                f"{self.url}/channels/whatsapp", data=fields, headers=sign(INBOUND_URL, fields)
            )
            assert response.status == 200

    def to_customer(self) -> list[str]:
        return [str(r.data["Body"]) for r in self.http.messages() if "Body" in r.data]

    async def refunds(self) -> list[ToolCompletedEvent]:
        events = [e async for e in self.runtime.events(thread_of(ALICE))]
        return [e for e in events if isinstance(e, ToolCompletedEvent) and e.tool == "refund_order"]


@pytest_asyncio.fixture(loop_scope="session")
async def shop() -> AsyncIterator[Shop]:
    made = Shop()
    await made.server.start_server()
    try:
        yield made
    finally:
        await made.server.close()
        await made.runtime.aclose()


async def test_staff_approve_a_whatsapp_refund_from_the_console(shop: Shop, open_page: OpenPage) -> None:
    assert PUBLIC.startswith("https://")  # the webhook's signed URL; the server itself is on loopback
    page = await open_page(f"{shop.url}/console?token={sign_actor_token(OLGA, SECRET)}")
    await expect(page.locator("#connection")).to_have_text("Live")
    assert "token=" not in page.url  # dropped from the address bar
    await expect(page.locator("#no-approvals")).to_be_visible()

    # The customer asks on WhatsApp: the console shows it live, announced politely.
    await shop.customer_says("refund order 1042")
    card = page.locator(".ac-approval")
    await expect(card).to_have_count(1)
    await expect(card.locator("h3")).to_have_text("Refund €129.00 for order 1042?")
    await expect(card).to_contain_text(f"whatsapp:{ALICE}")
    await expect(card).to_contain_text("whatsapp")
    await expect(page.locator("#announcer")).to_contain_text("New approval waiting: Refund €129.00 for order 1042?")
    await expect(page.locator("#approval-count")).to_have_text("1")
    await expect(page.locator("#run-rows .ac-status")).to_have_text(["awaiting-approval"])  # type: ignore[arg-type]
    await shop.http.wait_for(lambda h: bool(shop.to_customer()))
    assert shop.to_customer() == ["Waiting for a person at Assistant to approve: Refund €129.00 for order 1042?"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / "console.png"), full_page=True)

    # By keyboard: the approve button (titled with the verb) takes focus, Enter decides.
    approve = card.get_by_role("button", name="Refund")
    await approve.focus()
    await expect(approve).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(card).to_have_count(0)
    await expect(page.locator("#no-approvals")).to_be_visible()
    await expect(page.locator("#announcer")).to_contain_text("Refund €129.00 for order 1042?: approved")
    await expect(page.locator("#run-rows .ac-status").first).to_have_text("completed")

    # The customer's run completed once; they were told who decided, then the outcome.
    await shop.http.wait_for(lambda h: any(b.startswith("Done:") for b in shop.to_customer()), timeout=30)
    said = shop.to_customer()
    assert said[:3] == [
        "Waiting for a person at Assistant to approve: Refund €129.00 for order 1042?",
        "A person at Assistant approved: Refund €129.00 for order 1042?",
        "✓ Refunded order 1042",
    ]
    assert len(await shop.refunds()) == 1
    assert [r.status for r in await shop.runtime.thread_runs(thread_of(ALICE))] == ["completed"]


async def test_a_rejection_with_a_reason_from_the_console(shop: Shop, open_page: OpenPage) -> None:
    await shop.customer_says("refund order 1042")
    page = await open_page(f"{shop.url}/console?token={sign_actor_token(OLGA, SECRET)}", color_scheme="dark")
    card = page.locator(".ac-approval")
    await expect(card).to_have_count(1)  # rendered with the page
    await card.get_by_role("button", name="Reject…").click()
    reason = card.get_by_label("Reason (the requester is told)")
    await expect(reason).to_be_focused()
    await reason.fill("Outside the return window")
    await card.get_by_role("button", name="Reject", exact=True).click()
    await expect(card).to_have_count(0)
    await shop.http.wait_for(lambda h: any("declined" in b for b in shop.to_customer()), timeout=30)
    assert "A person at Assistant declined: Refund €129.00 for order 1042? (Outside the return window)" in (
        shop.to_customer()
    )
    assert await shop.refunds() == []
