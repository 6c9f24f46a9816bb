"""The queue's HTTP routes: a thread's queued messages as their owner sees and changes them.

=======  ======================================  ======================================================
GET      ``/agent/threads/{thread_id}/queue``    ``{thread_id, queue: [message...]}``, first first
DELETE   ``/agent/threads/{thread_id}/queue``    empty it: ``{thread_id, cleared: [message_id...]}``
PATCH    ``/agent/queue/{message_id}``           ``{text}``: change its text; the message as it is now
DELETE   ``/agent/queue/{message_id}``           take it out: ``{message_id, thread_id, removed: true}``
POST     ``/agent/queue/{message_id}/interrupt`` move it first and stop the active run so it runs next
=======  ======================================  ======================================================

A message is ``{message_id, thread_id, text, position, queued_at, channel, attachments}``. Every
route takes the caller as the other ``/agent`` routes do and checks they own the thread: another
actor's thread or message is 403 (``thread_forbidden``) and nothing changes; a message that ran
or was removed is 404 (``queued_message_not_found``). Ids that are not ``[A-Za-z0-9_.:-]{1,200}``
are 400 before anything is read. An edit is charged to the caller's rate limit as a message is
(429 past it): each writes its whole text to the thread's log. Each refusal is one log line (the
error middleware's).
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from ._guard import BadRequestError, json_body
from ._services import SERVICES, GatewayServices
from .stores import QueuedMessage

__all__ = ["add_queue_routes"]

_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_MAX_BODY = 64 * 1024


class _EditBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=32_000, pattern=r"\S")
    """The message's new text: at least one character that is not whitespace."""


def _services(request: web.Request) -> GatewayServices:
    return request.app[SERVICES]


def _id(request: web.Request, name: str) -> str:
    value = request.match_info[name]
    if not _ID.match(value):
        raise BadRequestError("invalid_request", f"Bad {name.replace('_', ' ')}")
    return value


def queued_json(item: QueuedMessage, position: int) -> dict[str, Any]:
    """A queued message as the routes answer it (snake_case, as the rest of our wire)."""
    return {
        "message_id": item.message_id,
        "thread_id": item.thread_id,
        "text": item.turn.text,
        "position": position,
        "queued_at": item.queued_at,
        "channel": item.turn.channel,
        "attachments": [a.model_dump(mode="json") for a in item.turn.attachments],
    }


async def list_queue(request: web.Request) -> web.Response:
    """``GET /agent/threads/{thread_id}/queue``: the thread's queued messages, next first."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _id(request, "thread_id")
    queue = await services.runtime.queue.messages(thread_id, actor)
    body = {"thread_id": thread_id, "queue": [queued_json(item, n) for n, item in enumerate(queue, 1)]}
    return web.json_response(body, headers={"Cache-Control": "no-store"})


async def clear_queue(request: web.Request) -> web.Response:
    """``DELETE /agent/threads/{thread_id}/queue``: empty the thread's queue."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    thread_id = _id(request, "thread_id")
    held = await services.runtime.queue.clear(thread_id, actor)
    return web.json_response({"thread_id": thread_id, "cleared": [item.message_id for item in held]})


async def edit_queued(request: web.Request) -> web.Response:
    """``PATCH /agent/queue/{message_id}`` ``{text}``: change a queued message's text before it runs."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    message_id = _id(request, "message_id")
    body = await json_body(request, _EditBody, limit=_MAX_BODY)
    await services.limit(actor, services.client_address(request))  # an edit writes its text to the log again
    edited = await services.runtime.queue.edit(message_id, actor, body.text)
    queue = await services.runtime.store.queued_messages(edited.thread_id)
    position = next((n for n, item in enumerate(queue, 1) if item.message_id == message_id), 1)
    return web.json_response(queued_json(edited, position))


async def remove_queued(request: web.Request) -> web.Response:
    """``DELETE /agent/queue/{message_id}``: take a queued message out of its queue."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    message_id = _id(request, "message_id")
    removed = await services.runtime.queue.remove(message_id, actor)
    return web.json_response({"message_id": message_id, "thread_id": removed.thread_id, "removed": True})


async def interrupt_with(request: web.Request) -> web.Response:
    """``POST /agent/queue/{message_id}/interrupt``: run this message next, stopping the active run."""
    services = _services(request)
    actor = await services.resolve_actor(request)
    message_id = _id(request, "message_id")
    moved = await services.runtime.queue.interrupt_with(message_id, actor)
    return web.json_response(
        {"message_id": message_id, "thread_id": moved.thread_id, "position": 1, "interrupting": True}
    )


def add_queue_routes(app: web.Application) -> None:
    """Mount the queue's routes on ``app``."""
    app.router.add_get("/agent/threads/{thread_id}/queue", list_queue)
    app.router.add_delete("/agent/threads/{thread_id}/queue", clear_queue)
    app.router.add_patch("/agent/queue/{message_id}", edit_queued)
    app.router.add_delete("/agent/queue/{message_id}", remove_queued)
    app.router.add_post("/agent/queue/{message_id}/interrupt", interrupt_with)
