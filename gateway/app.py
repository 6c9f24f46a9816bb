"""The composition root: ``create_app`` assembles a gateway from settings (or a given runtime)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from renderers import Catalog, MediaStore, RedisMediaBackend, Renderer, default_catalog
from tools import Tool, UserError, discover_tools

from ._agents import Agent
from ._channel import CHANNEL_SERVICES, CHANNELS, Channel
from ._errors import StoreUnavailableError
from ._guard import AddressCounter, ProtocolLog, body_deadline, connection_limit
from ._http import add_routes, error_middleware
from ._identity import AnonymousCookieResolver, ChainResolver, SignedTokenResolver, TrustedHeaderResolver
from ._metrics import Metrics
from ._ratelimit import RateLimiter
from ._runtime import Runtime
from ._services import SERVICES, GatewayServices
from ._settings import Settings
from .models import Model
from .stores import MemoryStore, Store

__all__ = ["DEFAULT_INSTRUCTIONS", "build_model", "build_runtime", "build_store", "create_app", "default_channels"]

logger = logging.getLogger("gateway.app")

DEFAULT_INSTRUCTIONS = (
    "You are the assistant of a small online coffee shop, talking to one customer. Use the tools to look "
    "things up instead of guessing; never invent order numbers. Actions such as refunds wait for the "
    "customer's approval: call the tool and let the approval card speak for itself. Keep answers short."
)


def build_store(settings: Settings) -> Store:
    """``RedisStore`` when ``redis_url`` is set, else an in-process ``MemoryStore``."""
    if settings.redis_url:
        from .stores import RedisStore

        return RedisStore(settings.redis_url)
    return MemoryStore()


def build_model(settings: Settings) -> Model:
    """The model ``settings.model`` names: ``demo`` or ``openai:<model>``.

    Raises:
        UserError: An unknown model setting.
    """
    if settings.model == "demo":
        from .demo import DemoModel

        return DemoModel()
    if settings.model.startswith("openai:") and len(settings.model) > len("openai:"):
        from .models import OpenAIModel

        model: Model = OpenAIModel(settings.model.removeprefix("openai:"))
        return model
    raise UserError(f"AGORA_MODEL={settings.model!r}: use 'demo' or 'openai:<model>' (e.g. openai:gpt-4o-mini)")


def build_runtime(settings: Settings, secret: bytes) -> Runtime:
    """The embedded runtime: the demo tools plus any from ``tools_path``, the configured model and store."""
    from .demo import demo_tools

    tools: list[Tool] = list(demo_tools(secret))
    if settings.tools_path:
        names = {t.name for t in tools}
        found = discover_tools(settings.tools_path)
        if not found:
            # Asked for tools and got none: a mistake (a module that failed, logged above) to
            # fix now, not a gateway that silently lacks them.
            raise UserError(f"AGORA_TOOLS_PATH={settings.tools_path!r}: no tools found there (see the errors above)")
        for tool in found:
            if tool.name in names:
                logger.warning(
                    "tool %r from %s is shadowed by a demo tool of that name", tool.name, settings.tools_path
                )
                continue
            tools.append(tool)
    agent = Agent(name="assistant", instructions=DEFAULT_INSTRUCTIONS, description="The demo shop's assistant.")
    return Runtime(
        tools=tools,
        agents=[agent],
        model=build_model(settings),
        store=build_store(settings),
        lease_ttl=settings.lease_ttl,
    )


def _media_store(settings: Settings, secret: bytes) -> tuple[MediaStore, list[Any]]:
    """The media store, and the Redis clients it owns (none in memory).

    The client is made like the store's, so a Sentinel URL works here too.
    """
    if settings.redis_url:
        from .stores._redis_client import connect

        client, sentinels = connect(settings.redis_url, max_connections=16, options={})
        return MediaStore(secret, ttl=settings.media_ttl, backend=RedisMediaBackend(client)), [client, *sentinels]
    return MediaStore(secret, ttl=settings.media_ttl), []


async def _close_models(runtime: Runtime) -> None:
    """Close the HTTP clients of models this app built (``OpenAIModel`` holds one)."""
    models = {id(m): m for m in [runtime.model, *(a.model for a in runtime.agents.values())] if m is not None}
    for model in models.values():
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


def default_channels() -> list[Channel]:
    """The channels a gateway serves when ``create_app`` is given none.

    The web widget, AG-UI and A2A always; WhatsApp through Twilio when ``AGORA_TWILIO_*`` is
    set, through Meta's Cloud API when ``AGORA_WHATSAPP_CLOUD_*`` is, Telegram when
    ``AGORA_TELEGRAM_*`` is (their routes then say which setting is missing, if one is).
    """
    from channels.a2a import A2AChannel
    from channels.ag_ui import AgUiChannel
    from channels.telegram import TelegramChannel, TelegramOptions
    from channels.web import WebChannel
    from channels.whatsapp import TwilioOptions, WhatsAppChannel, WhatsAppCloudChannel, WhatsAppCloudOptions

    channels: list[Channel] = [WebChannel(), AgUiChannel(), A2AChannel()]
    twilio = TwilioOptions()
    if twilio.configured:
        channels.append(WhatsAppChannel(twilio))
    cloud = WhatsAppCloudOptions()
    if cloud.configured:
        channels.append(WhatsAppCloudChannel(cloud))
    telegram = TelegramOptions()
    if telegram.configured:
        channels.append(TelegramChannel(telegram))
    return channels


def create_app(
    settings: Settings | None = None,
    *,
    runtime: Runtime | None = None,
    channels: Sequence[Channel] | None = None,
    catalog: Catalog | None = None,
) -> web.Application:
    """Assemble a gateway application.

    Args:
        settings: Configuration (``Settings()`` reads ``AGORA_*`` and ``.env`` when omitted).
        runtime: A ready runtime; without one the embedded runtime is built from ``settings``
            (the demo tools and model unless configured otherwise). A runtime you pass is started
            with the app but stays yours to close; one built here closes with the app.
        channels: The channels to serve (``default_channels()`` when omitted): each is set up
            on the app in order, starts after the runtime and stops before it.
        catalog: The components tools may show (``default_catalog()`` when omitted).

    Returns:
        The ``aiohttp`` application: serve it with ``web.run_app`` or ``agora-gateway serve``.
    """
    settings = settings or Settings()
    secret = settings.secret_bytes()
    owns_runtime = runtime is None
    runtime = runtime or build_runtime(settings, secret)
    catalog = catalog or default_catalog()
    resolvers: list[Any] = [SignedTokenResolver(secret)]
    if settings.trusted_headers:
        resolvers.append(TrustedHeaderResolver())
    if settings.anonymous:
        resolvers.append(AnonymousCookieResolver(secret, secure=settings.base_url().startswith("https://")))
    metrics = Metrics()
    runtime.observers.append(metrics)
    media, media_redis = _media_store(settings, secret)
    services = GatewayServices(
        settings=settings,
        runtime=runtime,
        renderer=Renderer(catalog),
        catalog=catalog,
        media=media,
        identity=ChainResolver(resolvers),
        metrics=metrics,
        limiter=RateLimiter(settings.turn_rate_per_minute, settings.turn_burst),
        secret=secret,
    )
    middlewares: list[Middleware] = [error_middleware, body_deadline(settings.read_timeout)]
    if settings.trust_forwarded:  # each connection is the proxy's: count per forwarded address instead
        counter = AddressCounter(settings.max_connections_per_address)
        middlewares.insert(1, connection_limit(counter, services.client_address))
    app = web.Application(
        middlewares=middlewares,
        client_max_size=1024 * 1024,
        # The keep-alive timer is the header deadline; a malformed request logs one line (gateway._guard).
        handler_args={"keepalive_timeout": settings.read_timeout, "logger": ProtocolLog()},
    )
    app[SERVICES] = services
    app[CHANNEL_SERVICES] = services
    add_routes(app)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        try:
            # Fail at start-up, with the store's own words, rather than on the first turn.
            await runtime.store.ping()
        except StoreUnavailableError:
            logger.error("cannot start: the store is unavailable (check AGORA_REDIS_URL)")
            await services.renderer.aclose()
            for client in media_redis:
                await client.aclose()
            if owns_runtime:
                await runtime.aclose()
                await _close_models(runtime)
            raise
        await runtime.start()
        try:
            yield
        finally:
            await services.renderer.aclose()
            for client in media_redis:
                await client.aclose()
            if owns_runtime:
                await runtime.aclose()
                await _close_models(runtime)
            runtime.observers.remove(metrics)

    app.cleanup_ctx.append(lifecycle)

    # Channels after the lifecycle: they start after the runtime and stop before it.
    chosen = list(channels) if channels is not None else default_channels()
    names = [channel.name for channel in chosen]
    if len(set(names)) != len(names):
        raise UserError(f"two channels share a name: {names}")
    app[CHANNELS] = chosen
    for channel in chosen:
        channel.setup(app, services)
    return app
