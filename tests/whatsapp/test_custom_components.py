"""A custom component on WhatsApp (Twilio): a PNG whose pixels hold the app's product photo.

The app is ``examples/product_card``; its card's photo is read from the app's static folder by
the render worker, on disk. A component whose template fails is sent as its text form, and the
failure is logged once.
"""

from __future__ import annotations

import logging

import pytest

from ..custom_components import ENOUGH_MUG, PRODUCT, broken_app, broken_lines, mug_pixels
from .conftest import MEDIA, PUBLIC, MakeGateway


async def test_the_product_card_is_an_image_with_the_photo_and_its_text_as_caption(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(app=PRODUCT.gateway, options=MEDIA)
    await gw.say("show me the mug")
    await gw.http.wait_for(lambda h: "Here it is." in h.bodies(), timeout=60)
    await gw.settle()
    [card] = [r for r in gw.http.messages() if "MediaUrl" in r.data]
    assert card.data["Body"] == "*Lisbon tile mug* · New\n€14.50"  # the card's own text form, as WhatsApp bold
    (url,) = card.data["MediaUrl"]
    assert url.startswith(f"{PUBLIC}/media/")
    media = await gw.client.get(url.removeprefix(PUBLIC))
    assert media.status == 200 and media.content_type == "image/png"
    assert mug_pixels(await media.read()) > ENOUGH_MUG


async def test_a_failing_template_is_sent_as_its_text_and_logged_once(
    make_gateway: MakeGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    gw = await make_gateway(app=broken_app(), options=MEDIA)
    for turn in range(1, 3):
        await gw.say("UndefinedCard")
        await gw.http.wait_for(lambda h, n=turn: h.bodies().count("Shown.") == n, timeout=30)
    await gw.settle()
    assert gw.http.bodies().count("Card x (as text)") == 2
    assert not [r for r in gw.http.messages() if "MediaUrl" in r.data]
    [line] = broken_lines(caplog.records, "UndefinedCard")
    assert line.exc_info is None and "BrokenProps object' has no attribute 'nope'" in line.getMessage()
