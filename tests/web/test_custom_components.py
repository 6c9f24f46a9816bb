"""A custom component on the web socket: HTML in the ``ui`` frame, its photo and stylesheet served by the gateway.

The app is ``examples/product_card``. A component whose template fails reaches the socket as its
text form, the socket keeps working, and the failure is logged once per component.
"""

from __future__ import annotations

import logging
import re

import pytest

from ..custom_components import BROKEN, MUG_TEXT, PHOTO, PRODUCT, broken_app, broken_lines
from .conftest import ALICE, connect, token_for


async def test_the_product_card_arrives_as_html_whose_photo_the_gateway_serves(make_client) -> None:
    client = await make_client(app=PRODUCT.gateway)
    socket = await connect(client, token=token_for(ALICE))
    await socket.hello()
    frames = await socket.turn("show me the mug")
    [ui] = [f for f in frames if f["type"] == "ui"]
    assert ui["component"] == "ProductCard" and ui["form"] == "html"
    html = ui["html"]
    assert '<div class="ag-c ag-product">' in html and '<span class="ag-product__badge">New</span>' in html
    assert '<h3 class="ag-product__name">Lisbon tile mug</h3>' in html and "€14.50" in html
    [src] = re.findall(r'<img class="ag-product__image" src="([^"]+)" alt="Lisbon tile mug">', html)
    assert src == "/assets/product.png"

    photo = await client.get(src)
    assert photo.status == 200 and photo.content_type == "image/png"
    assert await photo.read() == PHOTO

    css = await client.get("/static/components.css")
    stylesheet = await css.text()
    assert css.status == 200 and ".ag-c {" in stylesheet  # the built-in rules, then the card's own
    assert stylesheet.index(".ag-c {") < stylesheet.index("/* ProductCard */") < stylesheet.index(".ag-product__image")
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"


async def test_the_static_folder_serves_nothing_outside_it(make_client) -> None:
    client = await make_client(app=PRODUCT.gateway)
    for path in ("/assets/%2e%2e/app.py", "/assets/..%2fapp.py", "/assets/nope.png"):
        response = await client.get(path)
        assert response.status in (403, 404), path
        assert b"PRODUCT_CARD" not in await response.read()


@pytest.mark.parametrize("component", sorted(BROKEN))
async def test_a_failing_template_is_its_text_form_and_one_log_line(
    make_client, caplog: pytest.LogCaptureFixture, component: str
) -> None:
    caplog.set_level(logging.INFO)
    client = await make_client(app=broken_app())
    socket = await connect(client, token=token_for(ALICE))
    welcome = await socket.hello()
    for _ in range(2):
        frames = await socket.turn(component)
        [ui] = [f for f in frames if f["type"] == "ui"]
        assert (ui["form"], ui["text"]) == ("text", "Card x (as text)")
        assert "html" not in ui
        assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"
    # A second socket replays the thread: the component is drawn again, and fails again, quietly.
    again = await connect(client, token=token_for(ALICE))
    await again.hello(thread_id=welcome["thread_id"], after_seq=0)
    replayed = await again.until(lambda f: f["type"] == "ui")
    assert replayed[-1]["form"] == "text"
    # The socket still works: a good component after the broken one is drawn.
    frames = await socket.turn("ProductCard")
    [good] = [f for f in frames if f["type"] == "ui"]
    assert good["form"] == "html" and "ag-product" in good["html"]

    [line] = broken_lines(caplog.records, component)
    message = line.getMessage()
    assert line.levelno == logging.ERROR and line.exc_info is None and "\n" not in message
    assert f"Template of {component} failed" in message and "text form" in message and "logged once" in message
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r is not line], [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
    ]


async def test_the_text_form_a_text_only_client_gets_is_the_cards_own(make_client) -> None:
    client = await make_client(app=PRODUCT.gateway)
    socket = await connect(client, token=token_for(ALICE))
    await socket.hello(ui_capabilities={"formats": ["text"]})
    frames = await socket.turn("show me the mug")
    [ui] = [f for f in frames if f["type"] == "ui"]
    assert (ui["form"], ui["text"]) == ("text", MUG_TEXT)
