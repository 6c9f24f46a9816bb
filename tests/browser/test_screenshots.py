"""Screenshots of the demo page after a conversation with a table, a chart and an approval.

They land in docs/screenshots/ (desktop 1280x800 and a 360 px phone, light and dark; the full-page
layout on both; an opened tool line), and the tests check what they show is on screen. A picture
that only differs from the saved one by anti-aliasing is not rewritten.
"""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, ImageChops
from playwright.async_api import Page, expect

from .conftest import BROWSER_TESTS, SCREENSHOTS, Chat, MakeGateway, OpenPage, widget_page

pytestmark = BROWSER_TESTS


def same_picture(png: bytes, path: Path) -> bool:
    """Whether ``png`` shows what ``path`` shows, give or take anti-aliasing (a few levels)."""
    if not path.exists():
        return False
    with Image.open(io.BytesIO(png)) as new, Image.open(path) as old:
        if new.size != old.size:
            return False
        _, high = ImageChops.difference(new.convert("RGB"), old.convert("RGB")).convert("L").getextrema()
        return high <= 12


async def shoot(page: Page, name: str) -> None:
    """Save a screenshot, unless the one on disk already shows the same (no churn in git)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    png = await page.screenshot(animations="disabled", caret="hide")
    if not same_picture(png, path):
        path.write_bytes(png)


async def test_screenshots_desktop_and_phone_light_and_dark(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway, width=1280, height=800)
    chat = Chat(page)
    await chat.ready()
    # The example prompts on the page drive the conversation.
    for index, prompt in enumerate(["show my orders", "sales this month"]):
        await page.get_by_role("button", name=prompt).click()
        await chat.turn_ends(index)
    await page.get_by_role("button", name="refund order 1042").click()
    await chat.turn_ends(2, "awaiting-approval")
    table = chat.root.locator(".ac-ui[data-component=DataTable]")
    chart = chat.root.locator(".ac-ui[data-component=Chart]")
    card = chat.approvals.first
    await page.mouse.move(1, 1)  # no hover effects in the pictures

    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await page.set_viewport_size({"width": 1280, "height": 800})
        assert await page.evaluate("document.documentElement.scrollHeight") <= 800, "the desktop page does not scroll"
        await chat.log.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        await expect(card).to_be_in_viewport()
        await expect(chart).to_be_in_viewport(ratio=0.5)
        await shoot(page, f"desktop-{scheme}")
        await table.scroll_into_view_if_needed()
        await chat.log.evaluate("el => { el.scrollTop -= 70; }")
        await expect(table).to_be_in_viewport(ratio=0.9)
        await shoot(page, f"desktop-{scheme}-table")

        await page.set_viewport_size({"width": 360, "height": 780})
        await page.locator("#chat").evaluate("el => el.scrollIntoView({block: 'end'})")
        await chat.log.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        await expect(card).to_be_in_viewport()
        await shoot(page, f"mobile-{scheme}")
        await table.evaluate("el => el.scrollIntoView({block: 'center'})")
        await expect(table).to_be_in_viewport(ratio=0.8)
        await shoot(page, f"mobile-{scheme}-table")

    for name in ("desktop-light", "desktop-dark", "mobile-light", "mobile-dark"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000


PAGE_LAYOUT = widget_page(
    """<agora-chat layout="page" title="Coffee shop assistant"
        welcome="Ask about your orders, sales or the weather. Anything that changes something waits for your approval."
        prompts='["Show my orders", "Sales this month", "Refund order 1042"]'></agora-chat>"""
)


async def test_screenshots_of_the_page_layout_and_an_expanded_tool_line(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    url = await make_gateway(pages={"/chat-page": PAGE_LAYOUT})
    # A phone's first screen: the whole chat, its welcome and its examples.
    phone = await open_page(url + "/chat-page", width=360, height=740)
    chat = Chat(phone)
    await chat.ready()
    await expect(chat.root.locator(".ac-prompts")).to_be_in_viewport(ratio=1)
    await shoot(phone, "page-phone-light")

    page = await open_page(url + "/chat-page", width=1280, height=800)
    chat = Chat(page)
    await chat.ready()
    await chat.root.locator(".ac-prompts").get_by_role("button", name="Sales this month").click()
    turn = await chat.turn_ends(0)
    await chat.say("show my orders")
    await chat.turn_ends(1)
    await expect(chat.root.locator(".ac-thread__title")).to_have_text(["Sales this month"])  # the list beside it
    await page.mouse.move(1, 1)
    for scheme in ("light", "dark"):
        await page.emulate_media(color_scheme=scheme)
        await chat.log.evaluate("el => { el.scrollTop = el.scrollHeight; }")
        await shoot(page, f"page-desktop-{scheme}")

    # The sales report's tool line, opened: the arguments and the narrated result.
    await page.emulate_media(color_scheme="light")
    await turn.locator(".ac-tool__toggle").click()
    details = turn.locator(".ac-tool-details")
    await expect(details).to_be_visible()
    await turn.locator(".ac-tool").evaluate("el => el.scrollIntoView({block: 'start'})")
    await chat.log.evaluate("el => { el.scrollTop -= 60; }")
    await expect(details).to_be_in_viewport(ratio=1)
    await page.mouse.move(1, 1)
    await shoot(page, "tool-details-light")

    for name in ("page-phone-light", "page-desktop-light", "page-desktop-dark", "tool-details-light"):
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 10_000
