"""``GET /agent/usage``: the caller's token usage and cost, by day, agent and model.

====================  =========================================================================
``from``, ``to``      UTC days ``YYYY-MM-DD``, both included; default: this month (its first day
                      to today). At most 366 days; ``to`` before ``from`` is refused.
``actor``             an ``Actor.key`` other than the caller's, or ``*`` for everyone (per
                      actor): only for an actor with ``AGORA_ADMIN_ROLE`` (403 otherwise). An
                      admin of a tenant reads that tenant's actors only (``*``: theirs; another
                      tenant's key is 403), as the console shows staff their tenant's runs.
====================  =========================================================================

Answers ``{from, to, actor, rows: [{day, actor_key, agent, model, input_tokens, output_tokens,
steps, cost_usd, unpriced_steps}], totals, actors, truncated}``. ``totals`` is ``{input_tokens,
output_tokens, tokens, steps, cost_usd, unpriced_steps}``; its ``cost_usd`` is the sum over the
priced steps and ``null`` when none was priced (``unpriced_steps`` says how many are not in it).
``actors`` has the same totals per actor (for ``actor=*``; one entry otherwise). ``truncated``
says the range held more than ``MAX_ROWS`` lines (the totals are of those answered).

The caller is taken as on every ``/agent`` route (401 without a credential). A bad date, an
inverted or too long range is 400 (``invalid_date``, ``invalid_range``) before anything is read.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from aiohttp import web

from ._errors import UsageForbiddenError
from ._guard import BadRequestError
from ._services import SERVICES
from ._usage import utc_day
from .stores import MAX_USAGE_DAYS, UsageRow
from .stores._usage import parse_day

__all__ = ["MAX_ROWS", "add_usage_routes"]

MAX_ROWS = 5000
"""Ledger lines one answer holds at most."""
MAX_ACTOR_KEY = 512
EVERYONE = "*"


def _day(request: web.Request, name: str) -> dt.date | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        return parse_day(raw, name)
    except ValueError:
        raise BadRequestError("invalid_date", f"{name} must be a day YYYY-MM-DD (UTC)") from None


def _range(request: web.Request) -> tuple[dt.date, dt.date]:
    start, end = _day(request, "from"), _day(request, "to")
    if end is None:
        today = parse_day(utc_day())
        end = today if start is None else max(today, start)
    if start is None:
        start = end.replace(day=1)
    if end < start:
        raise BadRequestError("invalid_range", "to must not be before from")
    if (end - start).days + 1 > MAX_USAGE_DAYS:
        raise BadRequestError("invalid_range", f"a range spans at most {MAX_USAGE_DAYS} days")
    return start, end


def _in_tenant(key: str, tenant: str | None) -> bool:
    """Whether an ``Actor.key`` is of an actor of ``tenant`` (every key is, for no tenant)."""
    if tenant is None:
        return True
    head, sep, rest = key.partition("\x1f")  # a tenant's actor's key: tenant, US, id
    return bool(sep) and head == tenant and "\x1f" not in rest and bool(rest)


def totals_of(rows: list[UsageRow]) -> dict[str, Any]:
    """The sums of ``rows``: tokens, steps, and the cost of the priced ones (``None`` if none was)."""
    cost: float | None = None
    for row in rows:
        if row.cost_usd is not None:
            cost = (cost or 0.0) + row.cost_usd
    input_tokens = sum(row.input_tokens for row in rows)
    output_tokens = sum(row.output_tokens for row in rows)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "tokens": input_tokens + output_tokens,
        "steps": sum(row.steps for row in rows),
        "cost_usd": cost,
        "unpriced_steps": sum(row.unpriced_steps for row in rows),
    }


async def get_usage(request: web.Request) -> web.Response:
    """``GET /agent/usage``: ledger lines and totals of the caller (or, for an admin, of anyone)."""
    services = request.app[SERVICES]
    actor = await services.resolve_actor(request)
    start, end = _range(request)
    asked = request.query.get("actor", actor.key)
    if not 0 < len(asked) <= MAX_ACTOR_KEY:
        raise BadRequestError("invalid_request", f"actor must be an actor's key (1 to {MAX_ACTOR_KEY} characters) or *")
    # ``*`` is everyone even when it is the caller's own key (an id an app or a provider let be ``*``).
    if asked != actor.key or asked == EVERYONE:
        role = services.settings.admin_role
        if role is None or role not in actor.roles:
            raise UsageForbiddenError("Only an administrator may read another actor's usage")
        if asked != EVERYONE and not _in_tenant(asked, actor.tenant_ref):
            raise UsageForbiddenError("An administrator of a tenant may read only that tenant's usage")
    key = None if asked == EVERYONE else asked
    rows = await services.runtime.usage.rows(
        start=start.isoformat(), end=end.isoformat(), actor_key=key, limit=MAX_ROWS + 1
    )
    truncated = len(rows) > MAX_ROWS
    rows = rows[:MAX_ROWS]
    if key is None and actor.tenant_ref is not None:
        rows = [row for row in rows if _in_tenant(row.actor_key, actor.tenant_ref)]
    by_actor: dict[str, list[UsageRow]] = {}
    for row in rows:
        by_actor.setdefault(row.actor_key, []).append(row)
    if key is not None:
        by_actor.setdefault(key, [])
    body = {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "actor": asked,
        "rows": [row.model_dump(mode="json") for row in rows],
        "totals": totals_of(rows),
        "actors": {name: totals_of(lines) for name, lines in sorted(by_actor.items())},
        "truncated": truncated,
    }
    return web.json_response(body, headers={"Cache-Control": "no-store"})


def add_usage_routes(app: web.Application) -> None:
    """Mount ``GET /agent/usage`` on ``app``."""
    app.router.add_get("/agent/usage", get_usage)
