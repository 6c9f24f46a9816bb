"""A photo sent on the WhatsApp Cloud API: media id -> Graph's media URL -> the bytes, both with the bearer.

The recording Graph server answers ``GET /{version}/{media-id}`` with the media's URL and serves
it, checking ``Authorization: Bearer <token>`` on both; the photo reaches a tool as bytes and
the model request as an image part.
"""

from __future__ import annotations

from gateway import Agent, Runtime
from gateway.models import OpenAIModel
from tests.attachment_parts import PNG, Seen, image_part, photo_tool, script_photo_run
from tests.models.fake_openai import FakeOpenAI

from . import payloads as p
from .conftest import MakeCloud, thread_of
from .graph import TOKEN, VERSION


async def test_a_photo_reaches_the_tool_as_bytes_and_the_model_as_an_image(
    make_cloud: MakeCloud, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model)
    cloud = await make_cloud(runtime)
    cloud.graph.media["MEDIA7"] = (PNG, "image/png")

    image = p.message("image", {"id": "MEDIA7", "mime_type": "image/png", "caption": "broken on arrival"})
    assert (await cloud.post(image)).status == 200
    await cloud.graph.wait_for(lambda g: "A fine photo." in g.texts())

    bearer = f"Bearer {TOKEN}"
    assert cloud.graph.media_gets == [(f"/{VERSION}/MEDIA7", bearer), ("/download/MEDIA7", bearer)]
    assert seen == [("", "image/png", len(PNG), PNG)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": "broken on arrival"},
        image_part(PNG, "image/png"),
    ]
    (run,) = await runtime.store.thread_runs(thread_of(p.ALICE))
    assert len(run.turn.attachments) == 1


async def test_a_media_url_redirecting_to_a_private_address_is_refused(
    make_cloud: MakeCloud, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    cloud = await make_cloud(Runtime(agents=[Agent(name="default")], model=openai_model))
    cloud.graph.media["MEDIA8"] = (PNG, "image/png")
    cloud.graph.redirect_download = "http://10.0.0.7/internal/secrets"
    assert (await cloud.post(p.message("image", {"id": "MEDIA8", "mime_type": "image/png"}))).status == 200
    await cloud.graph.wait_for(lambda g: len(g.texts()) == 1)
    assert cloud.graph.texts() == ["I couldn't download that file: please send it again."]
    assert fake.requests == []
