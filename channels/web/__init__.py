"""The web chat channel: a web socket per browser tab, the widget's protocol."""

from aiohttp import web

from ._channel import WebChannel
from ._frames import ApproveFrame, CancelFrame, ClientFrame, HelloFrame, RejectFrame, SendFrame
from ._options import WEB_OPTIONS, WebOptions
from ._socket import WEB_DEFAULT_CAPABILITIES, WebSession, websocket_handler

__all__ = [
    "WEB_DEFAULT_CAPABILITIES",
    "WEB_OPTIONS",
    "ApproveFrame",
    "CancelFrame",
    "ClientFrame",
    "HelloFrame",
    "RejectFrame",
    "SendFrame",
    "WebChannel",
    "WebOptions",
    "WebSession",
    "setup",
    "websocket_handler",
]


def setup(app: web.Application, options: WebOptions | None = None) -> None:
    """Mount a ``WebChannel`` on an app from ``gateway.create_app`` (which does it by default)."""
    from gateway import CHANNEL_SERVICES

    WebChannel(options).setup(app, app[CHANNEL_SERVICES])
