"""A scriptable fake of an OpenAI-compatible ``POST /v1/chat/completions`` server, on aiohttp.

Each request takes the next scripted reply; every request is recorded. Replies stream real
``chat.completion.chunk`` JSON as server-sent events, and may wait on ``asyncio.Event`` gates
between chunks so a test decides when each piece leaves the server.
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
Step = dict[str, Any] | asyncio.Event


@dataclass
class Recorded:
    """One request the fake received."""

    body: dict[str, Any]
    headers: dict[str, str]


@dataclass
class FakeOpenAI:
    """The fake server's state: scripted replies, recorded requests, and a release for stalls."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at teardown: every stalled reply returns, so the server can shut down at once."""
    received: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a request arrives (tests clear it to wait for the next one)."""
    base_url: str = ""

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(Recorded(body=await request.json(), headers=dict(request.headers)))
        self.received.set()
        if not self.replies:
            return await error(500, "the fake has no reply scripted")(request)
        return await self.replies.popleft()(request)

    # -- reply builders -------------------------------------------------------------------------

    def sse(self, *steps: Step, drop: bool = False, done: bool = True) -> Reply:
        """Stream ``steps`` (chunks, or gates to wait on), then ``[DONE]``; ``drop`` cuts the
        connection instead of ending the stream."""

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
                    await response.write(f"data: {json.dumps(step)}\n\n".encode())
            if drop_now:
                assert request.transport is not None
                request.transport.abort()
                return response
            if done:
                await response.write(b"data: [DONE]\n\n")
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


def error(status: int, message: str, *, headers: Mapping[str, str] | None = None) -> Reply:
    """An OpenAI-style error response."""

    async def reply(request: web.Request) -> web.StreamResponse:
        body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
        return web.json_response(body, status=status, headers=dict(headers or {}))

    return reply


def chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    """One ``chat.completion.chunk`` as OpenAI streams it."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-fake",
        "system_fingerprint": "fp_fake",
        "choices": choices,
        "usage": usage,
    }


def role() -> dict[str, Any]:
    return chunk({"role": "assistant", "content": ""})


def text(piece: str) -> dict[str, Any]:
    return chunk({"content": piece})


def tool(
    index: int | None, *, id: str | None = None, name: str | None = None, args: str | None = None
) -> dict[str, Any]:
    """A tool-call fragment: the first one of a call carries ``id`` and ``name`` (``index=None``
    leaves the index out, as some servers do)."""
    call: dict[str, Any] = {"function": {"arguments": args or ""}}
    if index is not None:
        call["index"] = index
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return chunk({"tool_calls": [call]})


def finish(reason: str = "stop") -> dict[str, Any]:
    return chunk({}, finish=reason)


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return chunk(usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
