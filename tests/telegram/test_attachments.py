"""Telegram photos and documents: ``getFile``, then ``/file/bot<token>/<file_path>``, into a turn.

The loopback Bot API (``BotApi``) also answers ``getFile`` and serves the file under the token's
path, recording each download; the photo reaches a tool as bytes and the model as an image part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gateway import Agent, Runtime
from gateway.models import OpenAIModel
from tests.attachment_parts import JPEG, PDF, Seen, image_part, photo_tool, script_photo_run
from tests.models.fake_openai import FakeOpenAI

from .botapi import TOKEN, BotApi
from .conftest import MakeGateway, thread_of
from .updates import ALICE_ID, message


@dataclass
class FileBotApi(BotApi):
    """The Bot API with files: ``getFile`` names a path, ``GET /file/bot<token>/<path>`` serves it."""

    files: dict[str, bytes] = field(default_factory=dict)
    """Bytes by ``file_id``."""
    downloads: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        return app

    def _result(self, call: Any) -> Any:
        if call.method == "getFile":
            file_id = call.body["file_id"]
            data = self.files[file_id]
            return {
                "file_id": file_id,
                "file_unique_id": "u" + file_id,
                "file_size": len(data),
                "file_path": f"photos/{file_id}.bin",
            }
        return super()._result(call)

    async def _file(self, request: web.Request) -> web.StreamResponse:
        self.downloads.append(request.path)
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        file_id = request.match_info["path"].removeprefix("photos/").removesuffix(".bin")
        return web.Response(body=self.files[file_id], content_type="application/octet-stream")


def photo(file_id: str) -> list[dict[str, Any]]:
    """A photo's sizes, smallest first, as Telegram sends them."""
    return [
        {"file_id": f"{file_id}-small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
        {"file_id": file_id, "file_unique_id": "b", "width": 800, "height": 800, "file_size": len(JPEG)},
    ]


def document(file_id: str) -> dict[str, Any]:
    """A document that says it is a PDF."""
    return {"file_id": file_id, "file_unique_id": "d", "file_name": "invoice.pdf", "mime_type": "application/pdf"}


async def test_a_photo_reaches_the_tool_as_bytes_and_the_model_as_an_image(
    make_gateway: MakeGateway, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    bot = FileBotApi(files={"PH1": JPEG})
    runtime = Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model)
    gw = await make_gateway(runtime, bot=bot)

    update = message("", photo=photo("PH1"), caption="is this the right part?")
    del update["message"]["text"]
    await gw.send(update)
    await bot.wait_for(lambda b: any("A fine photo" in t for t in b.texts()))

    [get_file] = bot.of("getFile")
    assert get_file.body == {"file_id": "PH1"}  # the largest size
    assert bot.downloads == [f"/file/bot{TOKEN}/photos/PH1.bin"]
    assert seen == [("photo.jpg", "image/jpeg", len(JPEG), JPEG)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": "is this the right part?"},
        image_part(JPEG, "image/jpeg"),
    ]
    (run,) = await runtime.store.thread_runs(thread_of(ALICE_ID))
    assert [a.id for a in run.turn.attachments] != []


async def test_a_document_is_named_to_the_model(
    make_gateway: MakeGateway, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    seen: Seen = []
    script_photo_run(fake)
    bot = FileBotApi(files={"DOC1": PDF})
    gw = await make_gateway(
        Runtime(tools=[photo_tool(seen)], agents=[Agent(name="default")], model=openai_model), bot=bot
    )
    update = message(
        "",
        document={"file_id": "DOC1", "file_unique_id": "d", "file_name": "invoice.pdf", "mime_type": "application/pdf"},
    )
    del update["message"]["text"]
    await gw.send(update)
    await bot.wait_for(lambda b: any("A fine photo" in t for t in b.texts()))
    assert seen == [("invoice.pdf", "application/pdf", len(PDF), PDF)]
    assert fake.requests[0].body["messages"][-1]["content"] == [
        {"type": "text", "text": f"[attached file: invoice.pdf (application/pdf, {len(PDF)} bytes)]"}
    ]


async def test_a_document_whose_bytes_are_not_its_type_is_refused_in_words(
    make_gateway: MakeGateway, fake: FakeOpenAI, openai_model: OpenAIModel
) -> None:
    bot = FileBotApi(files={"DOC2": b"MZ\x90\x00 an executable"})
    gw = await make_gateway(Runtime(agents=[Agent(name="default")], model=openai_model), bot=bot)
    update = message(
        "",
        document={"file_id": "DOC2", "file_unique_id": "d", "file_name": "invoice.pdf", "mime_type": "application/pdf"},
    )
    del update["message"]["text"]
    await gw.send(update)
    await bot.wait_for(lambda b: len(b.texts()) == 1)
    assert [t.replace("\\", "") for t in bot.texts()] == [
        "I can't read that kind of file: please send a photo or a PDF."
    ]
    assert fake.requests == []
