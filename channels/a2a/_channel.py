"""``A2AChannel``: the agent card and ``POST /a2a`` on a gateway app."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import AsyncGenerator
from email.utils import formatdate
from typing import Any

from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InternalError as RpcInternalError
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import A2AError
from aiohttp import web

from gateway import (
    CHANNEL_SERVICES,
    ActorResolver,
    Channel,
    ChannelServices,
    GatewayError,
    InvalidTokenError,
    SseStream,
    UnauthenticatedError,
    one_line,
    sse_frame,
    valid_text,
)
from tools import Actor, UiCapabilities

from ._book import DEFAULT_TASK_TTL, TaskBook
from ._card import A2AOptions, build_agent_card, public_base_url
from ._errors import error_body
from ._handler import ActorUser, GatewayRequestHandler
from ._jsonrpc import V03_STREAMING_METHODS, JsonRpcCall, JsonRpcDispatcher, RefusedCall, read_call
from ._proto import to_json

__all__ = ["A2A_CHANNEL", "A2AChannel", "setup"]

logger = logging.getLogger("channels.a2a")

_CARDS_REMEMBERED = 64
"""Cards (one per Host and version) whose first time served is kept for ``Last-Modified``."""


_EVENT_STREAM = "text/event-stream; charset=utf-8"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _requested_version(request: web.Request) -> str | None:
    """The protocol version a caller asks for: ``A2A-Version``, the header else the query parameter.

    A2A 1.0 section 3.6.1 lets a client that cannot set headers name the version in the query;
    the header wins when both are there. ``None`` when neither is (the protocol reads 0.3). A
    refusal echoes the value: header bytes that are not UTF-8 (lone surrogates) become U+FFFD.
    """
    value = request.headers.get(VERSION_HEADER, "").strip()
    if not value:
        wanted = VERSION_HEADER.lower()
        value = next((v for k, v in request.query.items() if k.lower() == wanted), "").strip()
    return valid_text(value) or None


class A2AChannel(Channel):
    """The A2A channel of one gateway app: its options, task records, handler and dispatcher.

    ``GET /.well-known/agent-card.json`` and ``POST /a2a`` (``options.path``); the JSON-RPC
    endpoint answers with and without a trailing slash (``/a2a`` and ``/a2a/``).

    Args:
        options: Card wording, media, stream heartbeat.
        task_ttl: Seconds task records are kept after their last change.
        resolver: Who callers are; by default a signed actor token in ``Authorization: Bearer``.
    """

    name = "a2a"
    capabilities = UiCapabilities(formats=["image", "text"])

    services: ChannelServices
    book: TaskBook
    handler: GatewayRequestHandler
    dispatcher: JsonRpcDispatcher

    def __init__(
        self,
        options: A2AOptions | None = None,
        *,
        task_ttl: float = DEFAULT_TASK_TTL,
        resolver: ActorResolver | None = None,
    ) -> None:
        self.options = options or A2AOptions()
        self.task_ttl = task_ttl
        self.resolver = resolver
        """Who the caller is; ``None`` reads a signed actor token from ``Authorization: Bearer``."""
        self._card_seen: dict[str, int] = {}

    @classmethod
    def create(
        cls,
        services: ChannelServices,
        options: A2AOptions | None = None,
        *,
        task_ttl: float = DEFAULT_TASK_TTL,
        resolver: ActorResolver | None = None,
    ) -> A2AChannel:
        """Assemble the channel over a gateway's services (without mounting it)."""
        channel = cls(options, task_ttl=task_ttl, resolver=resolver)
        channel.bind(services)
        return channel

    def bind(self, services: ChannelServices) -> None:
        """Build the task book, handler and dispatcher over ``services``."""
        self.services = services
        self.book = TaskBook(services.state("a2a"), ttl=self.task_ttl)
        self.handler = GatewayRequestHandler(services, self.book, self.options)
        self.dispatcher = JsonRpcDispatcher(self.handler)

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount the card and the JSON-RPC endpoint on ``app``."""
        self.bind(services)
        app[A2A_CHANNEL] = self
        app.router.add_get("/.well-known/agent-card.json", self.agent_card)
        path = self.options.path.rstrip("/")
        app.router.add_post(path + "/", self.rpc)
        if path:
            app.router.add_post(path, self.rpc)

    async def authenticate(self, request: web.Request) -> Actor:
        """The caller's actor.

        Raises:
            UnauthenticatedError: No credential.
            InvalidTokenError: A bad one.
        """
        if self.resolver is not None:
            actor = await self.resolver.resolve(request)
            if actor is None:
                raise UnauthenticatedError("Authenticate to call this agent")
            return actor
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError("Send Authorization: Bearer <signed actor token>")
        return await self.services.verify_token(token.strip())

    # -- routes -------------------------------------------------------------------------------------

    async def agent_card(self, request: web.Request) -> web.Response:
        """``GET /.well-known/agent-card.json``: the public card, with a weak ``ETag`` and ``Last-Modified``.

        A strict 1.0 card, unless the caller asks for 0.3 (``A2A-Version: 0.3``, header or query
        parameter): then the 0.3 card (``url``, ``preferredTransport``, ``protocolVersion``...).
        """
        card = await build_agent_card(self.services, public_base_url(request, self.services), self.options)
        legacy = is_legacy_version(_requested_version(request))
        body = _json(to_compat_agent_card(card).model_dump(mode="json", exclude_none=True) if legacy else to_json(card))
        etag = f'W/"{hashlib.sha256(body.encode()).hexdigest()[:32]}"'
        modified = self._card_seen_at(etag)
        # A card built from the request's Host (no public_base_url) must not be kept by a shared
        # cache: another caller's Host would then name our interfaces for everyone.
        shared = "public" if self.services.settings.public_base_url else "private"
        headers = {
            "ETag": etag,
            "Last-Modified": formatdate(modified, usegmt=True),
            "Cache-Control": f"{shared}, max-age=60",
            "Vary": f"Host, {VERSION_HEADER}",
        }
        if _not_modified(request, etag, modified):
            return web.Response(status=304, headers=headers)
        return web.Response(text=body, content_type="application/json", headers=headers)

    def _card_seen_at(self, etag: str) -> int:
        """When this process first served the card ``etag`` names (whole seconds): its ``Last-Modified``."""
        seen = self._card_seen.get(etag)
        if seen is None:
            if len(self._card_seen) >= _CARDS_REMEMBERED:  # one per Host and version: bounded
                del self._card_seen[next(iter(self._card_seen))]
            seen = self._card_seen[etag] = int(time.time())
        return seen

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        """``POST /a2a``: one JSON-RPC call; SSE for the streaming methods.

        Unauthenticated callers get HTTP 401 before their body is read; a rate-limited one
        HTTP 429 (the gateway's error middleware); every other failure is a JSON-RPC error.
        Each refusal writes one log line; only an unexpected failure (-32603) logs its traceback.
        """
        try:
            actor = await self.authenticate(request)
        except (UnauthenticatedError, InvalidTokenError) as exc:
            _log_refusal(request, None, f"{exc.status} {exc.code}", str(exc))
            challenge = 'Bearer realm="a2a"' + (', error="invalid_token"' if isinstance(exc, InvalidTokenError) else "")
            return web.json_response(
                {"code": exc.code, "message": str(exc)}, status=401, headers={"WWW-Authenticate": challenge}
            )
        raw = await request.read()  # over the app's client_max_size: 413, answered and logged by the middleware
        call: JsonRpcCall | None = None
        try:
            call = read_call(raw, _requested_version(request))
            context = ServerCallContext(
                user=ActorUser(actor),
                state={
                    "headers": dict(request.headers),
                    "method": call.method,
                    "request_id": call.id,
                    "base_url": public_base_url(request, self.services),
                },
            )
            result = await self.dispatcher.dispatch(call, context)
            if isinstance(result, dict):
                return web.json_response(result, dumps=_json)
            first = await anext(result, None)
        except RefusedCall as exc:
            legacy = call.legacy if call is not None else False
            method = call.method if call is not None else exc.method
            return _refused(request, method, error_body(exc.request_id, exc.error, legacy=legacy))
        except A2AError as exc:
            return _refused(request, call.method if call else None, _call_error(call, exc))
        except GatewayError:
            raise  # rate limits (429) and an unreachable store (503): the error middleware answers and logs
        except Exception:
            logger.exception("A2A call %s failed", call.method if call else "?")
            return _error_answer(call.method if call else None, _call_error(call, RpcInternalError()))
        return await self._stream(request, self._frames(call, first, result))

    async def _stream(self, request: web.Request, frames: AsyncGenerator[str, None]) -> web.StreamResponse:
        """Answer with ``frames`` as they come, until they end or the caller leaves.

        Nothing here owns the run whose events the frames carry: a caller leaving stops this
        stream only.
        """
        stream = SseStream(
            request, heartbeat=self.options.heartbeat, content_type=_EVENT_STREAM, cache_control="no-store"
        )

        async def pump() -> None:
            async for frame in frames:
                await stream.write(frame)

        try:
            if not await stream.serve(pump()):
                logger.debug("an A2A caller left its stream")
        finally:
            await frames.aclose()
        return stream.response

    async def _frames(
        self, call: JsonRpcCall, first: dict[str, Any] | None, rest: AsyncGenerator[dict[str, Any], None]
    ) -> AsyncGenerator[str, None]:
        """SSE frames of a stream's responses; a failure mid-stream is a last ``event: error`` frame."""
        try:
            if first is not None:
                yield sse_frame(_json(first))
            async for response in rest:
                yield sse_frame(_json(response))
        except A2AError as exc:
            logger.info("A2A stream %s ended with %s: %s", call.method, type(exc).__name__, valid_text(str(exc))[:500])
            yield _error_frame(call, exc)
        except GatewayError as exc:
            logger.warning("A2A stream %s stopped: %s", call.method, exc)
            yield _error_frame(call, RpcInternalError(message=str(exc)))
        except Exception:
            logger.exception("A2A stream %s failed", call.method)
            yield _error_frame(call, RpcInternalError())
        finally:
            await rest.aclose()


def _call_error(call: JsonRpcCall | None, error: Any) -> dict[str, Any]:
    return error_body(call.id if call else None, error, legacy=call.legacy if call else False)


def _log_refusal(request: web.Request, method: str | None, code: str, reason: str) -> None:
    """One line per refused call: route, method, code and reason (never a traceback)."""
    resource = request.match_info.route.resource
    target = f"{request.method} {resource.canonical if resource is not None else request.path}"
    if method:
        target += f" {method}"
    # one_line: a method name or an id the client sent must not split the line (or forge one).
    logger.info("A2A refused %s: %s: %s", one_line(target, 200), one_line(code, 40), one_line(reason))


def _refused(request: web.Request, method: str | None, body: dict[str, Any]) -> web.Response:
    """The answer to a refused call (logged on one line)."""
    error = body.get("error", {})
    _log_refusal(request, method, str(error.get("code")), str(error.get("message")))
    return _error_answer(method, body)


def _not_modified(request: web.Request, etag: str, modified: int) -> bool:
    """Whether a conditional GET may be answered 304 (``If-None-Match`` wins over ``If-Modified-Since``)."""
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        return etag in if_none_match
    since = request.if_modified_since
    return since is not None and modified <= since.timestamp()


def _error_answer(method: str | None, body: dict[str, Any]) -> web.Response:
    """A JSON-RPC error answer: JSON, or one SSE frame for a 0.3 streaming method.

    A 0.3 client reads a streaming method's answer as an event stream whatever it holds; a 1.0
    client (the SDK's) takes a plain JSON answer to a stream refused up front, as the SDK's
    server sends it.
    """
    if method in V03_STREAMING_METHODS:
        return web.Response(
            body=sse_frame(_json(body)).encode(),
            content_type="text/event-stream",
            charset="utf-8",
            headers={"Cache-Control": "no-store"},
        )
    return web.json_response(body, dumps=_json)


def _error_frame(call: JsonRpcCall, error: Any) -> str:
    return sse_frame(_json(error_body(call.id, error, legacy=call.legacy)), event="error")


A2A_CHANNEL = web.AppKey("agora_a2a", A2AChannel)
"""Where a gateway app keeps its ``A2AChannel``."""


def setup(
    app: web.Application,
    options: A2AOptions | None = None,
    *,
    task_ttl: float = DEFAULT_TASK_TTL,
    resolver: ActorResolver | None = None,
) -> A2AChannel:
    """Mount an ``A2AChannel`` on an app from ``gateway.create_app`` (which does it by default)."""
    channel = A2AChannel(options, task_ttl=task_ttl, resolver=resolver)
    channel.setup(app, app[CHANNEL_SERVICES])
    return channel
