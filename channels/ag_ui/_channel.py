"""``AgUiChannel``: ``POST /agent/ag-ui`` and the re-attach stream on a gateway app."""

from __future__ import annotations

from aiohttp import web

from gateway import Channel, ChannelServices

from ._handlers import AG_UI_OPTIONS, AgUiOptions, run_agent, thread_events
from ._input import AG_UI_DEFAULT_CAPABILITIES

__all__ = ["AgUiChannel"]


class AgUiChannel(Channel):
    """AG-UI clients: ``RunAgentInput`` in, SSE of ``ag_ui.core`` events out (see ``docs/ag-ui.md``)."""

    name = "ag-ui"
    capabilities = AG_UI_DEFAULT_CAPABILITIES

    def __init__(self, options: AgUiOptions | None = None) -> None:
        self.options = options or AgUiOptions()

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount ``POST /agent/ag-ui`` and ``GET /agent/ag-ui/threads/{thread_id}/events``."""
        app[AG_UI_OPTIONS] = self.options
        app.router.add_post("/agent/ag-ui", run_agent)
        app.router.add_get("/agent/ag-ui/threads/{thread_id}/events", thread_events, allow_head=False)
