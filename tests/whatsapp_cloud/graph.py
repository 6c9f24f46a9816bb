"""A loopback aiohttp server playing Meta's Graph API, recording every request it gets.

Each request is recorded with its method, path, headers and body: the JSON of a ``/messages``
post, the fields of a multipart ``/media`` upload (``file`` with its filename, MIME type and
bytes). Answers follow a script (statuses, ``(status, body)``, or ``DROP`` to cut the
connection: an unreachable Graph); with the script empty, a message gets ``{messages: [{id:
"wamid.N"}]}`` and an upload ``{id: "MEDIA-N"}``, as Graph answers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web
from aiohttp.test_utils import TestServer

PNID = "106540352242922"
TOKEN = "EAAtest-access-token-never-logged"
VERSION = "v26.0"
MESSAGES_PATH = f"/{VERSION}/{PNID}/messages"
MEDIA_PATH = f"/{VERSION}/{PNID}/media"

DROP = "drop"


@dataclass(frozen=True)
class Raw:
    """An answer of exactly ``body`` (a garbled one), with ``status`` and ``headers``."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


Answer = int | tuple[int, dict[str, Any]] | str | Raw


@dataclass
class Part:
    """One field of a multipart upload."""

    name: str
    value: bytes
    filename: str | None
    content_type: str | None


@dataclass
class GraphRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None = None
    parts: dict[str, Part] = field(default_factory=dict)
    status: int = 0
    answer: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message_id(self) -> str:
        assert self.answer is not None
        return str(self.answer["messages"][0]["id"])


@dataclass
class Graph:
    """The recorder: ``requests`` in arrival order, ``script`` for the next answers."""

    requests: list[GraphRequest] = field(default_factory=list)
    script: list[Answer] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    server: TestServer | None = None
    media: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    """Received media by id: ``GET /{version}/{media-id}`` names its URL, which serves the bytes."""
    media_gets: list[tuple[str, str | None]] = field(default_factory=list)
    """``(path, Authorization)`` of each media request (the id's, then the download's)."""
    redirect_download: str | None = None
    """When set, the media URL answers 302 to this location instead of the bytes."""

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)

    @property
    def base(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{version}/{pnid}/{edge}", self._handle)
        app.router.add_get("/{version}/{media_id}", self._media_url)
        app.router.add_get("/download/{media_id}", self._download)
        self.server = TestServer(app)
        await self.server.start_server()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        record = GraphRequest(request.method, request.path, dict(request.headers))
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                assert isinstance(part, BodyPartReader)
                data = await part.read()
                name = part.name or ""
                record.parts[name] = Part(name, bytes(data), part.filename, part.headers.get("Content-Type"))
        else:
            record.json = json.loads(await request.read())
        answer: Answer = self.script.pop(0) if self.script else 200
        async with self.changed:
            self.requests.append(record)
            self.changed.notify_all()
        if answer == DROP:
            assert request.transport is not None
            request.transport.close()  # the client sees the server disconnect: an unreachable Graph
            return web.Response(status=204)
        if isinstance(answer, Raw):
            record.status = answer.status
            return web.Response(
                status=answer.status, body=answer.body, headers=answer.headers, content_type="application/json"
            )
        status, body = answer if isinstance(answer, tuple) else (int(answer), None)
        if body is None:
            if status >= 400:
                code = 130429 if status == 429 else 1
                body = {"error": {"message": f"error {status}", "type": "OAuthException", "code": code}}
            elif request.match_info["edge"] == "media":
                body = {"id": f"MEDIA-{next(self._ids)}"}
            else:
                to = (record.json or {}).get("to", "")
                body = {
                    "messaging_product": "whatsapp",
                    "contacts": [{"input": to, "wa_id": to}],
                    "messages": [{"id": f"wamid.TEST{next(self._ids):06d}"}],
                }
        record.status, record.answer = status, body
        return web.json_response(body, status=status)

    async def _media_url(self, request: web.Request) -> web.StreamResponse:
        self.media_gets.append((request.path, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"error": {"message": "bad token", "code": 190}}, status=401)
        media_id = request.match_info["media_id"]
        if media_id not in self.media:
            return web.json_response({"error": {"message": "no such media", "code": 100}}, status=404)
        data, mime = self.media[media_id]
        url = f"{self.base}/download/{media_id}"
        return web.json_response(
            {"messaging_product": "whatsapp", "url": url, "mime_type": mime, "file_size": len(data), "id": media_id}
        )

    async def _download(self, request: web.Request) -> web.StreamResponse:
        self.media_gets.append((request.path, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401)
        if self.redirect_download is not None:
            return web.Response(status=302, headers={"Location": self.redirect_download})
        data, mime = self.media[request.match_info["media_id"]]
        return web.Response(body=data, content_type=mime)

    # -- reading what was sent -----------------------------------------------------------------

    def messages(self, *, ok: bool = True) -> list[GraphRequest]:
        return [r for r in self.requests if r.path == MESSAGES_PATH and (r.ok or not ok)]

    def uploads(self) -> list[GraphRequest]:
        return [r for r in self.requests if r.path == MEDIA_PATH]

    def texts(self) -> list[str]:
        return [r.json["text"]["body"] for r in self.messages() if r.json and r.json.get("type") == "text"]

    async def wait_for(self, predicate: Callable[[Graph], bool], timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout), self.changed:
            await self.changed.wait_for(lambda: predicate(self))
