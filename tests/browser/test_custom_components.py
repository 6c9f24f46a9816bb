"""A custom component in the widget on another origin's page: its photo loads from the gateway, its CSS applies.

The app is ``examples/product_card``. The card's ``<img src="/assets/product.png">`` names the
gateway's static folder: on a host page of another origin the widget must point it at the
gateway, not at the host.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import expect

from gateway import sign_actor_token
from tools import Actor

from ..custom_components import PRODUCT
from .conftest import BROWSER_TESTS, SECRET, Chat, MakeGateway, OpenPage

pytestmark = BROWSER_TESTS

LOADED = (
    "img => img.complete ? img.naturalWidth"
    " : new Promise(done => img.addEventListener('load', () => done(img.naturalWidth)))"
)


def host_page(gateway: str, token: str) -> str:
    endpoint = gateway.replace("http://", "ws://") + "/agent/ws"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop</title><link rel="icon" href="data:,">
<script src="{gateway}/static/agora-chat.js" defer></script></head>
<body><agora-chat style="height:640px;max-width:420px" endpoint="{endpoint}" token="{token}"></agora-chat>
</body></html>"""


async def test_the_product_card_shows_its_photo_and_its_own_styles(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    pages: list[str] = []

    async def home(request: web.Request) -> web.Response:
        return web.Response(text=pages[0], content_type="text/html")

    host = web.Application()
    host.router.add_get("/", home)
    server = TestServer(host, host="127.0.0.1")
    await server.start_server()
    try:
        origin = f"http://127.0.0.1:{server.port}"
        gateway = await make_gateway(app=PRODUCT.gateway, allowed_origins=[origin])
        pages.append(host_page(gateway, sign_actor_token(Actor(id="alice", roles=["member"]), SECRET, 600)))
        page = await open_page(origin)
        chat = Chat(page)
        await chat.ready()
        await chat.say("show me the mug")
        await chat.turn_ends(0)
        card = chat.root.locator(".ac-ui[data-component=ProductCard] .ag-product")
        await expect(card.locator(".ag-product__name")).to_have_text("Lisbon tile mug")
        photo = card.locator("img.ag-product__image")
        assert await photo.get_attribute("src") == f"{gateway}/assets/product.png"
        assert await photo.evaluate(LOADED) == 640  # the photo's own width: it loaded
        badge = card.locator(".ag-product__badge")
        assert await badge.evaluate("el => getComputedStyle(el).backgroundColor") == "rgb(30, 41, 59)"
    finally:
        await server.close()
