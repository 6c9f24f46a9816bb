"""The staff console: ``GET /console``, a page where approvers decide what waits for them.

Staff only: the caller presents a signed actor token (``Authorization: Bearer`` or ``?token=``,
the page then drops it from the address bar) whose actor holds a role that approves some tool.
Without a token: 401; a token without such a role: 403 (both JSON, one log line).

The page is rendered on the server (``templates/console.html``) with the pending approvals the
actor may decide and the tenant's recent runs; ``static/agora-console.js`` (plain JS, no build
step) then keeps it live over the web socket's approval feed (``hello {watch_approvals: true}``,
see ``gateway._staff``), decides through ``POST /agent/tool-call/approve`` and ``/reject``, and
re-reads the runs from ``GET /console/runs`` whenever an approval comes or goes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from tools import Actor

from ._errors import GatewayError, UnauthenticatedError
from ._services import SERVICES
from ._staff import may_watch_approvals, staff_approvals
from .stores import RunRecord

__all__ = ["add_console_routes"]

_PAGES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
_RUNS = 30
"""Recent runs the console shows."""
_SCAN_RUNS = 500
"""Runs read from the store to find the tenant's recent ones."""
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}


class ConsoleForbiddenError(GatewayError):
    """The actor holds no role that approves anything: the console is not theirs."""

    status, code = 403, "console_forbidden"


async def _staff(request: web.Request) -> tuple[Actor, str]:
    """The console's actor and the token they came with.

    Raises:
        UnauthenticatedError: No signed token (401).
        InvalidTokenError: A bad one (401).
        ConsoleForbiddenError: Not staff (403).
    """
    services = request.app[SERVICES]
    auth = request.headers.get("Authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else request.query.get("token", "")
    if not token:
        raise UnauthenticatedError("The console is for staff: open it with a signed actor token (?token=)")
    actor = await services.verify_token(token)
    if not may_watch_approvals(services.runtime.approval_policy, actor):
        raise ConsoleForbiddenError("The console is for staff: your roles approve nothing here")
    return actor, token


async def _recent_runs(request: web.Request, actor: Actor) -> list[dict[str, Any]]:
    """The newest runs of the staff's tenant (``Store.recent_runs``), as the page shows them."""
    runs: list[RunRecord] = await request.app[SERVICES].runtime.store.recent_runs(limit=_SCAN_RUNS)
    mine = [run for run in runs if run.turn.actor.tenant_ref == actor.tenant_ref][:_RUNS]
    return [
        {
            "run_id": run.run_id,
            "thread_id": run.thread_id,
            "status": run.status,
            "requester": run.turn.actor.id,
            "channel": run.turn.channel,
            "text": run.turn.text[:120],
            "created_at": run.created_at,
            "updated_at": run.updated_at,
        }
        for run in mine
    ]


async def console_page(request: web.Request) -> web.Response:
    """``GET /console``: the staff console (module docstring)."""
    actor, token = await _staff(request)
    services = request.app[SERVICES]
    approvals = await staff_approvals(request.app).all_for(actor)
    runs = await _recent_runs(request, actor)
    html = _PAGES.get_template("console.html").render(
        branding=services.branding,
        actor=actor,
        token=token,
        approvals=[a.model_dump(mode="json") for a in approvals],
        runs=runs,
    )
    return web.Response(text=html, content_type="text/html", headers=_HEADERS)


async def console_runs(request: web.Request) -> web.Response:
    """``GET /console/runs``: the staff's tenant's recent runs, newest first (``{runs: [...]}``)."""
    actor, _ = await _staff(request)
    runs = await _recent_runs(request, actor)
    return web.json_response({"runs": runs}, headers=_HEADERS, dumps=lambda v: json.dumps(v, ensure_ascii=False))


def add_console_routes(app: web.Application) -> None:
    """Mount ``GET /console`` and ``GET /console/runs``."""
    app.router.add_get("/console", console_page)
    app.router.add_get("/console/runs", console_runs)
