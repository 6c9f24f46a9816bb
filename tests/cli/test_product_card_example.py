"""``agora-gateway serve --app examples.product_card.app:gateway`` from the repository root, as its README says."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp

from ..custom_components import PHOTO
from .test_serve import serving


async def test_the_example_serves_its_card_photo_and_stylesheet() -> None:
    async with serving("--app", "examples.product_card.app:gateway") as (process, port, line):
        assert "app: examples.product_card.app:gateway" in line and "model: product-card-offline" in line
        assert process.stdout is not None
        tools_line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 10)
        assert tools_line.strip() == "agent shop: 1 tool: show_product"
        base = f"http://127.0.0.1:{port}"
        frames: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"{base}/agent/ws") as ws:
                await ws.send_json({"type": "hello"})
                async with asyncio.timeout(20):
                    while (await ws.receive_json())["type"] != "welcome":
                        pass
                    await ws.send_json({"type": "send", "text": "show me the mug"})
                    while not frames or frames[-1]["type"] != "run-finished":
                        frames.append(await ws.receive_json())
            [ui] = [frame for frame in frames if frame["type"] == "ui"]
            assert ui["component"] == "ProductCard" and ui["form"] == "html"
            [src] = re.findall(r'<img class="ag-product__image" src="([^"]+)"', ui["html"])
            async with session.get(base + src) as photo:
                assert photo.status == 200 and await photo.read() == PHOTO
            async with session.get(f"{base}/static/components.css") as css:
                assert ".ag-product__badge" in await css.text()
            async with session.get(f"{base}/") as home:
                assert "Tile &amp; Clay shop" in await home.text()
        said = "".join(frame.get("delta", "") for frame in frames if frame["type"] == "text-delta")
        assert said == "Here it is." and frames[-1]["status"] == "completed"
