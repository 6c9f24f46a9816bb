"""The Graph client against the recording server: request shapes, the bearer token, errors mapped."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from channels.whatsapp._cloud_api import GraphClient
from gateway import PushSendError

from .graph import DROP, MEDIA_PATH, MESSAGES_PATH, PNID, TOKEN, VERSION, Graph, Raw


@pytest.fixture
async def client(graph: Graph) -> AsyncIterator[GraphClient]:
    api = GraphClient(access_token=TOKEN, phone_number_id=PNID, api_version=VERSION, graph_base=graph.base)
    await api.open()
    yield api
    await api.aclose()


async def test_text_message_shape(graph: Graph, client: GraphClient) -> None:
    wamid = await client.send_message("whatsapp:+15551230001", "text", {"body": "hello", "preview_url": False})
    (request,) = graph.requests
    assert request.method == "POST" and request.path == MESSAGES_PATH
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "15551230001",
        "type": "text",
        "text": {"body": "hello", "preview_url": False},
    }
    assert wamid == request.message_id and wamid.startswith("wamid.")


async def test_media_upload_is_multipart(graph: Graph, client: GraphClient) -> None:
    media_id = await client.upload_media(b"\x89PNG-bytes", mime="image/png", filename="card.png")
    (request,) = graph.requests
    assert request.path == MEDIA_PATH and request.headers["Authorization"] == f"Bearer {TOKEN}"
    assert request.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert set(request.parts) == {"file", "type", "messaging_product"}
    assert request.parts["messaging_product"].value == b"whatsapp"
    assert request.parts["type"].value == b"image/png"
    file = request.parts["file"]
    assert (file.value, file.filename, file.content_type) == (b"\x89PNG-bytes", "card.png", "image/png")
    assert media_id == "MEDIA-1"


@pytest.mark.parametrize(
    ("answer", "retryable", "code"),
    [
        (429, True, "130429"),
        (503, True, "1"),
        ((400, {"error": {"code": 131056, "message": "pair rate limit hit"}}), True, "131056"),
        ((400, {"error": {"code": 80007, "message": "rate limit issues"}}), True, "80007"),
        ((400, {"error": {"code": 4, "message": "API Too Many Calls"}}), True, "4"),
        ((400, {"error": {"code": 131047, "message": "Re-engagement message"}}), False, "131047"),
        ((400, {"error": {"code": 100, "message": "Invalid parameter"}}), False, "100"),
        ((401, {"error": {"code": 190, "message": "expired token"}}), False, "190"),
    ],
)
async def test_errors_mapped(
    graph: Graph, client: GraphClient, answer: int | tuple[int, dict[str, object]], retryable: bool, code: str
) -> None:
    graph.script.append(answer)
    with pytest.raises(PushSendError) as caught:
        await client.send_message("+15551230001", "text", {"body": "x"})
    assert caught.value.retryable is retryable
    assert caught.value.provider_code == code
    assert TOKEN not in str(caught.value)


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("answer", "retryable"),
    [
        (Raw(200, DEEP), False),  # it may have been sent: never sent again
        (Raw(400, DEEP), False),
        (Raw(400, b'{"error": {"code": 1e400, "message": "x"}}'), False),
        (Raw(503, b'{"error": {"code": 2, "error_data": {"details": ' + DEEP + b"}}}"), True),
        (Raw(503, b'{"message": "a proxy said so"}'), True),  # no "error" object
        (Raw(429, b"{}", {"Retry-After": "inf"}), True),
        (Raw(429, b"{}", {"Retry-After": "nan"}), True),
    ],
    ids=["nested-200", "nested-400", "code-1e400", "nested-details", "no-error", "retry-after-inf", "retry-after-nan"],
)
async def test_a_garbled_answer_is_a_send_error(
    graph: Graph, client: GraphClient, answer: Raw, retryable: bool
) -> None:
    graph.script.append(answer)
    with pytest.raises(PushSendError) as caught:
        await client.send_message("+15551230001", "text", {"body": "x"})
    assert caught.value.retryable is retryable and caught.value.retry_after is None


async def test_unreachable_is_retryable(graph: Graph, client: GraphClient) -> None:
    graph.script.append(DROP)
    with pytest.raises(PushSendError) as caught:
        await client.send_message("+15551230001", "text", {"body": "x"})
    assert caught.value.retryable and caught.value.http_status is None


async def test_upload_error_mapped(graph: Graph, client: GraphClient) -> None:
    graph.script.append(503)
    with pytest.raises(PushSendError) as caught:
        await client.upload_media(b"%PDF", mime="application/pdf", filename="invoice.pdf")
    assert caught.value.retryable and caught.value.http_status == 503


async def test_token_never_logged(graph: Graph, client: GraphClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    graph.script.extend([429, DROP])
    for _ in range(2):
        with pytest.raises(PushSendError):
            await client.send_message("+15551230001", "text", {"body": "x"})
    await client.send_message("+15551230001", "text", {"body": "x"})
    assert TOKEN not in caplog.text and TOKEN not in repr(client)
