"""The server's edge: what one client may hold, and the one line a refused request logs.

Where each limit lives, and why:

- **Headers.** aiohttp's keep-alive timer (``keepalive_timeout``, set in the app's
  ``handler_args``) runs from the moment a connection opens, and again from each answer, and closes
  the connection when no complete request head arrived by then. Set to ``read_timeout`` it is the
  header deadline: a client trickling header lines, or saying nothing, is cut when it fires. An
  idle kept-alive connection closes after the same time.
- **Bodies.** :func:`body_deadline` (a middleware) gives a body ``read_timeout`` from the moment its
  headers were read. A read still waiting then raises :class:`RequestTimeoutError` (408) in
  whichever handler reads, ours or a channel's; a body that nobody reads (a request refused before
  its body) is waited for no longer either, since aiohttp's lingering read stops on that error.
- **Connections per address.** Counted where connections open and close: ``serve`` listens
  through a site (``gateway._server``) that counts each address's open connections and answers
  429 to one too many before reading a byte. A middleware cannot do this: an idle connection or one
  trickling its headers never reaches it, and it learns nothing when a kept-alive connection
  closes. Behind a trusted proxy every connection comes from the proxy and the client is known only
  from the request (the last ``X-Forwarded-For`` hop, as for the rate limits), so there
  :func:`connection_limit` counts requests in flight per forwarded address; a web socket is one
  request for its whole life, so sockets count in both cases, and free their place on close.

A request refused for bad input logs one line (:func:`log_refusal`), wherever it was refused:
by a route (``error_middleware``), by the per-address limit, or by aiohttp's own parser
(:class:`ProtocolLog`). Tracebacks are for faults nobody handled.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware
from pydantic import BaseModel, ValidationError

from ._errors import GatewayError, RequestTimeoutError, TooManyConnectionsError
from ._logs import FIELDS_ATTRIBUTE

__all__ = [
    "AddressCounter",
    "BadRequestError",
    "ProtocolLog",
    "RequestTimeoutError",
    "TooManyConnectionsError",
    "body_deadline",
    "connection_limit",
    "json_body",
    "log_refusal",
    "one_line",
    "page_size",
    "read_body",
    "refused_where",
    "route_template",
]

logger = logging.getLogger("gateway.http")


_REASON_CHARS = 300

# How aiohttp's parser quotes what it choked on: the repr of the bytes (or text), then a caret
# under the spot. Those bytes are the request line (its query) or a header (a cookie, a token);
# a header's name alone ("Missing 'Host' header") is kept.
_QUOTED = re.compile(r"""b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*"|\^""")
_HEADER_NAME = re.compile(r"'[A-Za-z0-9-]{1,40}'")


def _unquoted(match: re.Match[str]) -> str:
    named = _HEADER_NAME.fullmatch(match.group()) and match.string.startswith(" header", match.end())
    return match.group() if named else " "


def parser_reason(exc: HttpProcessingError) -> str:
    """What aiohttp's parser refused, in its words, without the bytes it quotes (``LineTooLong: ...``)."""
    said = _QUOTED.sub(_unquoted, exc.message or "")
    return f"{type(exc).__name__}: {' '.join(said.split()).rstrip(':. ')}"


def one_line(text: str, limit: int = _REASON_CHARS) -> str:
    """``text`` for a log line: whitespace runs as one space, control characters escaped, cut at ``limit``."""
    flat = " ".join(text.split())
    if not flat.isprintable():
        flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def route_template(request: web.Request) -> str:
    """The matched route's canonical path (``/media/{token}``), ``unmatched`` when none matched."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def refused_where(request: web.Request, route: str) -> str:
    """Where a refusal line says a request went: its route's template, or its first segment.

    For a path no route matched, only the gateway's own first segment is written, if it is one:
    the rest may carry what the caller meant to keep (a media token with a slash too many, a bot
    token in a webhook URL). ``/media/…``, ``/…``.
    """
    if route != "unmatched":
        return route
    first, _, rest = request.rel_url.raw_path.lstrip("/").partition("/")
    ours = {resource.canonical.lstrip("/").partition("/")[0] for resource in request.app.router.resources()}
    if first not in ours:
        return "/…"
    return f"/{first}/…" if rest else f"/{first}"


def log_refusal(status: int, code: str, where: str, reason: str, *, fields: Mapping[str, Any] | None = None) -> None:
    """The one line a refused request gets: ``refused <status> <code> <where>: <reason>``.

    Refusals of bad input are INFO; a 5xx answered on purpose (a store that is down) is a WARNING.
    Neither carries a traceback: those are for faults nobody handled. A JSON line also carries
    ``code`` and ``fields`` (a request's ``method``, ``path`` template, ``status`` and ``ms``).
    """
    level = logging.WARNING if status >= 500 else logging.INFO
    extra = {FIELDS_ATTRIBUTE: {**(fields or {}), "code": code}}
    logger.log(level, "refused %s %s %s: %s", status, code, one_line(where, 120), one_line(reason), extra=extra)


class ProtocolLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger (``aiohttp.server``), with malformed requests as one line each.

    aiohttp answers a request it cannot parse (a header line too long, a bad request line, a bad
    ``Content-Length`` or chunk) with 400 and logs the parser's exception with its traceback at
    ERROR. Such a request is the client's mistake, refused correctly: it gets one
    :func:`log_refusal` line. Every other record, a real fault in a handler included, passes as is.
    """

    def __init__(self) -> None:
        super().__init__(logging.getLogger("aiohttp.server"), {})

    def log(self, level: int, msg: object, *args: object, exc_info: Any = None, **kwargs: Any) -> None:
        """Log as aiohttp asked, unless ``exc_info`` is a parser error: then one refusal line."""
        if isinstance(exc_info, HttpProcessingError):
            where = str(msg) % args if args else str(msg)
            reason = parser_reason(exc_info)
            log_refusal(exc_info.code or 400, "bad_http_request", f"({where})", reason)
            return
        super().log(level, msg, *args, exc_info=exc_info, **kwargs)


def _expire(payload: Any, seconds: float) -> None:
    if not payload.is_eof() and payload.exception() is None:
        payload.set_exception(RequestTimeoutError(f"The request body did not arrive within {seconds:g} s"))


def body_deadline(seconds: float, *, longer: Mapping[str, float] | None = None) -> Middleware:
    """A middleware giving each request's body ``seconds`` to arrive in full.

    The timer starts when the handler does (just after the headers were read) and stops when the
    body's last byte arrives; requests without a body start none. ``longer`` gives some routes
    (by their canonical path) more: an upload of many megabytes from a phone takes longer than
    a JSON body.
    """
    allowances = dict(longer or {})

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        payload = request.content
        if not payload.is_eof():
            route = request.match_info.route.resource
            allowed = allowances.get(route.canonical, seconds) if route is not None else seconds
            timer = asyncio.get_running_loop().call_later(allowed, _expire, payload, allowed)
            payload.on_eof(timer.cancel)
        return await handler(request)

    return middleware


class AddressCounter:
    """Open connections per address, up to ``limit`` each (in this process)."""

    __slots__ = ("_open", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def acquire(self, address: str) -> bool:
        """Count one more connection of ``address``; False (and nothing counted) when it has ``limit``."""
        held = self._open.get(address, 0)
        if held >= self.limit:
            return False
        self._open[address] = held + 1
        return True

    def release(self, address: str) -> None:
        """One connection of ``address`` closed."""
        held = self._open.get(address, 0) - 1
        if held > 0:
            self._open[address] = held
        else:
            self._open.pop(address, None)

    def held(self, address: str) -> int:
        """How many connections ``address`` holds now."""
        return self._open.get(address, 0)


def connection_limit(counter: AddressCounter, address_of: Callable[[web.Request], str | None]) -> Middleware:
    """A middleware counting requests in flight per ``address_of(request)`` (behind a trusted proxy).

    One over ``counter.limit`` is answered 429 ``too_many_connections`` (and logged here: no route ran).
    """

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        address = address_of(request)
        if address is None:
            return await handler(request)
        if not counter.acquire(address):
            refusal = TooManyConnectionsError(f"Too many connections from {address}; close some and try again")
            # By the route's template, as error_middleware's refusals: a path as sent may hold a token.
            route = route_template(request)
            where = refused_where(request, route)
            ms = round((time.perf_counter() - started) * 1000, 1)
            fields = {"method": request.method, "path": route, "status": refusal.status, "ms": ms}
            log_refusal(refusal.status, refusal.code, f"{request.method} {where}", str(refusal), fields=fields)
            return web.json_response({"code": refusal.code, "message": str(refusal)}, status=refusal.status)
        try:
            return await handler(request)
        finally:
            counter.release(address)

    return middleware


async def read_body(request: web.Request, limit: int) -> bytes:
    """The request's raw body, refused past ``limit`` bytes whether declared or chunked.

    A chunked body declares no length: what arrives is counted, and reading stops one byte past
    the limit (nothing more is buffered).

    Raises:
        HTTPRequestEntityTooLarge: The body is longer than ``limit`` (413).
    """
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    raw = bytearray()
    while len(raw) <= limit:
        chunk = await request.content.read(limit + 1 - len(raw))
        if not chunk:
            break
        raw.extend(chunk)
    if len(raw) > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=len(raw))
    return bytes(raw)


class BadRequestError(GatewayError):
    """A request the routes refuse before doing anything: ``code`` and ``status`` (400 unless said)."""

    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


M = TypeVar("M", bound=BaseModel)


async def json_body(request: web.Request, model: type[M], *, limit: int) -> M:
    """The request's JSON body as ``model``.

    Raises:
        web.HTTPRequestEntityTooLarge: A declared length over ``limit`` (nothing is read), or a
            body that grows past it.
        BadRequestError: Not ``application/json`` (415), or invalid for ``model`` (400, naming
            the first five fields at fault).
    """
    if request.content_length is not None and request.content_length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=request.content_length)
    if request.content_type != "application/json":
        raise BadRequestError("unsupported_media_type", "Send application/json", status=415)
    raw = await read_body(request, limit)
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise BadRequestError("invalid_request", f"Invalid request: {fields}") from None


def page_size(request: web.Request, *, default: int, maximum: int) -> int:
    """A list route's ``?limit=`` (``default`` when absent).

    Raises:
        BadRequestError: Not a whole number from 1 to ``maximum`` (400).
    """
    raw = request.query.get("limit", str(default))
    if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= maximum):
        raise BadRequestError("invalid_request", f"limit must be a whole number from 1 to {maximum}")
    return int(raw)
