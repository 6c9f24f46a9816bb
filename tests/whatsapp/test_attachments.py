"""A photo sent on WhatsApp (Twilio): ``MediaUrl0`` fetched with the account's credentials, then a turn.

The media are served by a recording server on loopback that checks Twilio's basic auth (account
SID and auth token); the channel is told, explicitly, that this loopback server is the provider's
media host (``InboundOptions.media``). The photo reaches a tool as bytes and the model as an
image part; a media URL that redirects to a private address or to another host is refused
before anything is fetched from there, and the person is told in their words.
"""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import Any

from aiohttp import web

from channels.whatsapp import InboundOptions
from gateway import Agent, MediaSource, Runtime
from gateway.models import OpenAIModel
from tests.attachment_parts import JPEG, Seen, image_part, photo_tool, script_photo_run
from tests.models.fake_openai import FakeOpenAI

from .conftest import ACCOUNT_SID, ALICE, AUTH_TOKEN, FAST, MakeGateway, inbound, thread_of

LOOPBACK = MediaSource(hosts=frozenset({"127.0.0.1"}), https_only=False, allow_loopback=True)
WITH_MEDIA = replace(FAST, inbound=InboundOptions(busy_wait=5.0, media=LOOPBACK))
BASIC = "Basic " + base64.b64encode(f"{ACCOUNT_SID}:{AUTH_TOKEN}".encode()).decode()
MEDIA_PATH = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/MM1/Media/ME1"


class MediaServer:
    """Twilio's media host on loopback: records each request; answers what ``reply`` says."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        self.reply: web.StreamResponse | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != BASIC:
            return web.Response(status=401)
        return self.reply or web.Response(body=JPEG, content_type="image/jpeg")


async def media_server(aiohttp_server: Any) -> tuple[MediaServer, str]:
    server = MediaServer()
    app = web.Application()
    app.router.add_get("/{tail:.*}", server.handle)
    running = await aiohttp_server(app)
    return server, str(running.make_url(MEDIA_PATH))


def picture(url: str, mime: str = "image/jpeg") -> dict[str, str]:
    return {"NumMedia": "1", "MediaUrl0": url, "MediaContentType0": mime, "MessageType": "image"}


async def test_a_photo_reaches_the_tool_as_bytes_and_the_model_as_an_image(
    make_gateway: MakeGateway, aiohttp_server: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model)
    gw = await make_gateway(runtime, options=WITH_MEDIA)
    server, url = await media_server(aiohttp_server)

    response = await gw.post(inbound("what is on this receipt?", **picture(url)))
    assert response.status == 200
    await gw.http.wait_for(lambda h: "A fine photo." in h.bodies())

    assert server.requests == [(MEDIA_PATH, BASIC)]  # fetched once, with the account's credentials
    assert seen == [("", "image/jpeg", len(JPEG), JPEG)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": "what is on this receipt?"},
        image_part(JPEG, "image/jpeg"),
    ]
    (run,) = await runtime.store.thread_runs(thread_of(ALICE))
    assert [a.mime for a in run.turn.attachments] == ["image/jpeg"]


async def test_a_photo_without_a_caption_is_a_turn_too(
    make_gateway: MakeGateway, aiohttp_server: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    gw = await make_gateway(
        Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model), options=WITH_MEDIA
    )
    _, url = await media_server(aiohttp_server)
    await gw.post(inbound("", **picture(url)))
    await gw.http.wait_for(lambda h: "A fine photo." in h.bodies())
    assert fake.requests[0].body["messages"][-1]["content"] == [image_part(JPEG, "image/jpeg")]


async def test_redirects_to_a_private_address_or_another_host_are_refused(
    make_gateway: MakeGateway, aiohttp_server: Any, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    # Even a source that names the metadata address as a host refuses it: the address is not public.
    source = replace(LOOPBACK, hosts=frozenset({"127.0.0.1", "169.254.169.254"}))
    options = replace(FAST, inbound=InboundOptions(busy_wait=5.0, media=source))
    gw = await make_gateway(Runtime(agents=[Agent(name="default")], model=openai_model), options=options)
    server, url = await media_server(aiohttp_server)

    server.reply = web.Response(status=302, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
    await gw.post(inbound("", **picture(url)))
    await gw.http.wait_for(lambda h: len(h.bodies()) == 1)
    server.reply = web.Response(status=307, headers={"Location": "https://media.attacker.example/ME1"})
    await gw.post(inbound("", **picture(url)))
    await gw.http.wait_for(lambda h: len(h.bodies()) == 2)
    # A MediaUrl that is not the provider's is never fetched at all.
    await gw.post(inbound("", **picture("https://api.twilio.com.attacker.example/ME1")))
    await gw.http.wait_for(lambda h: len(h.bodies()) == 3)
    await gw.settle()

    assert gw.http.bodies() == ["I couldn't download that file: please send it again."] * 3
    assert len(server.requests) == 2  # only the first hop of each, on the provider's host
    assert fake.requests == []  # nothing ran


async def test_a_refused_type_or_size_is_told_with_its_reason(
    make_gateway: MakeGateway, aiohttp_server: Any, openai_model: OpenAIModel
) -> None:
    gw = await make_gateway(
        Runtime(agents=[Agent(name="default")], model=openai_model), options=WITH_MEDIA, attachment_max_bytes=1_000
    )
    server, url = await media_server(aiohttp_server)
    server.reply = web.Response(body=b"BEGIN:VCARD\nFN:Alice\nEND:VCARD\n", content_type="image/jpeg")
    await gw.post(inbound("", **picture(url)))
    await gw.http.wait_for(lambda h: len(h.bodies()) == 1)
    server.reply = web.Response(body=JPEG + b"\x00" * 5_000, content_type="image/jpeg")
    await gw.post(inbound("", **picture(url)))
    await gw.http.wait_for(lambda h: len(h.bodies()) == 2)
    assert gw.http.bodies() == [
        "I can't read that kind of file: please send a photo or a PDF.",
        "That file is too large: please send one under 0.001 MB.",
    ]
