"""A custom component on WhatsApp through the Cloud API: an uploaded PNG whose pixels hold the app's photo."""

from __future__ import annotations

from channels.whatsapp import DeliveryOptions
from tools import UiCapabilities

from ..custom_components import ENOUGH_MUG, PRODUCT, mug_pixels
from . import payloads as p
from .conftest import MakeCloud

MEDIA = DeliveryOptions(
    slow_after=0.05, lock_retry=0.01, redeliver_after=0.02, max_rounds=3, capabilities=UiCapabilities(formats=["image"])
)


async def test_the_product_card_is_uploaded_as_an_image_with_the_photo(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(app=PRODUCT.gateway, delivery=MEDIA)
    await cloud.say("show me the mug")
    await cloud.graph.wait_for(lambda g: "Here it is." in g.texts(), timeout=60)
    await cloud.settle()
    (upload,) = cloud.graph.uploads()
    file = upload.parts["file"]
    assert file.content_type == "image/png" and mug_pixels(file.value) > ENOUGH_MUG
    (image,) = [r.json for r in cloud.graph.messages() if r.json and r.json["type"] == "image"]
    assert image["to"] == p.ALICE and image["image"]["caption"] == "*Lisbon tile mug* · New\n€14.50"
