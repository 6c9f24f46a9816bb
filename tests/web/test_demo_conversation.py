"""A whole demo conversation over the web socket, with the embedded demo model and tools."""

from __future__ import annotations

from typing import Any

from yarl import URL

from .conftest import ALICE, connect, token_for


def of_type(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in frames if f.get("type") == kind]


async def test_the_demo_conversation_end_to_end(make_client: Any) -> None:
    client = await make_client()
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello()
    assert welcome["actor"]["id"] == "alice" and welcome["demo"] is True
    thread_id = welcome["thread_id"]

    # A read tool with a server-rendered card.
    frames = await ws.turn("What's the weather in Lisbon?")
    started = of_type(frames, "tool-started")[0]
    assert started["tool"] == "get_weather" and started["running"] == "Checking the weather in Lisbon"
    assert of_type(frames, "tool-completed")[0]["done"] == "Checked the weather in Lisbon"
    card = of_type(frames, "ui")[0]
    assert card["component"] == "KpiCards" and card["form"] == "html"
    assert "Lisbon" in card["html"] and "<script" not in card["html"]
    assert "Lisbon" in of_type(frames, "text-end")[0]["text"]
    assert frames[-1]["status"] == "completed"

    # A table.
    frames = await ws.turn("show my orders")
    table = of_type(frames, "ui")[0]
    assert table["component"] == "DataTable" and "1042" in table["html"] and "<table" in table["html"]

    # A chart drawn as inline SVG.
    frames = await ws.turn("sales this month")
    chart = of_type(frames, "ui")[0]
    assert chart["component"] == "Chart" and "<svg" in chart["html"]

    # An action: approved.
    frames = await ws.turn("refund order 1042")
    assert frames[-1]["status"] == "awaiting-approval"
    request = of_type(frames, "approval-requested")[0]
    assert request["confirmation"] == {
        "title": "Refund €129.00 for order 1042?",
        "verb": "Refund",
        "detail": "Burr grinder · back to the card ending 4242",
    }
    assert request["tone"] == "destructive"
    await ws.send({"type": "approve", "tool_call_id": request["tool_call_id"], "id": "a1"})
    frames = await ws.until(lambda f: f.get("type") == "run-finished")
    assert {"type": "ack", "id": "a1", "status": "approved"}.items() <= next(
        f for f in frames if f["type"] == "ack"
    ).items()
    settled = of_type(frames, "approval-settled")[0]
    assert (settled["status"], settled["decided_by"], settled["via"]) == ("approved", "alice", "web")
    assert of_type(frames, "tool-completed")[0]["done"] == "Refunded order 1042"
    receipt = of_type(frames, "ui")[0]
    assert receipt["component"] == "KpiCards" and "129.00" in receipt["html"]
    assert frames[-1]["status"] == "completed"

    # The same refund again: settled by the preflight, no approval, and worded as what happened.
    frames = await ws.turn("refund order 1042")
    assert not of_type(frames, "approval-requested") and frames[-1]["status"] == "completed"
    assert of_type(frames, "tool-completed")[0]["done"] == "Order 1042 was already refunded"
    # One that is not delivered yet: refused by the preflight with its reason.
    frames = await ws.turn("refund order 1044")
    assert of_type(frames, "tool-denied")[0]["reason"] == (
        "Order 1044 has not shipped yet, so there is nothing to refund; only delivered orders are refunded."
    )

    # An action: rejected.
    frames = await ws.turn("refund order 1041")
    request = of_type(frames, "approval-requested")[0]
    await ws.send({"type": "reject", "tool_call_id": request["tool_call_id"], "reason": "changed my mind"})
    frames = await ws.until(lambda f: f.get("type") == "run-finished")
    assert of_type(frames, "tool-denied")[0]["reason"] == "Rejected by alice: changed my mind."
    assert "did not go ahead" in of_type(frames, "text-end")[0]["text"]

    # A confirmed tool: preview, then commit with the token.
    frames = await ws.turn("cancel my subscription")
    preview = of_type(frames, "tool-completed")[0]
    assert preview["output"]["status"] == "preview" and preview["output"]["confirm_token"]
    assert (of_type(frames, "tool-started")[0]["running"], preview["done"]) == (
        "Looking at your subscription",
        "Subscription checked",
    )
    assert "Reply *confirm*" in of_type(frames, "text-end")[0]["text"]
    frames = await ws.turn("confirm")
    commit = of_type(frames, "tool-completed")[0]
    assert commit["output"]["status"] == "done"
    # The commit is worded as what it does, not as the preview was.
    assert (of_type(frames, "tool-started")[0]["running"], commit["done"]) == (
        "Cancelling your subscription",
        "Subscription cancelled",
    )
    assert "cancelled" in of_type(frames, "text-end")[0]["text"]

    # A document.
    frames = await ws.turn("invoice for order 1042")
    invoice = of_type(frames, "ui")[0]
    assert invoice["component"] == "Document" and "INV-1042" in invoice["html"]

    # The same thread, read back over HTTP by its owner.
    response = await client.get(f"/agent/threads/{thread_id}", headers={"Authorization": f"Bearer {token_for(ALICE)}"})
    assert response.status == 200
    history = await response.json()
    assert [m["role"] for m in history["messages"]][:2] == ["user", "assistant"]
    assert history["last_seq"] == ws.frames[-1]["seq"]
    await ws.ws.close()


async def test_a_text_only_client_gets_text_and_a_components_client_gets_props(make_client: Any) -> None:
    client = await make_client()
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello(ui_capabilities={"formats": ["text"]})
    card = of_type(await ws.turn("weather in Porto"), "ui")[0]
    assert card["form"] == "text" and "Porto" in card["text"] and "html" not in card

    ws2 = await connect(client, token=token_for(ALICE))
    await ws2.hello(ui_capabilities={"components": [{"name": "KpiCards", "version": 1}], "formats": ["html"]})
    card = of_type(await ws2.turn("weather in Faro"), "ui")[0]
    assert card["form"] == "props" and card["props"]["items"][0]["label"] == "Faro" and "html" not in card


async def test_image_clients_of_a_thread_share_one_stored_render_of_the_same_component(make_client: Any) -> None:
    client = await make_client()
    urls = []
    threads = []
    for _ in range(2):
        ws = await connect(client, token=token_for(ALICE))
        threads.append((await ws.hello(ui_capabilities={"formats": ["image", "text"]}))["thread_id"])
        # The first PNG starts the render workers (weasyprint loads in each): allow for a busy machine.
        card = of_type(await ws.turn("weather in Lisbon", timeout=30), "ui")[0]
        assert card["form"] == "image" and card["media"][0]["mime"] == "image/png"
        urls.append(card["media"][0]["url"])
        await ws.ws.close()
    # Another socket on the first thread (a reconnect, another tab) is given the same stored bytes;
    # the other thread has its own, since erasing a thread erases its media.
    again = await connect(client, token=token_for(ALICE))
    await again.hello(thread_id=threads[0], after_seq=0, ui_capabilities={"formats": ["image", "text"]})
    replayed = (await again.until_type("ui", timeout=30))[-1]
    await again.ws.close()
    assert replayed["media"][0]["url"] == urls[0] != urls[1]
    png = await client.get(URL(urls[0]).path)  # the gateway's public URL is not the test server's
    assert png.status == 200 and (await png.read()).startswith(b"\x89PNG")
