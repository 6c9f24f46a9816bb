"""The web chat channel: a web socket per browser tab, the widget's protocol."""

from aiohttp import web

from ._channel import WebChannel
from ._frames import ApproveFrame, CancelFrame, ClientFrame, HelloFrame, RejectFrame, SendFrame
from ._socket import OPEN_SOCKETS, WEB_DEFAULT_CAPABILITIES, WebSession, close_sockets, websocket_handler

__all__ = [
    "WEB_DEFAULT_CAPABILITIES",
    "ApproveFrame",
    "CancelFrame",
    "ClientFrame",
    "HelloFrame",
    "RejectFrame",
    "SendFrame",
    "WebChannel",
    "WebSession",
    "setup",
    "websocket_handler",
]


def setup(app: web.Application) -> None:
    """Mount ``GET /agent/ws`` on a gateway app; its sockets close when the app shuts down."""
    app[OPEN_SOCKETS] = set()
    app.on_shutdown.append(close_sockets)
    app.router.add_get("/agent/ws", websocket_handler)
