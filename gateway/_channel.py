"""The channel seam: ``Channel``, and the narrow, typed services a channel is given.

A channel turns one kind of traffic (a web socket, a webhook, an SSE stream) into turns and run
events into its own wire format. The composition root (``create_app``) builds the channels, then
calls each one's ``setup(app, services)``; a channel mounts its routes there and appends its
start and stop to ``app.cleanup_ctx`` (``self.mount_lifecycle(app)`` does it), and the app
closes it with ``aclose()``. A channel sees the gateway only through ``ChannelServices`` and
its ``runtime`` (``ChannelRuntime``): never the store itself, so every channel's state lives
under its own prefix (``services.state(prefix)``) and its events come through the runtime.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol, TypeVar, overload

from aiohttp import web

from tools import Actor, ToolRegistry, UiCapabilities

from ._agents import Agent
from ._approvals import ApprovalPolicy
from ._attachments import Attachments
from ._gateway import Branding
from ._metrics import Metrics
from ._push._state import ChannelState
from ._queue import Accepted, ThreadQueue
from ._runtime import RuntimeObserver
from ._services import DeliveredUi
from ._settings import Settings
from .events import QueueMode, RunEvent, RunStatus, Turn, UiEvent
from .models import Model
from .stores import ApprovalRecord, RunRecord, Store, ThreadRecord

__all__ = ["CHANNELS", "CHANNEL_SERVICES", "Channel", "ChannelRuntime", "ChannelServices"]

S = TypeVar("S", bound=ChannelState)

logger = logging.getLogger("gateway.channels")


class ChannelRuntime(Protocol):
    """What of the runtime a channel may use: turns, runs, approvals and the event log."""

    @property
    def instance_id(self) -> str: ...

    @property
    def store(self) -> Store:
        """The shared store (what waits across threads: ``Store.open_approvals``)."""
        ...

    @property
    def agents(self) -> Mapping[str, Agent]: ...

    @property
    def default_agent(self) -> Agent: ...

    @property
    def model(self) -> Model | None: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def approval_policy(self) -> ApprovalPolicy: ...

    def agent(self, name: str | None) -> Agent: ...

    def agent_for(self, name: str | None, actor: Actor) -> Agent:
        """The agent of that name (the default for ``None``) when ``actor`` may use it (``UnknownAgentError``)."""
        ...

    def usable_agents(self, actor: Actor) -> list[Agent]: ...

    async def start_turn(self, turn: Turn) -> str: ...

    async def send(self, turn: Turn, *, mode: QueueMode | None = None) -> Accepted: ...

    async def call_tool(
        self,
        actor: Actor,
        name: str,
        arguments: dict[str, Any],
        *,
        thread_id: str,
        channel: str = "mcp",
        agent: str | None = None,
        ui_capabilities: UiCapabilities | None = None,
    ) -> str:
        """Start a run of one tool call and no model step (``Runtime.call_tool``)."""
        ...

    @property
    def queue(self) -> ThreadQueue: ...

    async def wait(self, run_id: str, timeout: float | None = None) -> RunStatus: ...

    async def get_run(self, run_id: str) -> RunRecord: ...

    async def cancel(self, run_id: str, actor: Actor) -> None: ...

    async def decide(
        self,
        tool_call_id: str,
        actor: Actor,
        approve: bool = True,
        reason: str | None = None,
        via: str = "api",
        *,
        remember: bool = False,
    ) -> ApprovalRecord: ...

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]: ...

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None: ...

    async def check_thread_access(self, thread_id: str, actor: Actor) -> ThreadRecord: ...

    async def get_thread(self, thread_id: str) -> ThreadRecord | None: ...

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord: ...

    async def thread_runs(self, thread_id: str) -> list[RunRecord]: ...

    def events(self, thread_id: str, after_seq: int = 0, follow: bool = False) -> AsyncIterator[RunEvent]: ...

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]: ...

    async def last_seq(self, thread_id: str) -> int: ...

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]: ...


class ChannelServices(Protocol):
    """What every channel of one app is given: identity, turns, rendering, media, its own state."""

    @property
    def settings(self) -> Settings: ...

    @property
    def branding(self) -> Branding:
        """The app's name, texts, colour and logo (for cards, greetings and pages)."""
        ...

    @property
    def demo(self) -> bool:
        """Whether the offline demo is served (its texts may be shown)."""
        ...

    @property
    def runtime(self) -> ChannelRuntime: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def attachments(self) -> Attachments:
        """Where files people send are stored (type-sniffed, size-limited) and resolved for a turn."""
        ...

    async def resolve_actor(self, request: web.Request) -> Actor: ...

    async def identify(self, request: web.Request) -> Actor | None: ...

    async def verify_token(self, token: str) -> Actor:
        """The actor of a bearer token a channel read itself (the app's token resolvers check it)."""
        ...

    def attach_identity(self, request: web.Request, response: web.StreamResponse) -> None: ...

    def client_address(self, request: web.Request) -> str | None: ...

    async def start_turn(self, turn: Turn, *, client: str | None = None) -> str: ...

    async def send(self, turn: Turn, *, client: str | None = None, mode: QueueMode | None = None) -> Accepted: ...

    async def limit(self, actor: Actor, client: str | None = None) -> None:
        """Charge one message to the actor's (and an anonymous actor's address's) bucket in the store.

        Raises:
            RateLimitedError: Too many lately (429).
            StoreUnavailableError: The store cannot be reached to charge it (503).
        """
        ...

    async def deliver_ui(self, event: UiEvent, capabilities: UiCapabilities) -> DeliveredUi: ...

    async def ui_text(self, event: UiEvent) -> str: ...

    async def media_bytes(self, token: str) -> tuple[bytes, str, str] | None: ...

    def media_url(self, token: str) -> str: ...

    @overload
    def state(self, prefix: str) -> ChannelState: ...

    @overload
    def state(self, prefix: str, kind: type[S]) -> S: ...

    def observe(self, observer: RuntimeObserver) -> None: ...

    def unobserve(self, observer: RuntimeObserver) -> None: ...


class Channel(abc.ABC):
    """One channel of a gateway app.

    Subclasses set ``name`` (also how a decision's ``via`` reads) and ``capabilities`` (what its
    conversations show; docs/architecture.md, "Components"), and implement ``setup``.
    ``disabled_reason`` says why a channel that is present stays off (a missing credential);
    ``None`` when it runs. ``health`` (optional) is its part of ``GET /healthz``.
    """

    name: str = "channel"
    capabilities: UiCapabilities = UiCapabilities(formats=["text"])
    disabled_reason: str | None = None

    @abc.abstractmethod
    def setup(self, app: web.Application, services: ChannelServices) -> None:
        """Mount the channel's routes on ``app`` and append its start and stop to ``app.cleanup_ctx``."""

    def health(self) -> dict[str, Any]:
        """The channel's state for ``GET /healthz``: a JSON-able dict, cheap, without secrets.

        ``{"status": "ok"}``, or ``{"status": "disabled", "reason": ...}`` when
        ``disabled_reason`` is set. A channel may add what it knows cheaply (a push channel
        its delivery's counts); it names settings, never their values.
        """
        if self.disabled_reason is not None:
            return {"status": "disabled", "reason": self.disabled_reason}
        return {"status": "ok"}

    async def start(self) -> None:  # noqa: B027 - a hook: most channels start nothing
        """Start what the channel runs beside its routes (called as the app starts, after the runtime)."""

    async def aclose(self) -> None:  # noqa: B027 - a hook: most channels hold nothing
        """Stop and release what ``start`` opened (called as the app stops, before the runtime)."""

    def mount_lifecycle(self, app: web.Application) -> None:
        """Run ``start`` when ``app`` starts and ``aclose`` when it stops."""

        async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
            await self.start()
            try:
                yield
            finally:
                await self.aclose()

        app.cleanup_ctx.append(lifecycle)


CHANNELS = web.AppKey("agora_channels", list[Channel])
"""The channels of a gateway app, in the order ``create_app`` set them up."""

CHANNEL_SERVICES = web.AppKey("agora_channel_services", ChannelServices)
"""The app's ``ChannelServices``, for route handlers (a channel is also given them in ``setup``)."""
