"""The full-page layout, and an app's own name, welcome, example prompts, accent colour and logo."""

from __future__ import annotations

from playwright.async_api import expect

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage, record_sent, widget_page

pytestmark = BROWSER_TESTS

LOGO = (
    "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 32'%3E"
    "%3Crect width='32' height='32' rx='8' fill='%230a7d5a'/%3E%3C/svg%3E"
)
BRANDED = f"""<agora-chat layout="page" title="Ava"
    welcome="Hi, I am Ava. I can track orders and answer billing questions."
    prompts='["Show my orders", "Weather in Lisbon", 42, ""]' accent="#0a7d5a" logo="{LOGO}"></agora-chat>"""


async def geometry(chat: Chat) -> dict[str, float]:
    box = await chat.root.bounding_box()
    assert box is not None
    panel = await chat.root.locator(".ac").evaluate(
        """el => { const s = getComputedStyle(el);
            return {radius: parseFloat(s.borderTopLeftRadius), border: parseFloat(s.borderTopWidth),
                    shadow: s.boxShadow}; }"""
    )
    return {**box, **panel}


async def test_the_page_layout_fills_the_viewport_without_panel_chrome(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    url = await make_gateway(pages={"/page": widget_page(BRANDED), "/panel": widget_page()})
    for width, height in ((1280, 800), (360, 740)):
        page = await open_page(url + "/page", width=width, height=height)
        chat = Chat(page)
        await chat.ready()
        shape = await geometry(chat)
        assert (shape["x"], shape["y"], shape["width"], shape["height"]) == (0, 0, width, height)
        assert (shape["radius"], shape["border"], shape["shadow"]) == (0, 0, "none")
        assert await page.evaluate("document.documentElement.scrollHeight") <= height, "the page does not scroll"
        # The whole chat on the first screen: heading, welcome, the examples and the message box.
        for part in (chat.root.locator(".ac-title"), chat.root.locator(".ac-empty"), chat.input, chat.send_button):
            await expect(part).to_be_in_viewport(ratio=1)
        # On a wide screen the conversation keeps a readable measure.
        if width > 1000:
            composer = await chat.root.locator(".ac-composer textarea").bounding_box()
            assert composer is not None and composer["width"] <= 800

    page = await open_page(url + "/panel")
    chat = Chat(page)
    await chat.ready()
    shape = await geometry(chat)
    assert shape["radius"] > 0 and shape["border"] == 1


async def test_branding_attributes(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    url = await make_gateway(pages={"/page": widget_page(BRANDED)})
    page = await open_page()
    sent = record_sent(page)
    await page.goto(url + "/page")
    chat = Chat(page)
    await chat.ready()

    await expect(chat.root.locator(".ac-title")).to_have_text("Ava")
    empty = chat.root.locator(".ac-empty")
    await expect(empty).to_contain_text("Hi, I am Ava. I can track orders and answer billing questions.")
    # The app's welcome wins over the demo's.
    await expect(empty).not_to_contain_text("rule-based")
    logo = chat.root.locator(".ac-header img")
    await expect(logo).to_have_attribute("src", LOGO)
    await expect(logo).to_be_visible()
    avatar = await chat.root.locator(".ac-avatar").evaluate(
        "el => getComputedStyle(el).getPropertyValue('--ac-accent')"
    )
    assert avatar.strip() == "#0a7d5a"
    # Only strings become example prompts; one sends when clicked.
    chips = chat.root.locator(".ac-prompts button")
    await expect(chips).to_have_text(["Show my orders", "Weather in Lisbon"])

    await chips.first.click()

    await chat.turn_ends(0)
    assert [f["text"] for f in sent if f["type"] == "send"] == ["Show my orders"]
    await expect(empty).to_be_hidden()
    user = await chat.user_messages.first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert user == "rgb(10, 125, 90)"

    # The attributes are observed: a colour that is not one is ignored, a new one applies.
    await chat.root.evaluate("el => el.setAttribute('accent', 'url(javascript:alert(1))')")
    user = await chat.user_messages.first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert user == "rgb(61, 79, 224)", "an invalid accent falls back to the default"
    await chat.root.evaluate("el => el.setAttribute('accent', 'rebeccapurple')")
    user = await chat.user_messages.first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert user == "rgb(102, 51, 153)"
    await chat.root.evaluate("el => { el.setAttribute('title', 'Ava 2'); el.removeAttribute('logo'); }")
    await expect(chat.root.locator(".ac-title")).to_have_text("Ava 2")
    await expect(logo).to_have_count(0)
    await chat.root.evaluate("""el => { el.newConversation(); el.setAttribute('prompts', '["Track parcel"]');
        el.setAttribute('welcome', 'Ask me about parcels.'); }""")
    await expect(chips).to_have_text(["Track parcel"])
    await expect(empty).to_contain_text("Ask me about parcels.")


async def test_components_take_the_widgets_accent_in_either_theme(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    url = await make_gateway(pages={"/page": widget_page(BRANDED), "/plain": widget_page()})
    # The invoice is a Document: its header's rule is drawn in the components' accent.
    for path, scheme, accent in (
        ("/page", "light", "rgb(10, 125, 90)"),
        ("/page", "dark", "rgb(10, 125, 90)"),
        ("/plain", "light", "rgb(61, 79, 224)"),  # the widget's own accent, not the stylesheet's
    ):
        page = await open_page(url + path, color_scheme=scheme)
        chat = Chat(page)
        await chat.ready()
        await chat.say("invoice for order 1042")
        await chat.turn_ends(0)
        header = chat.root.locator(".ac-ui .ag-document__header").first
        await expect(header).to_be_visible()
        drawn = await header.evaluate("el => getComputedStyle(el).borderBottomColor")
        assert drawn == accent, (path, scheme)
