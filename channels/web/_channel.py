"""``WebChannel``: the web chat widget's web socket on a gateway app."""

from __future__ import annotations

from aiohttp import web

from gateway import Channel, ChannelServices

from ._options import WEB_OPTIONS, WebOptions
from ._socket import OPEN_SOCKETS, WEB_DEFAULT_CAPABILITIES, close_sockets, websocket_handler

__all__ = ["WebChannel"]


class WebChannel(Channel):
    """``GET /agent/ws``: one web socket per browser tab (its protocol: README, "The web-socket protocol")."""

    name = "web"
    capabilities = WEB_DEFAULT_CAPABILITIES

    def __init__(self, options: WebOptions | None = None) -> None:
        self.options = options if options is not None else WebOptions()

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount the socket route; open sockets are closed as the app shuts down."""
        app[WEB_OPTIONS] = self.options
        app[OPEN_SOCKETS] = set()
        app.on_shutdown.append(close_sockets)
        app.router.add_get("/agent/ws", websocket_handler)
