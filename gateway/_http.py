"""The HTTP API under ``/agent``, media, health, metrics and the demo page."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, field_validator

from renderers import ASSETS_PATH, MediaTokenError, MediaUnavailableError, published_path
from tools import AgoraError

from ._access import access_upgraded
from ._agents_http import add_agent_routes
from ._console import add_console_routes
from ._cursors import decode_cursor, encode_cursor
from ._errors import GatewayError, QuotaExceededError
from ._guard import BadRequestError, json_body, log_refusal, page_size, refused_where, route_template
from ._health import health_report
from ._queue_http import add_queue_routes
from ._services import SERVICES, GatewayServices, RateLimitedError, UnauthenticatedError
from ._staff import add_staff_routes
from ._uploads import upload_attachment
from ._usage_http import add_usage_routes
from .events import RUN_EVENT_ADAPTER

__all__ = ["STATIC_DIR", "add_routes", "error_middleware", "json_error"]

_HERE = Path(__file__).resolve().parent
STATIC_DIR = _HERE / "static" if (_HERE / "static").is_dir() else _HERE.parent / "static"
"""The widget and the demo page: ``gateway/static`` in a wheel, ``static/`` in a checkout."""

_MAX_JSON_BODY = 64 * 1024
_MAX_RENAME_BODY = 4 * 1024
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_TITLE_MAX = 200
"""Characters of a name an owner gives a thread."""
_PAGE_DEFAULT, _PAGE_MAX = 20, 100


_REFUSAL = web.ResponseKey("agora_refusal", tuple)
"""On an answer made by ``json_error``: its ``(code, message)``, for the refusal's log line."""


def json_error(status: int, code: str, message: str, *, log_as: str | None = None, **extra: Any) -> web.Response:
    """A JSON error answer ``{code, message}``; ``error_middleware`` logs it as one line.

    The line gives ``log_as`` as the reason when set (details the client is not told).
    """
    response = web.json_response({"code": code, "message": message, **extra}, status=status)
    response[_REFUSAL] = (code, log_as or message)
    return response


@web.middleware
async def error_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Translate errors to JSON ``{code, message}`` with the right status; count and time requests.

    Every refusal (an error raised, or an answer made by ``json_error``) logs one line here, on
    every route; a channel logs only the refusals it answers in-band (a JSON-RPC error, a
    ``RUN_ERROR``), which never reach this middleware as errors. That line is the request's only
    one (the access log writes none for a refusal): it carries the access log's fields
    (``method``, ``path``, ``status``, ``ms``) and the ``code``.
    """
    started = time.perf_counter()
    services = request.app.get(SERVICES)
    response: web.StreamResponse
    try:
        response = await handler(request)
    except RateLimitedError as exc:
        response = json_error(exc.status, exc.code, str(exc), retry_after=round(exc.retry_after, 1))
        response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
    except QuotaExceededError as exc:
        response = json_error(exc.status, exc.code, str(exc), period=exc.period, used=exc.used, limit=exc.limit)
    except GatewayError as exc:
        response = json_error(exc.status, exc.code, str(exc))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status, "http_error")
        # A handler that said why (``HTTPForbidden(text="bad signature")``) is answered with its words.
        said = exc.text if exc.text and exc.text != f"{exc.status}: {exc.reason}" else None
        response = json_error(exc.status, code, said or exc.reason)
    except AgoraError as exc:
        response = json_error(400, "bad_request", str(exc))
    except OSError as exc:
        # aiohttp's static files resolve the path on disk: a name too long for the file system
        # (or otherwise unusable) is a file we do not have.
        if not isinstance(request.match_info.route.resource, web.StaticResource):
            raise
        response = json_error(404, "not_found", f"Not Found ({exc.strerror or 'unusable path'})")
    route = route_template(request)
    refusal = response.get(_REFUSAL)
    if refusal is not None:
        where = refused_where(request, route)
        ms = round((time.perf_counter() - started) * 1000, 1)
        access = {"method": request.method, "path": route, "status": response.status, "ms": ms}
        log_refusal(response.status, refusal[0], f"{request.method} {where}", refusal[1], fields=access)
    if services is not None:
        services.metrics.http_count(route, str(response.status)).inc()
        services.metrics.http_time(route).observe(time.perf_counter() - started)
        if not response.prepared:
            services.identity.attach_cookie(request, response)
    return response


class _ApproveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_call_id: str = Field(pattern=_ID.pattern)
    remember: bool = False


class _RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tool_call_id: str = Field(pattern=_ID.pattern)
    reason: str | None = Field(default=None, max_length=500)


class _RenameBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(max_length=_TITLE_MAX)
    """The thread's new name; ``null`` gives it back its first message."""

    @field_validator("title")
    @classmethod
    def _one_printable_line(cls, title: str | None) -> str | None:
        if title is None:
            return None
        title = title.strip()
        if not title:
            raise ValueError("must not be blank (send null to go back to the first message)")
        if not title.isprintable():  # control and format characters, lone surrogates, line breaks
            raise ValueError("must be one line of printable characters")
        return title


def _services(request: web.Request) -> GatewayServices:
    return request.app[SERVICES]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def tools_catalog(request: web.Request) -> web.Response:
    """``GET /agent/tools?agent=``: the tools this caller may reach, with their presentation."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    name = request.query.get("agent")
    agent = None if name == "*" else services.runtime.agent_for(name, actor)
    return web.json_response(await services.runtime.registry.catalog_for(actor, agent))


async def approve(request: web.Request) -> web.Response:
    """``POST /agent/tool-call/approve`` ``{tool_call_id, remember?}``."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    body: _ApproveBody = await json_body(request, _ApproveBody, limit=_MAX_JSON_BODY)
    record = await services.runtime.decide(body.tool_call_id, actor, approve=True, via="web", remember=body.remember)
    return web.json_response({"tool_call_id": record.tool_call_id, "status": record.status})


async def reject(request: web.Request) -> web.Response:
    """``POST /agent/tool-call/reject`` ``{tool_call_id, reason?}``."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    body: _RejectBody = await json_body(request, _RejectBody, limit=_MAX_JSON_BODY)
    record = await services.runtime.decide(body.tool_call_id, actor, approve=False, reason=body.reason, via="web")
    return web.json_response({"tool_call_id": record.tool_call_id, "status": record.status})


async def cancel_run(request: web.Request) -> web.Response:
    """``POST /agent/runs/{run_id}/cancel``."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    run_id = request.match_info["run_id"]
    if not _ID.match(run_id):
        raise BadRequestError("invalid_request", "Bad run id")
    await services.runtime.cancel(run_id, actor)
    run = await services.runtime.get_run(run_id)
    return web.json_response({"run_id": run_id, "status": run.status})


async def thread_history(request: web.Request) -> web.Response:
    """``GET /agent/threads/{thread_id}?after=``: messages, events and pending approvals (owner only)."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _thread_id(request)
    thread = await services.runtime.check_thread_access(thread_id, actor)
    try:
        after = max(0, int(request.query.get("after", "0")))
    except ValueError:
        raise BadRequestError("invalid_request", "after must be an integer") from None
    store = services.runtime.store
    events = await store.read_events(thread_id, after, limit=1000)
    body = {
        "thread_id": thread_id,
        "owner_id": thread.owner_id,
        "created_at": thread.created_at,
        "messages": [m.model_dump(mode="json") for m in await store.get_messages(thread_id)],
        "events": [RUN_EVENT_ADAPTER.dump_python(e, mode="json") for e in events],
        "last_seq": await store.last_seq(thread_id),
        "pending_approvals": [
            {
                "tool_call_id": a.tool_call_id,
                "tool": a.tool,
                "confirmation": a.confirmation.model_dump(),
                "expires_at": a.expires_at,
            }
            for a in await store.pending_approvals(thread_id)
        ],
    }
    return web.json_response(body, dumps=_dumps)


def _thread_id(request: web.Request) -> str:
    thread_id = request.match_info["thread_id"]
    if not _ID.match(thread_id):
        raise BadRequestError("invalid_request", "Bad thread id")
    return thread_id


async def list_threads(request: web.Request) -> web.Response:
    """``GET /agent/threads?limit=&cursor=``: the caller's threads, newest activity first.

    Answers ``{threads: [{thread_id, title, channel, created_at, last_activity}], next_cursor}``;
    ``next_cursor`` (``null`` on the last page) asks for the next page.
    """
    services = _services(request)
    actor = await services.resolve_actor(request)
    limit = page_size(request, default=_PAGE_DEFAULT, maximum=_PAGE_MAX)
    cursor = request.query.get("cursor")
    before = decode_cursor(services.secret, actor, cursor, purpose="threads") if cursor is not None else None
    lines = await services.runtime.threads.for_owner(actor, before=before, limit=limit + 1)
    page = lines[:limit]
    more = len(lines) > limit
    body = {
        "threads": [line.model_dump(exclude={"last_activity_ts"}) for line in page],
        "next_cursor": encode_cursor(
            services.secret, actor, (page[-1].last_activity_ts, page[-1].thread_id), purpose="threads"
        )
        if more
        else None,
    }
    return web.json_response(body, headers={"Cache-Control": "no-store"}, dumps=_dumps)


async def rename_thread(request: web.Request) -> web.Response:
    """``PATCH /agent/threads/{thread_id}`` ``{title}``: name the thread (``null``: its first message again)."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _thread_id(request)
    body: _RenameBody = await json_body(request, _RenameBody, limit=_MAX_RENAME_BODY)
    title = await services.runtime.threads.rename(thread_id, actor, body.title)
    return web.json_response({"thread_id": thread_id, "title": title}, dumps=_dumps)


async def delete_thread(request: web.Request) -> web.Response:
    """``DELETE /agent/threads/{thread_id}``: erase the thread and everything of it (owner only), 204.

    A running run is stopped first, a parked one ends (its approvals go with the thread).
    """
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _thread_id(request)
    await services.runtime.threads.delete(thread_id, actor)
    return web.Response(status=204)


async def export_thread(request: web.Request) -> web.Response:
    """``GET /agent/threads/{thread_id}/export``: the owner's copy of everything the thread holds (JSON file)."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _thread_id(request)
    data = await services.runtime.threads.export(thread_id, actor)
    filename = f"thread-{thread_id.replace(':', '_')}.json"
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return web.json_response(data, headers=headers, dumps=_dumps)


async def media(request: web.Request) -> web.Response:
    """``GET /media/{token}``: rendered images and documents, behind signed, expiring tokens."""
    services = _services(request)
    try:
        item = await services.media.get(request.match_info["token"])
    except MediaTokenError as exc:
        status = {"expired": 410, "not_found": 404}.get(exc.reason, 403)
        return json_error(status, f"media_{exc.reason}", str(exc))
    except MediaUnavailableError as exc:
        message = "Media are unavailable right now; try again"
        return json_error(503, "media_unavailable", message, log_as=f"media backend unavailable: {exc}")
    headers = {"Cache-Control": "private, max-age=300", "X-Content-Type-Options": "nosniff"}
    if item.filename:
        headers["Content-Disposition"] = f'inline; filename="{item.filename}"'
    return web.Response(body=item.data, content_type=item.mime, headers=headers)


async def healthz(request: web.Request) -> web.Response:
    """``GET /healthz``: the store, the render workers and each channel; 200 when the store answers, 503 otherwise."""
    status, report = await health_report(request.app)
    dumps = functools.partial(json.dumps, default=str)  # a channel's odd value must not make it a 500
    return web.json_response(report, status=status, headers={"Cache-Control": "no-store"}, dumps=dumps)


async def metrics(request: web.Request) -> web.Response:
    """``GET /metrics``: Prometheus text format; with ``metrics_token`` set, only for its bearer."""
    services = _services(request)
    token = services.settings.metrics_token
    if token is not None:
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogatepass")
        expected = f"Bearer {token.get_secret_value()}".encode()
        if not hmac.compare_digest(given, expected):  # constant time: the answer says nothing of the token
            response = json_error(401, "unauthenticated", "Send Authorization: Bearer <AGORA_METRICS_TOKEN>")
            response.headers["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    body = services.metrics.render()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


_PAGES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(_HERE / "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True
)


async def _page(request: web.Request, template: str) -> web.Response:
    services = _services(request)
    with contextlib.suppress(UnauthenticatedError):
        # The page also gives a new visitor their anonymous cookie (error_middleware attaches it).
        await services.resolve_actor(request)
    branding = services.branding
    # The default agent's description when the branding gives none, as on the A2A card.
    description = branding.description or services.runtime.default_agent.description
    html = _PAGES.get_template(template).render(
        branding=branding, description=description, prompts=json.dumps(branding.prompts)
    )
    return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-cache"})


async def home_page(request: web.Request) -> web.Response:
    """``GET /``: the demo page in demo mode, else the app's full-page chat.

    Without anonymous visitors (``AGORA_ANONYMOUS=false``) the page is still served: its widget
    then says it needs a token.
    """
    return await _page(request, "demo.html" if _services(request).demo else "chat.html")


async def chat_page(request: web.Request) -> web.Response:
    """``GET /chat``: the chat alone, filling the page, in the app's branding."""
    return await _page(request, "chat.html")


async def _utf8_text(request: web.Request, response: web.StreamResponse) -> None:
    """Name the charset of the text we serve.

    A page without ``<meta charset>`` that loads the widget would otherwise read its UTF-8
    (``Connecting…``) as Latin-1.
    """
    kind = response.headers.get("Content-Type", "")
    textual = kind.startswith(("text/", "application/javascript")) and not kind.startswith("text/event-stream")
    if textual and "charset" not in kind:  # event streams are UTF-8 by definition: left as sent
        response.headers["Content-Type"] = f"{kind}; charset=utf-8"


async def component_css(request: web.Request) -> web.Response:
    """``GET /static/components.css``: the stylesheet of the app's components (built-in and its own)."""
    stylesheet = _services(request).renderer.stylesheet
    return web.Response(text=stylesheet, content_type="text/css", headers={"Cache-Control": "max-age=3600"})


class _Folder(web.StaticResource):
    """A folder served under a prefix as ``add_static`` serves one, without its hidden files.

    A name starting with ``.`` anywhere below the folder (``.env``, ``.git/config``), by its own
    path or through a symlink, is a 404: an app that publishes its own folder by mistake still
    keeps those. A file that is not there is a 404 raised here, so that it is a JSON refusal
    with its log line (aiohttp's own answer comes only when the response is sent, past every
    middleware, as an empty 404 logged as 200).
    """

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        root = Path(self.get_info()["directory"])
        name = request.match_info["filename"]
        # A folder is aiohttp's to refuse (403); what is missing, hidden or outside is a 404 here.
        found = await asyncio.get_running_loop().run_in_executor(None, published_path, root, root / name)
        if found is None:
            raise web.HTTPNotFound()
        return await super()._handle(request)


def _add_folder(app: web.Application, prefix: str, folder: Path) -> None:
    app.router.register_resource(_Folder(prefix.rstrip("/"), folder, append_version=False))


def add_routes(app: web.Application, *, static_dir: Path | None = None) -> None:
    """Mount the gateway's own HTTP routes on ``app`` (and an app's ``static_dir`` at ``/assets/``)."""
    app.router.add_get("/agent/tools", tools_catalog)
    add_agent_routes(app)  # GET /agent/agents (gateway._agents_http)
    app.router.add_post("/agent/tool-call/approve", approve)
    app.router.add_post("/agent/tool-call/reject", reject)
    app.router.add_post("/agent/runs/{run_id}/cancel", cancel_run)
    app.router.add_get("/agent/threads", list_threads)
    app.router.add_get("/agent/threads/{thread_id}", thread_history)
    app.router.add_patch("/agent/threads/{thread_id}", rename_thread)
    app.router.add_delete("/agent/threads/{thread_id}", delete_thread)
    app.router.add_get("/agent/threads/{thread_id}/export", export_thread)
    add_queue_routes(app)
    add_usage_routes(app)  # GET /agent/usage (gateway._usage_http)
    add_staff_routes(app)  # GET /agent/approvals, the approval feed (gateway._staff)
    add_console_routes(app)  # GET /console (gateway._console)
    app.router.add_post("/agent/attachments", upload_attachment)
    app.router.add_get("/media/{token}", media)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", home_page)
    app.router.add_get("/chat", chat_page)
    app.router.add_get("/static/components.css", component_css)
    if STATIC_DIR.is_dir():  # absent in a checkout without the widget: the API still serves
        _add_folder(app, "/static/", STATIC_DIR)
    if static_dir is not None:
        _add_folder(app, ASSETS_PATH, static_dir)
    app.on_response_prepare.append(_utf8_text)
    app.on_response_prepare.append(access_upgraded)
