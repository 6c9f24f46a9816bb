"""The widget embedded in another app's page: endpoint, token, fixed thread and title attributes.

The page loads the widget with a classic script from the gateway (a module script would need CORS
headers on ``/static/``, which the gateway does not send).
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import expect

from gateway import sign_actor_token
from tools import Actor

from .conftest import BROWSER_TESTS, SECRET, Chat, MakeGateway, OpenPage

pytestmark = BROWSER_TESTS

RECORD_EVENTS = """
    window.__agora = [];
    for (const type of ['agora-welcome', 'agora-error', 'agora-status'])
        document.addEventListener(type, (event) => window.__agora.push([type, event.detail]));
"""


def app_page(gateway: str, token: str) -> str:
    endpoint = gateway.replace("http://", "ws://") + "/agent/ws"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Orders · Example app</title>
<link rel="icon" href="data:,">
<script src="{gateway}/static/agora-chat.js" defer></script></head>
<body style="margin:0;padding:24px;font-family:sans-serif">
<h1>Example app</h1>
<agora-chat style="height:560px;max-width:420px" title="Support" thread="support-alice-1"
    endpoint="{endpoint}" token="{token}"></agora-chat>
</body></html>"""


async def test_an_app_on_another_origin_embeds_the_widget_with_a_token_and_a_fixed_thread(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    # The embedding app: its own server on another port (another origin) serving one page.
    gateway_url: list[str] = []

    async def app_home(request: web.Request) -> web.Response:
        return web.Response(text=app_page(gateway_url[0], "not-a-token"), content_type="text/html")

    app = web.Application()
    app.router.add_get("/", app_home)
    app_server = TestServer(app, host="127.0.0.1")
    await app_server.start_server()
    try:
        app_origin = f"http://127.0.0.1:{app_server.port}"
        gateway_url.append(await make_gateway(allowed_origins=[app_origin]))
        await check_the_embedded_widget(open_page, app_origin, gateway_url[0])
    finally:
        await app_server.close()


async def check_the_embedded_widget(open_page: OpenPage, app_origin: str, gateway: str) -> None:
    page = await open_page()
    await page.add_init_script(RECORD_EVENTS)
    await page.goto(app_origin)
    chat = Chat(page)

    # A bad token: the gateway closes the socket; the widget says so and waits for a new token.
    await expect(chat.root.locator(".ac-banner")).to_contain_text("signed out")
    await expect(chat.root.locator(".ac-status")).to_have_attribute("data-state", "offline")
    errors = [detail["code"] for kind, detail in await page.evaluate("window.__agora") if kind == "agora-error"]
    assert errors == ["invalid_token", "unauthenticated"]

    token = sign_actor_token(Actor(id="alice", roles=["member"]), SECRET, 600)
    await chat.root.evaluate("(el, token) => el.setAttribute('token', token)", token)

    await chat.ready()
    await expect(chat.root.locator(".ac-banner")).to_be_hidden()
    welcome = next(detail for kind, detail in await page.evaluate("window.__agora") if kind == "agora-welcome")
    assert welcome["actor"]["id"] == "alice" and welcome["thread_id"] == "support-alice-1"
    assert welcome["demo"] is True
    # The title heads the panel; the attribute leaves the host, where it would be a tooltip.
    await expect(chat.root.locator(".ac-title")).to_have_text("Support")
    assert await chat.root.get_attribute("title") is None
    assert await chat.root.evaluate("el => el.title") == "Support"
    # The stylesheets come from the gateway, beside the script.
    assert await chat.root.locator(".ac").evaluate("el => getComputedStyle(el).visibility") == "visible"

    await chat.say("show my orders")

    await chat.turn_ends(0)
    await expect(chat.root.locator(".ac-ui[data-component=DataTable] .ag-table")).to_contain_text("1042")
    endpoint = gateway.replace("http://", "ws://") + "/agent/ws"
    # Saved (a moment later) under the endpoint and the fixed thread.
    await page.wait_for_function("() => localStorage.length > 0")
    assert await page.evaluate("Object.keys(localStorage)") == [f"agora-chat:v1:{endpoint}#support-alice-1"]
