"""``GET /healthz``'s report: the store, the render workers and each channel of one process.

The answer is 200 when the store answers (within ``STORE_TIMEOUT``), 503 otherwise: without its
store a gateway can serve nothing, while render workers that fail cost only images and PDFs (a
component falls back to its text) and a channel that is off costs only that channel. It holds
states and counts, never a secret: no URL, no setting's value, no error text (the log has the
store's error). ::

    {"status": "ok", "instance": "host:pid:suffix",
     "store": {"status": "ok", "kind": "redis"},
     "render_workers": {"status": "idle", "size": 2, "ready": 0, "busy": 0, "starting": 0, "started": 0},
     "channels": {"web": {"status": "ok"},
                  "telegram": {"status": "ok", "delivery": {"draining": 0, "retrying": 0, "scheduled": 0}},
                  "whatsapp": {"status": "disabled", "reason": "AGORA_TWILIO_AUTH_TOKEN is not set"}}}
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from ._channel import CHANNELS
from ._errors import StoreUnavailableError
from ._guard import one_line
from ._services import SERVICES
from .stores import Store

__all__ = ["STORE_TIMEOUT", "health_report", "store_kind"]

logger = logging.getLogger("gateway.health")

STORE_TIMEOUT = 3.0
"""Seconds the store's ping may take before the report calls it unavailable."""


def store_kind(store: Store) -> str:
    """``memory``, ``redis``... : the store's class name without ``Store``, in lower case."""
    name = type(store).__name__
    return name.removesuffix("Store").lower() or name.lower()


async def _store(store: Store) -> dict[str, Any]:
    try:
        async with asyncio.timeout(STORE_TIMEOUT):
            await store.ping()
    except TimeoutError:
        logger.warning("health: the store did not answer within %.0f s", STORE_TIMEOUT)
        return {"status": "unavailable", "kind": store_kind(store)}
    except StoreUnavailableError as exc:
        logger.warning("health: the store is unavailable: %s", one_line(str(exc)))
        return {"status": "unavailable", "kind": store_kind(store)}
    return {"status": "ok", "kind": store_kind(store)}


async def health_report(app: web.Application) -> tuple[int, dict[str, Any]]:
    """The HTTP status and the JSON body of ``GET /healthz`` for the gateway ``app``."""
    services = app[SERVICES]
    store = await _store(services.runtime.store)
    channels: dict[str, Any] = {}
    for channel in app.get(CHANNELS, []):
        try:
            channels[channel.name] = channel.health()
        except Exception as exc:  # a channel's bug must not take the health check down
            logger.warning("health: channel %s could not say: %s", channel.name, one_line(repr(exc)))
            channels[channel.name] = {"status": "unknown"}
    ok = store["status"] == "ok"
    report = {
        "status": "ok" if ok else "unavailable",
        "instance": services.runtime.instance_id,
        "store": store,
        "render_workers": services.renderer.pool.health(),
        "channels": channels,
    }
    return (200 if ok else 503), report
