"""A scriptable fake of Anthropic's Messages API (``POST /v1/messages``), on aiohttp.

Each request takes the next scripted reply; every request is recorded. Replies stream the
documented server-sent events (``event: <type>`` then ``data: <json>``): ``message_start``,
``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` per block,
``message_delta`` with the stop reason and usage, ``message_stop``; or an ``error`` event, or an
HTTP error with Anthropic's error body. ``message()`` builds a whole well-formed message.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Reply = Callable[[web.Request], Awaitable[web.StreamResponse]]
Event = dict[str, Any]
Step = Event | asyncio.Event


@dataclass
class Recorded:
    """One request the fake received."""

    body: dict[str, Any]
    headers: dict[str, str]
    """Names in lower case."""

    @property
    def api_key(self) -> str | None:
        """The key the client sent: ``x-api-key``, or a bearer token (newer SDKs send that)."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or (
            bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else None
        )


@dataclass
class FakeAnthropic:
    """The fake server's state: scripted replies, recorded requests, and a release for stalls."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at teardown: every stalled reply returns, so the server can shut down at once."""
    base_url: str = ""
    """The API root, without ``/v1`` (as ``anthropic.AsyncAnthropic(base_url=...)`` takes it)."""

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            Recorded(body=await request.json(), headers={k.lower(): v for k, v in request.headers.items()})
        )
        if not self.replies:
            return await error(500, "api_error", "the fake has no reply scripted")(request)
        return await self.replies.popleft()(request)

    def sse(self, *steps: Step, drop: bool = False) -> Reply:
        """Stream ``steps`` (events, or gates to wait on); ``drop`` cuts the connection after them."""

        async def reply(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            drop_now = drop
            for step in steps:
                if isinstance(step, asyncio.Event):
                    if not await self._wait(step):
                        drop_now = True
                        break
                else:
                    await response.write(f"event: {step['type']}\ndata: {json.dumps(step)}\n\n".encode())
            if drop_now:
                assert request.transport is not None
                request.transport.abort()
                return response
            await response.write_eof()
            return response

        return reply

    def stall(self) -> Reply:
        """Never answer (until teardown)."""

        async def reply(request: web.Request) -> web.StreamResponse:
            await self.release.wait()
            return web.Response(status=503)

        return reply

    async def _wait(self, gate: asyncio.Event) -> bool:
        """Wait for ``gate``; False when the fake was released first (the test is over)."""
        waiters = [asyncio.ensure_future(gate.wait()), asyncio.ensure_future(self.release.wait())]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        return gate.is_set()


def error(status: int, kind: str, message: str, *, headers: Mapping[str, str] | None = None) -> Reply:
    """An Anthropic error response (``{"type": "error", "error": {"type": kind, "message": ...}}``)."""

    async def reply(request: web.Request) -> web.StreamResponse:
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return web.json_response(body, status=status, headers=dict(headers or {}))

    return reply


# -- events ----------------------------------------------------------------------------------


def start(input_tokens: int = 0, *, cache_read: int | None = None) -> Event:
    """``message_start``: an empty assistant message and the input's token count."""
    return {
        "type": "message_start",
        "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-fake",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_read_input_tokens": cache_read},
        },
    }


def text_start(index: int) -> Event:
    return {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}


def text_delta(index: int, piece: str) -> Event:
    return {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}


def tool_start(index: int, id: str, name: str) -> Event:
    block = {"type": "tool_use", "id": id, "name": name, "input": {}}
    return {"type": "content_block_start", "index": index, "content_block": block}


def json_delta(index: int, partial: str) -> Event:
    return {
        "type": "content_block_delta",
        "index": index,
        "delta": {"type": "input_json_delta", "partial_json": partial},
    }


def stop(index: int) -> Event:
    return {"type": "content_block_stop", "index": index}


def delta(reason: str = "end_turn", output_tokens: int = 0) -> Event:
    """``message_delta``: the stop reason and the cumulative output token count."""
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


def end() -> Event:
    return {"type": "message_stop"}


def ping() -> Event:
    return {"type": "ping"}


def stream_error(kind: str, message: str) -> Event:
    """An ``error`` event inside a stream (``overloaded_error`` when the API is busy)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def message(*pieces: str, input_tokens: int = 10, output_tokens: int = 5) -> list[Event]:
    """A whole message of one text block streamed in ``pieces``."""
    return [
        start(input_tokens),
        text_start(0),
        ping(),
        *(text_delta(0, piece) for piece in pieces),
        stop(0),
        delta("end_turn", output_tokens),
        end(),
    ]
