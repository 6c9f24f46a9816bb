"""A 360 px phone: text that iOS does not zoom into, fingers-sized targets, tables that read."""

from __future__ import annotations

from playwright.async_api import expect

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, widget_page

pytestmark = BROWSER_TESTS

PHONE_PAGE = widget_page(
    """<agora-chat title="Coffee shop assistant" prompts='["Show my orders", "Refund order 1042"]'></agora-chat>""",
    style="body { margin: 0 } agora-chat { height: 100vh }",
)

# Every control of the widget a finger can reach now: its size.
TARGETS = """el => [...el.shadowRoot.querySelectorAll('button, summary, a[href], [role=button]')]
    .filter((n) => n.checkVisibility())
    .map((n) => { const r = n.getBoundingClientRect();
        return [n.getAttribute('aria-label') || n.textContent.trim(), Math.round(r.width), Math.round(r.height)]; })"""

# The number of lines each cell of a DataTable's "Date" column takes.
DATE_LINES = """el => {
    const table = el.shadowRoot.querySelector('.ac-ui[data-component=DataTable] table');
    const column = [...table.tHead.rows[0].cells].findIndex((th) => th.textContent.trim().toLowerCase() === 'date');
    return [...table.tBodies[0].rows].map((row) => {
        const range = document.createRange();
        range.selectNodeContents(row.cells[column]);
        return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
    });
}"""


async def test_a_phone_gets_16px_input_44px_targets_and_dates_on_one_line(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    url = await make_gateway(pages={"/phone": PHONE_PAGE})
    page = await open_page(url + "/phone", width=360, height=740)
    chat = Chat(page)
    await chat.ready()
    size = await chat.input.evaluate("el => parseFloat(getComputedStyle(el).fontSize)")
    assert size >= 16, "iOS zooms into a text box whose font is under 16 px"
    small = [t for t in await chat.root.evaluate(TARGETS) if t[1] < 44 or t[2] < 44]
    assert not small, f"targets under 44x44 px: {small}"

    await chat.say("show my orders")
    await chat.turn_ends(0)
    lines = await chat.root.evaluate(DATE_LINES)
    assert lines and set(lines) == {1}, f"date cells wrap: {lines}"
    await chat.say("refund order 1042")
    await chat.turn_ends(1, "awaiting-approval")
    await chat.approvals.first.scroll_into_view_if_needed()

    small = [t for t in await chat.root.evaluate(TARGETS) if t[1] < 44 or t[2] < 44]
    assert not small, f"targets under 44x44 px: {small}"
    await expect(chat.approvals.get_by_role("button", name="Refund")).to_be_visible()
    widths = await page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 360


async def test_the_demo_page_on_a_phone_shows_the_chat_on_the_first_screen(gateway: str, open_page: OpenPage) -> None:
    page = await open_page(gateway + "/", width=360, height=740)
    chat = Chat(page)
    await chat.ready()
    box = await chat.input.bounding_box()
    assert box is not None
    # Without scrolling: the message box is inside the first 740 px (the intro and its examples follow).
    assert 0 <= box["y"] and box["y"] + box["height"] <= 740, box
    assert await page.evaluate("window.scrollY") == 0
    prompts = page.locator(".prompts button")
    small = [
        b for b in [await prompts.nth(i).bounding_box() for i in range(await prompts.count())] if b and b["height"] < 44
    ]
    assert not small, f"example buttons under 44 px tall: {small}"
