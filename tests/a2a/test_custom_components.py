"""A custom component on A2A, through the real a2a-sdk client: a data part of its props, and a PNG of it on request.

The app is ``examples/product_card``; the PNG's pixels hold the product photo from its static folder.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from a2a.helpers import get_data_parts
from a2a.types import TaskState

from ..custom_components import ENOUGH_MUG, MUG_PROPS, PRODUCT, mug_pixels
from .conftest import collect, send_request


async def test_the_product_card_is_its_props_and_a_png_with_the_photo(make_gateway) -> None:
    gw = await make_gateway(app=PRODUCT.gateway)
    client = await gw.sdk(streaming=False)
    modes = ["text/plain", "application/json", "image/png"]
    [event] = await collect(client.send_message(send_request("show me the mug", modes=modes)), timeout=60)
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [card] = [a for a in task.artifacts if a.name == "ProductCard"]
    assert get_data_parts(list(card.parts)) == [MUG_PROPS]
    [picture] = [p for p in card.parts if p.url]
    assert picture.media_type == "image/png" and picture.filename == "productcard-1.png"
    answer = await gw.http().get(gw.base_url + urlsplit(picture.url).path)
    assert answer.status_code == 200 and mug_pixels(answer.content) > ENOUGH_MUG
    await client.close()


async def test_a_caller_that_takes_only_text_gets_the_cards_text_form(make_gateway) -> None:
    gw = await make_gateway(app=PRODUCT.gateway)
    client = await gw.sdk(streaming=False)
    [event] = await collect(client.send_message(send_request("show me the mug", modes=["text/plain"])))
    [card] = [a for a in event.task.artifacts if a.name == "ProductCard"]
    assert [p.text for p in card.parts] == ["**Lisbon tile mug** · New\n€14.50"]
    await client.close()
