"""The access log: one line per HTTP request, by its route's template, never its secrets.

``access_log`` is the app's first (outermost) middleware. For each request it

- opens the request's log scope (``gateway._logs``): ``channel`` is the channel whose
  ``setup`` added the matched route (``channel_routes``), run, thread and actor are cleared;
  ``resolve_actor`` and ``identify`` add the actor, so every line the request logs carries them;
- logs one line on ``gateway.access`` when it is answered: ``GET /media/{token} 200 3.1 ms``, with
  the fields ``method``, ``path`` (the route's canonical path, ``unmatched`` when none matched),
  ``status`` and ``ms`` in a JSON line. Never the actual path, the query string, a header or a
  cookie: a token lives in one of those, a route's template holds none.

A file (``/assets/``, ``/static/``) is logged when it is sent, with the status it was sent with
(``304`` unchanged, ``206`` a range): that status is known only once the file is opened.

A web socket logs two lines: one when it is upgraded (``101 upgraded``, from the
``on_response_prepare`` hook ``access_upgraded``, which ``add_routes`` installs) and one when it
closes, with ``duration_s`` and the ``close_code``.

Answers of 400 and above are refusals, and a refusal logs one line where it was refused: the
access log writes none for it, so no request is logged twice. A route's refusal (a raised error, a
``json_error`` answer) is logged by ``error_middleware`` (``refused 404 not_found GET /x: why``,
logger ``gateway.http``), and that line carries the same fields (and the refusal's ``code``); a
channel's own (the web socket's 401, a webhook's bad signature) by the channel. A refusal a
channel answers in its protocol with a 200 (a JSON-RPC error, a ``RUN_ERROR``) has its access
line and the channel's line saying why. An exception nobody handled is answered 500 and logged by
aiohttp with its traceback. Requests refused before the app sees them (a malformed request, one
connection too many) have their refusal line only (``gateway._guard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp.web_urldispatcher import AbstractResource

from ._guard import log_refusal, route_template
from ._logs import FIELDS_ATTRIBUTE, log_scope

__all__ = ["CHANNEL_OF_ROUTE", "access_log", "access_upgraded", "channel_routes"]

logger = logging.getLogger("gateway.access")

CHANNEL_OF_ROUTE = web.AppKey("agora_channel_of_route", dict[AbstractResource, str])
"""Which channel added each route (``channel_routes``): a request's lines name it as ``channel``."""

_UPGRADED = web.RequestKey("agora_upgraded_at", float)
"""When a request's web socket was upgraded (``time.perf_counter()``)."""

_FILE_STARTED = web.RequestKey("agora_file_started_at", float)
"""When a request answered with a file started: its line is written when the file is sent."""


@contextlib.contextmanager
def channel_routes(app: web.Application, channel: str) -> Iterator[None]:
    """Attribute the routes ``app`` gains inside the ``with`` block to ``channel`` (around its ``setup``)."""
    before = len(app.router.resources())
    yield
    owned = app.get(CHANNEL_OF_ROUTE)
    if owned is None:
        owned = app[CHANNEL_OF_ROUTE] = {}
    for resource in list(app.router.resources())[before:]:
        owned[resource] = channel


def _fields(request: web.Request, path: str, status: int | None, **more: Any) -> dict[str, Any]:
    return {FIELDS_ATTRIBUTE: {"method": request.method, "path": path, "status": status, **more}}


@web.middleware
async def access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Log the request once it is answered (see the module's docstring), in its own log scope."""
    started = time.perf_counter()
    resource = request.match_info.route.resource
    channels = request.app.get(CHANNEL_OF_ROUTE)
    channel = channels.get(resource) if channels is not None and resource is not None else None
    path = route_template(request)
    with log_scope(run_id=None, thread_id=None, actor=None, channel=channel):
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # a redirect: error_middleware answers the others
            if exc.status < 400:
                _answered(request, path, exc.status, started)
            raise
        except asyncio.CancelledError:
            if logger.isEnabledFor(logging.INFO):  # answered nothing, and nothing else says so
                ms = round((time.perf_counter() - started) * 1000, 1)
                logger.info(
                    "%s %s cancelled after %.1f ms", request.method, path, ms, extra=_fields(request, path, None, ms=ms)
                )
            raise
        # An exception (aiohttp answers 500 and logs its traceback), or an answer of 400 and above
        # (a refusal: it logs its own line where it was refused), is not logged here: never twice.
        upgraded = request.get(_UPGRADED)
        if upgraded is not None:
            _closed(request, path, response, upgraded)
        elif isinstance(response, web.FileResponse) and not response.prepared:
            # A file's status (200, 206, 304, 416...) is set when it is opened, as it is sent:
            # its line is written then, by access_upgraded.
            request[_FILE_STARTED] = started
        elif response.status < 400:
            _answered(request, path, response.status, started)
        return response


def _answered(request: web.Request, path: str, status: int, started: float) -> None:
    if logger.isEnabledFor(logging.INFO):
        ms = round((time.perf_counter() - started) * 1000, 1)
        logger.info("%s %s %d %.1f ms", request.method, path, status, ms, extra=_fields(request, path, status, ms=ms))


def _closed(request: web.Request, path: str, response: web.StreamResponse, upgraded: float) -> None:
    if logger.isEnabledFor(logging.INFO):
        seconds = round(time.perf_counter() - upgraded, 3)
        code = response.close_code if isinstance(response, web.WebSocketResponse) else None
        logger.info(
            "%s %s closed after %.3f s (code %s)",
            request.method,
            path,
            seconds,
            code,
            extra=_fields(request, path, 101, event="close", duration_s=seconds, close_code=code),
        )


async def access_upgraded(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: log a web socket's upgrade (its close: ``access_log``) and a file's answer."""
    started = request.get(_FILE_STARTED)
    if started is not None and isinstance(response, web.FileResponse):
        path = route_template(request)
        if response.status < 400:
            _answered(request, path, response.status, started)
        else:  # refused as it was opened (a special file, a range past its end): the one line is a refusal
            ms = round((time.perf_counter() - started) * 1000, 1)
            code = "not_found" if response.status == 404 else "http_error"
            fields = {"method": request.method, "path": path, "status": response.status, "ms": ms}
            log_refusal(response.status, code, f"{request.method} {path}", response.reason, fields=fields)
        return
    if response.status != 101:
        return
    request[_UPGRADED] = time.perf_counter()
    if logger.isEnabledFor(logging.INFO):
        path = route_template(request)
        logger.info("%s %s 101 upgraded", request.method, path, extra=_fields(request, path, 101, event="upgrade"))
