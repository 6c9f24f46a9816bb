"""A custom component on AG-UI: a ``CUSTOM agora.ui`` event carrying its props (read with ``ag_ui.core``).

The app is ``examples/product_card``. A client that declares the component draws it from the
props; one that declares nothing gets the card's own text form beside them.
"""

from __future__ import annotations

from ag_ui.core import CustomEvent, RunFinishedEvent

from ..custom_components import MUG_PROPS, MUG_TEXT, PRODUCT
from .conftest import MakeClient, new_id, of_type, run, run_input


async def test_the_product_card_is_its_props_and_the_client_draws_it(make_client: MakeClient) -> None:
    client = await make_client(gateway=PRODUCT.gateway)
    native = {"uiCapabilities": {"components": [{"name": "ProductCard", "version": 1}], "formats": ["text"]}}
    frames = await run(client, run_input(new_id("t"), "show me the mug", forwarded_props=native))
    [ui] = [f.event for f in of_type(frames, "CUSTOM") if f.data["name"] == "agora.ui"]
    assert isinstance(ui, CustomEvent)
    assert ui.value["component"] == "ProductCard" and ui.value["version"] == 1
    assert ui.value["props"] == MUG_PROPS and ui.value["form"] == "props"
    assert ui.value["fallbackText"] == MUG_TEXT
    assert isinstance(frames[-1].event, RunFinishedEvent)


async def test_a_client_that_declares_nothing_gets_the_props_and_the_text_form(make_client: MakeClient) -> None:
    client = await make_client(gateway=PRODUCT.gateway)
    frames = await run(client, run_input(new_id("t"), "show me the mug"))
    [ui] = [f.event for f in of_type(frames, "CUSTOM") if f.data["name"] == "agora.ui"]
    assert isinstance(ui, CustomEvent)
    assert ui.value["props"] == MUG_PROPS
    assert (ui.value["form"], ui.value["fallbackText"]) == ("text", MUG_TEXT)
