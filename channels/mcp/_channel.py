"""``McpChannel``: the gateway's tools to any MCP client, over Streamable HTTP at ``/mcp``.

``POST /mcp`` takes one JSON-RPC message (a batch only under revision 2025-03-26) and answers
``application/json``, or ``text/event-stream`` for a call to an action when the client accepts
it (the approval is asked on that stream with ``elicitation/create``). ``GET /mcp`` is 405: we
send nothing outside a call's own stream. ``DELETE /mcp`` ends the session.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from mcp import types
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS
from pydantic import ValidationError

from gateway import (
    CHANNEL_SERVICES,
    ActorResolver,
    Channel,
    ChannelServices,
    GatewayError,
    InvalidTokenError,
    SseStream,
    UnauthenticatedError,
    UnknownAgentError,
    one_line,
    sse_frame,
)
from tools import Actor, AgoraError

from ._calls import MCP_CAPABILITIES, CallFollower, answer_elicitation, list_tools, visible_tools
from ._sessions import DEFAULT_SESSION_TTL, McpSession, SessionBook
from ._wire import BATCH_VERSION, BadMessage, Message, error_message, read_body, read_message, response_message

__all__ = ["MCP_CHANNEL", "McpChannel", "setup"]

logger = logging.getLogger("channels.mcp")

VERSIONS = tuple(v for v in SUPPORTED_PROTOCOL_VERSIONS if v >= BATCH_VERSION)
"""The revisions served (Streamable HTTP came with 2025-03-26); the newest is offered by default."""

MAX_BODY = 256 * 1024
"""Bytes a ``POST /mcp`` body may hold."""

MAX_BATCH = 16
"""Messages a batch (2025-03-26 only) may hold."""

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


class _Refused(AgoraError):
    """A request refused at the HTTP level: status and JSON-RPC error body."""

    def __init__(self, status: int, code: int, message: str, id: str | int | None = None) -> None:
        super().__init__(message)
        self.status, self.rpc_code, self.message, self.id = status, code, message, id


class McpChannel(Channel):
    """The MCP server of one gateway app.

    Args:
        path: Where the endpoint is mounted.
        session_ttl: Seconds a session lives after its last use.
        call_timeout: Seconds a ``tools/call`` answer waits for its run (an approval included);
            past it the call is answered as still running and goes on.
        heartbeat: Seconds between keep-alive comments on a call's event stream.
        read_timeout: Seconds a request body may take to arrive (slower: 408, the connection freed).
        resolver: Who callers are; by default a signed actor token in ``Authorization: Bearer``.
        allowed_origins: Browser origins (``https://app.example``) allowed besides the gateway's
            own. A request with any other ``Origin`` is 403, as the transport asks (DNS
            rebinding); clients that are not browsers send none.
    """

    name = "mcp"
    capabilities = MCP_CAPABILITIES

    services: ChannelServices
    sessions: SessionBook

    def __init__(
        self,
        *,
        path: str = "/mcp",
        session_ttl: float = DEFAULT_SESSION_TTL,
        call_timeout: float = 900.0,
        heartbeat: float = 15.0,
        read_timeout: float = 30.0,
        resolver: ActorResolver | None = None,
        allowed_origins: Sequence[str] = (),
    ) -> None:
        self.path = path.rstrip("/") or "/mcp"
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.session_ttl = session_ttl
        self.call_timeout = call_timeout
        self.heartbeat = heartbeat
        self.read_timeout = read_timeout
        self.resolver = resolver

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount ``POST``, ``GET`` and ``DELETE`` on ``path``."""
        self.services = services
        self.sessions = SessionBook(services.state("mcp"), ttl=self.session_ttl)
        app[MCP_CHANNEL] = self
        app.router.add_post(self.path, self.post)
        app.router.add_get(self.path, self.get)
        app.router.add_delete(self.path, self.delete)

    # -- who and which session ----------------------------------------------------------------------

    async def authenticate(self, request: web.Request) -> Actor:
        """The caller's actor.

        Raises:
            UnauthenticatedError: No credential.
            InvalidTokenError: A bad one.
        """
        if self.resolver is not None:
            actor = await self.resolver.resolve(request)
            if actor is None:
                raise UnauthenticatedError("Authenticate to use this MCP server")
            return actor
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError("Send Authorization: Bearer <signed actor token>")
        return await self.services.verify_token(token.strip())

    def _origin_allowed(self, request: web.Request) -> bool:
        """No ``Origin`` (not a browser), the gateway's own, or one of ``allowed_origins``."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        origin = origin.rstrip("/")
        own = {f"{request.scheme}://{request.host}"}
        public = self.services.settings.public_base_url
        if public:
            parts = urlsplit(str(public))
            own.add(f"{parts.scheme}://{parts.netloc}")
        return origin in own or origin in self.allowed_origins

    def _forbidden_origin(self, request: web.Request) -> web.Response:
        self._log(request, "403 origin", f"Origin {request.headers.get('Origin', '')!r} is not allowed")
        return _json(error_message(None, types.INVALID_REQUEST, "Forbidden: this Origin is not allowed"), status=403)

    async def _session(self, request: web.Request, actor: Actor) -> McpSession:
        """The request's session, checked: present, live, the caller's, a revision we speak."""
        session_id = request.headers.get(SESSION_HEADER, "").strip()
        if not session_id:
            raise _Refused(400, types.INVALID_REQUEST, f"Bad Request: send the {SESSION_HEADER} header")
        session = await self.sessions.get(session_id)
        # Someone else's session reads as no session: its existence is not theirs to learn.
        if session is None or not session.owned_by(actor):
            raise _Refused(404, types.INVALID_REQUEST, "Session not found: initialize again")
        version = request.headers.get(VERSION_HEADER, "").strip()
        if version and version not in VERSIONS:
            raise _Refused(400, types.INVALID_REQUEST, f"Bad Request: unsupported {VERSION_HEADER}")
        if version and version != session.protocol_version:
            # What the session negotiated rules (batches, above all): a header naming another is invalid.
            raise _Refused(400, types.INVALID_REQUEST, f"Bad Request: {VERSION_HEADER} is not the session's")
        return session

    # -- routes -------------------------------------------------------------------------------------

    async def get(self, request: web.Request) -> web.Response:
        """``GET /mcp``: 405; this server sends nothing outside a call's own stream."""
        return web.Response(status=405, headers={"Allow": "POST, DELETE"})

    async def delete(self, request: web.Request) -> web.Response:
        """``DELETE /mcp``: end the caller's session (204); unknown or someone else's: 404."""
        if not self._origin_allowed(request):
            return self._forbidden_origin(request)
        try:
            actor = await self.authenticate(request)
            session = await self._session(request, actor)
        except (UnauthenticatedError, InvalidTokenError) as exc:
            return self._unauthenticated(request, exc)
        except _Refused as exc:
            return self._refused(request, exc)
        await self.sessions.end(session.session_id)
        logger.info("MCP session of %s ended", one_line(actor.id, 80))
        return web.Response(status=204)

    async def post(self, request: web.Request) -> web.StreamResponse:
        """``POST /mcp``: one JSON-RPC message (or a 2025-03-26 batch).

        Unauthenticated: 401 before the body is read. A body over ``MAX_BODY``: 413. A request
        without a session (but ``initialize``): 400; an unknown or expired one: 404. Everything
        else refused is a JSON-RPC error; each refusal logs one line.
        """
        if not self._origin_allowed(request):
            return self._forbidden_origin(request)
        try:
            actor = await self.authenticate(request)
        except (UnauthenticatedError, InvalidTokenError) as exc:
            return self._unauthenticated(request, exc)
        try:
            value = read_body(await self._read(request))
            if isinstance(value, list):
                return await self._batch(request, actor, value)
            message = read_message(value)
            if isinstance(message, types.JSONRPCRequest) and message.method in _CHARGED:
                # A session and a call each keep something (a session, a thread and its run): charged
                # like a turn, before anything is kept (429 with Retry-After from the error middleware).
                await self.services.limit(actor, self.services.client_address(request))
            if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                return await self._initialize(request, actor, message)
            session = await self._session(request, actor)
            return await self._one(request, actor, session, message)
        except BadMessage as exc:
            # A body that is no JSON-RPC call at all is a bad HTTP request, as the SDK's server
            # answers it; a call refused for its method or params is answered in JSON-RPC (200).
            status = 200 if exc.rpc_code in (types.METHOD_NOT_FOUND, types.INVALID_PARAMS) else 400
            return self._refused(request, _Refused(status, exc.rpc_code, exc.message, exc.id))
        except _Refused as exc:
            return self._refused(request, exc)

    async def _read(self, request: web.Request) -> bytes:
        """The whole body, however it is chunked: at most ``MAX_BODY`` bytes, within ``read_timeout``.

        ``StreamReader.read(n)`` answers what has arrived so far, so a body sent in pieces is
        read until its end; one that trickles in slower than ``read_timeout`` is 408.
        """
        if request.content_length is not None and request.content_length > MAX_BODY:
            raise _Refused(413, types.INVALID_REQUEST, f"Request body over {MAX_BODY} bytes")
        raw = bytearray()
        try:
            async with asyncio.timeout(self.read_timeout):
                while chunk := await request.content.read(MAX_BODY + 1 - len(raw)):
                    raw.extend(chunk)
                    if len(raw) > MAX_BODY:
                        raise _Refused(413, types.INVALID_REQUEST, f"Request body over {MAX_BODY} bytes")
        except TimeoutError:
            raise _Refused(
                408, types.INVALID_REQUEST, f"Request body not received within {self.read_timeout:.0f} s"
            ) from None
        return bytes(raw)

    async def _initialize(self, request: web.Request, actor: Actor, message: types.JSONRPCRequest) -> web.Response:
        try:
            params = types.InitializeRequestParams.model_validate(message.params or {})
        except ValidationError:
            raise BadMessage(
                code=types.INVALID_PARAMS, message="Invalid params for initialize", id=message.id
            ) from None
        try:
            agent = self.services.runtime.agent(request.query.get("agent") or None)
        except UnknownAgentError:
            raise _Refused(404, types.INVALID_REQUEST, "No such agent", message.id) from None
        if not agent.usable_by(actor):
            raise _Refused(404, types.INVALID_REQUEST, "No such agent", message.id)
        version = params.protocolVersion if params.protocolVersion in VERSIONS else VERSIONS[-1]
        elicitation = params.capabilities.elicitation
        asks = elicitation is not None and (elicitation.form is not None or elicitation.url is None)
        client = f"{params.clientInfo.name} {params.clientInfo.version}"
        session = await self.sessions.open(
            actor, agent=agent.name, protocol_version=version, elicitation=asks, client=client
        )
        branding = self.services.branding
        result = types.InitializeResult(
            protocolVersion=version,
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(listChanged=False)),
            serverInfo=types.Implementation(name="agora-gateway", title=branding.name, version=_version()),
        )
        logger.info(
            "MCP session opened by %s (%s, %s, elicitation %s)",
            one_line(actor.id, 80),
            one_line(client, 120),
            version,
            "yes" if asks else "no",
        )
        return _json(response_message(message.id, result), headers={SESSION_HEADER: session.session_id})

    async def _batch(self, request: web.Request, actor: Actor, values: list[Any]) -> web.StreamResponse:
        session = await self._session(request, actor)
        if session.protocol_version != BATCH_VERSION:
            raise BadMessage(
                code=types.INVALID_REQUEST, message=f"Invalid Request: batches exist only in {BATCH_VERSION}"
            )
        if not values or len(values) > MAX_BATCH:
            raise BadMessage(
                code=types.INVALID_REQUEST, message=f"Invalid Request: a batch holds 1 to {MAX_BATCH} messages"
            )
        if any(isinstance(v, dict) and v.get("method") in _CHARGED for v in values):
            await self.services.limit(actor, self.services.client_address(request))  # one charge per batch
        answers: list[dict[str, Any]] = []
        for value in values:
            try:
                message = read_message(value)
                if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                    raise BadMessage(
                        code=types.INVALID_REQUEST,
                        message="Invalid Request: initialize is never batched",
                        id=message.id,
                    )
                answer = await self._handle(request, actor, session, message, stream=None)
            except BadMessage as exc:
                self._log(request, exc.rpc_code, exc.message)
                answer = error_message(exc.id, exc.rpc_code, exc.message)
            if answer is not None:
                answers.append(answer)
        if not answers:
            return web.Response(status=202)
        return web.json_response(answers, dumps=_dumps)

    async def _one(
        self, request: web.Request, actor: Actor, session: McpSession, message: Message
    ) -> web.StreamResponse:
        if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call" and self._streams(request):
            kind = self._kind_of(message)
            if kind == "action" and session.elicitation:
                return await self._streamed(request, actor, session, message)
        answer = await self._handle(request, actor, session, message, stream=None)
        if answer is None:
            return web.Response(status=202)
        return _json(answer)

    @staticmethod
    def _streams(request: web.Request) -> bool:
        return "text/event-stream" in request.headers.get("Accept", "")

    def _kind_of(self, message: types.JSONRPCRequest) -> str | None:
        name = (message.params or {}).get("name")
        tool = self.services.runtime.registry.get(name) if isinstance(name, str) else None
        return tool.kind if tool is not None else None

    async def _streamed(
        self, request: web.Request, actor: Actor, session: McpSession, message: types.JSONRPCRequest
    ) -> web.StreamResponse:
        """A call answered on an event stream: the elicitation first when asked, then the result."""
        stream = SseStream(
            request, heartbeat=self.heartbeat, content_type="text/event-stream", cache_control="no-cache"
        )

        async def send(body: dict[str, Any]) -> None:
            await stream.write(sse_frame(_dumps(body), event="message"))

        async def pump() -> None:
            answer = await self._handle(request, actor, session, message, stream=send)
            if answer is not None:
                await send(answer)

        if not await stream.serve(pump()):
            logger.info("MCP client left the stream of a call; its run goes on")
        return stream.response

    async def _handle(
        self, request: web.Request, actor: Actor, session: McpSession, message: Message, *, stream: Any
    ) -> dict[str, Any] | None:
        """The answer to one message (``None`` for a notification or a response)."""
        if isinstance(message, types.JSONRPCNotification):
            return None
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            await answer_elicitation(self.services, actor, session, message)
            return None
        try:
            match message.method:
                case "ping":
                    return response_message(message.id, types.EmptyResult())
                case "tools/list":
                    tools = await visible_tools(self.services, actor, session)
                    return response_message(message.id, list_tools(self.services, tools))
                case "tools/call":
                    return await self._call(actor, session, message, stream)
                case _:
                    raise BadMessage(code=types.METHOD_NOT_FOUND, message="Method not found", id=message.id)
        except BadMessage as exc:
            self._log(request, exc.rpc_code, exc.message, message.method)
            return error_message(exc.id, exc.rpc_code, exc.message)
        except GatewayError:
            raise  # an unreachable store (503): the error middleware answers and logs
        except Exception:
            logger.exception("MCP %s failed", message.method)
            return error_message(message.id, types.INTERNAL_ERROR, "Internal error")

    async def _call(
        self, actor: Actor, session: McpSession, message: types.JSONRPCRequest, stream: Any
    ) -> dict[str, Any]:
        try:
            params = types.CallToolRequestParams.model_validate(message.params or {})
        except ValidationError:
            raise BadMessage(
                code=types.INVALID_PARAMS, message="Invalid params for tools/call", id=message.id
            ) from None
        visible = {d.name for d in await visible_tools(self.services, actor, session)}
        if params.name not in visible:
            # The spec's answer for an unknown tool; a tool hidden from this caller reads the same.
            raise BadMessage(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}"[:300], id=message.id)
        follower = CallFollower(self.services, actor, stream, timeout=self.call_timeout)
        result = await follower.call(session, params.name, params.arguments or {})
        return response_message(message.id, result)

    # -- refusals -----------------------------------------------------------------------------------

    def _log(self, request: web.Request, code: int | str, reason: str, method: str | None = None) -> None:
        target = f"{request.method} {self.path}" + (f" {method}" if method else "")
        logger.info("MCP refused %s: %s: %s", one_line(target, 200), code, one_line(reason))

    def _unauthenticated(self, request: web.Request, exc: GatewayError) -> web.Response:
        self._log(request, f"401 {exc.code}", str(exc))
        challenge = 'Bearer realm="mcp"' + (', error="invalid_token"' if isinstance(exc, InvalidTokenError) else "")
        return web.json_response(
            {"code": exc.code, "message": str(exc)}, status=401, headers={"WWW-Authenticate": challenge}
        )

    def _refused(self, request: web.Request, exc: _Refused) -> web.Response:
        self._log(request, exc.rpc_code if exc.status == 200 else f"{exc.status} {exc.rpc_code}", exc.message)
        return _json(error_message(exc.id, exc.rpc_code, exc.message), status=exc.status)


_CHARGED = frozenset({"initialize", "tools/call"})
"""The methods that keep something in the store, charged to the caller's rate limit."""


def _version() -> str:
    try:
        return importlib.metadata.version("agora-gateway")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers, dumps=_dumps)


MCP_CHANNEL = web.AppKey("agora_mcp", McpChannel)
"""Where a gateway app keeps its ``McpChannel``."""


def setup(app: web.Application, **options: Any) -> McpChannel:
    """Mount an ``McpChannel`` on an app from ``gateway.create_app`` (which does it by default)."""
    channel = McpChannel(**options)
    channel.setup(app, app[CHANNEL_SERVICES])
    return channel
