"""The composition root: ``create_app`` assembles a gateway from settings, an app (``Gateway``) or a runtime."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from renderers import (
    Catalog,
    MediaBackend,
    MediaStore,
    MemoryRenderCache,
    RedisMediaBackend,
    RenderCache,
    Renderer,
    TieredRenderCache,
    default_catalog,
)
from tools import UserError

from ._access import access_log, channel_routes
from ._agents import Agent
from ._attachments import DEFAULT_ATTACHMENT_TTL, Attachments
from ._channel import CHANNEL_SERVICES, CHANNELS, Channel
from ._gateway import Branding, Gateway
from ._guard import AddressCounter, ProtocolLog, body_deadline, connection_limit
from ._http import add_routes, error_middleware
from ._identity import AnonymousCookieResolver, ChainResolver, SignedTokenResolver, TrustedHeaderResolver
from ._logs import LogOptions
from ._metrics import Metrics
from ._oidc import OidcResolver
from ._runtime import Runtime
from ._services import SERVICES, GatewayServices
from ._settings import Settings
from ._store_url import open_store, parse_store_url
from ._uploads import upload_allowance
from .models import Model
from .stores import Store

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "RENDER_CACHE_TTL",
    "assemble",
    "build_model",
    "build_store",
    "create_app",
    "default_channels",
    "demo_gateway",
    "import_gateway",
    "load_gateway",
    "setting_variable",
    "settings_models",
]

logger = logging.getLogger("gateway.app")

DEFAULT_INSTRUCTIONS = (
    "You are the assistant of a small online coffee shop, talking to one customer. Use the tools to look "
    "things up instead of guessing; never invent order numbers. Actions such as refunds wait for the "
    "customer's approval: call the tool and let the approval card speak for itself. Keep answers short."
)
"""The demo agent's instructions."""


def build_store(settings: Settings) -> Store:
    """The store ``settings.resolved_store_url()`` names (``gateway._store_url`` has the URL forms).

    ``memory://`` (the default in code) is an in-process ``MemoryStore``; ``sqlite:///...`` a
    ``SqliteStore`` (its folder created when missing), ``postgresql://...`` a ``PostgresStore``,
    ``redis://...`` a ``RedisStore``. None is connected yet: the app's start pings it.

    Raises:
        StoreUnavailableError: The folder of a SQLite file cannot be created.
    """
    return open_store(parse_store_url(settings.resolved_store_url()))


def build_model(name: str, *, where: str = "AGORA_MODEL") -> Model:
    """The model ``name`` names: ``demo``, ``openai:<model>`` or ``anthropic:<model>``.

    ``where`` says where the name was set, for the error.

    Raises:
        UserError: An unknown model name (or the named model's package or key is missing).
    """
    if name == "demo":
        from .demo import DemoModel

        return DemoModel()
    provider, _, model_name = name.partition(":")
    if provider == "openai" and model_name:
        from .models import OpenAIModel

        return OpenAIModel(model_name)
    if provider == "anthropic" and model_name:
        from .models import AnthropicModel

        return AnthropicModel(model_name)
    raise UserError(
        f"{where}={name!r}: use 'demo', 'openai:<model>' (e.g. openai:gpt-4o-mini) "
        "or 'anthropic:<model>' (e.g. anthropic:claude-sonnet-4-5)"
    )


def _demo_branding() -> Branding:
    return Branding(
        name="Coffee shop assistant",
        title="Agora Gateway · demo",
        description="The demo shop's assistant.",
        welcome="Hi! I'm the demo shop's assistant. Ask about your orders, the weather or this month's sales.",
        prompts=["weather in Lisbon", "show my orders", "sales this month", "refund order 1042"],
    )


def demo_gateway() -> Gateway:
    """The offline demo: a made-up coffee shop's tools, its assistant, page and card."""
    from .demo import demo_tools

    agent = Agent(name="assistant", instructions=DEFAULT_INSTRUCTIONS, description="The demo shop's assistant.")
    return Gateway(agents=[agent])._variant("demo", demo=demo_tools, branding=_demo_branding())


def import_gateway(spec: str) -> Gateway:
    """The ``Gateway`` that ``spec`` (``pkg.module:attribute``; ``:gateway`` when omitted) names.

    The current directory is importable, as it is for ``python -m``.

    Raises:
        UserError: No such module or attribute, the module failed to import (logged with its
            traceback), or the object is not a ``Gateway``.
    """
    module_name, _, attribute = spec.partition(":")
    attribute = attribute or "gateway"
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise UserError(f"--app {spec!r}: name a module and an attribute, like my_app.main:gateway")
    if not all(part.isidentifier() for part in attribute.split(".")):
        raise UserError(f"--app {spec!r}: {attribute!r} is not an attribute name")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise UserError(f"--app {spec!r}: no module named {exc.name!r} (from {os.getcwd()})") from None
        logger.error("--app %r: importing %s failed", spec, module_name, exc_info=True)
        raise UserError(f"--app {spec!r}: importing {module_name} failed: {exc}") from None
    except SystemExit as exc:  # a script's sys.exit() (or argparse) at import: never a silent exit 0
        raise UserError(f"--app {spec!r}: importing {module_name} called sys.exit({exc.code!r})") from None
    except (UserError, ValidationError) as exc:
        # The app's declaration refused (Gateway, Branding, an Agent...): bad input, one line
        # (--log-level DEBUG shows where), and never the value given: it may be a secret.
        logger.debug("--app %r: importing %s failed", spec, module_name, exc_info=True)
        raise UserError(f"--app {spec!r}: importing {module_name} failed: {_refusal(exc)}") from None
    except Exception as exc:
        logger.error("--app %r: importing %s failed", spec, module_name, exc_info=True)
        raise UserError(f"--app {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise UserError(f"--app {spec!r}: module {module_name!r} has no attribute {attribute!r}") from None
        except Exception as exc:  # a property that raises
            logger.debug("--app %r: reading %s failed", spec, attribute, exc_info=True)
            raise UserError(f"--app {spec!r}: reading {attribute} failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(found, Gateway):
        raise UserError(f"--app {spec!r}: {attribute} is a {type(found).__name__}, not a gateway.Gateway")
    return found


def _refusal(exc: UserError | ValidationError) -> str:
    """A refused declaration in one line: its words, without the values given."""
    if isinstance(exc, UserError):
        return " ".join(str(exc).split())
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    fields = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'value'}: {str(error['msg']).removeprefix('Value error, ')}"
        for error in errors[:5]
    )
    return f"{exc.title}: {fields}"


def load_gateway(settings: Settings) -> Gateway:
    """The app ``settings`` name: ``app`` (``--app``), else ``tools_path`` alone, else the demo.

    ``tools_path`` adds its tools to the app's; ``demo`` (``--demo``) adds the demo's tools,
    page and card to an app or to ``tools_path`` (and is what serves when neither is given).
    """
    from .demo import demo_tools

    if settings.app:
        base, source = import_gateway(settings.app), settings.app
    elif settings.tools_path and not settings.demo:
        base, source = Gateway(), f"--tools {settings.tools_path}"
    else:
        base = demo_gateway()
        source = base.source
    add_demo = settings.demo and not base.demo
    return base._variant(
        f"{source} + demo" if add_demo else source,
        tools=[settings.tools_path] if settings.tools_path else [],
        demo=demo_tools if add_demo else None,
        branding=_demo_branding() if add_demo else None,
    )


RENDER_CACHE_TTL = 86_400.0
"""Seconds a render stays in a store's shared render cache (a render is recomputed, never wrong)."""


@runtime_checkable
class _CacheStore(Protocol):
    """A store that also keeps media and renders on its database (``SqliteStore``, ``PostgresStore``)."""

    def media_backend(self) -> MediaBackend: ...

    def render_cache(self, *, ttl: float) -> RenderCache: ...


def _caches(settings: Settings, secret: bytes, store: Store) -> tuple[MediaStore, RenderCache, list[Any]]:
    """The media store and the render cache, following the store; and the Redis clients they own.

    A SQL store keeps both in its database (renders behind this process's memory cache), so
    every process on it serves ``/media`` and shares renders; closing the store closes them. A
    Redis URL keeps media in Redis, on a client made like the store's (a Sentinel URL works here
    too), and renders in memory; memory keeps both in this process.
    """
    if isinstance(store, _CacheStore):
        media = MediaStore(secret, ttl=settings.media_ttl, backend=store.media_backend())
        return media, TieredRenderCache(MemoryRenderCache(), store.render_cache(ttl=RENDER_CACHE_TTL)), []
    location = parse_store_url(settings.resolved_store_url())
    if location.kind == "redis":
        from .stores._redis_client import connect

        client, sentinels = connect(location.url, max_connections=16, options={})
        backend = RedisMediaBackend(client, prefix=f"{location.prefix or 'agora'}:media:")
        media = MediaStore(secret, ttl=settings.media_ttl, backend=backend)
        return media, MemoryRenderCache(), [client, *sentinels]
    return MediaStore(secret, ttl=settings.media_ttl), MemoryRenderCache(), []


async def _close_models(runtime: Runtime) -> None:
    """Close the HTTP clients of models this app built (``OpenAIModel`` holds one)."""
    models = {id(m): m for m in [runtime.model, *(a.model for a in runtime.agents.values())] if m is not None}
    for model in models.values():
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()


_SET_UP: weakref.WeakSet[Channel] = weakref.WeakSet()
"""Channels set up on an app of this process: each serves one app."""


def _check_channels(chosen: list[Channel]) -> list[Channel]:
    names = [channel.name for channel in chosen]
    if len(set(names)) != len(names):
        raise UserError(f"two channels share a name: {names}")
    for channel in chosen:
        if channel in _SET_UP:
            # A channel keeps its app's services from setup on: a second app would take over the first's routes.
            raise UserError(f"channel {channel.name!r} is already set up on another app: give each app its own")
    return chosen


def settings_models() -> list[tuple[str, type[BaseSettings]]]:
    """Every settings model of the gateway and its channels, with a title (``.env.example``, docs)."""
    from channels.telegram import TelegramOptions
    from channels.web import WebOptions
    from channels.whatsapp import TwilioOptions, WhatsAppCloudOptions, WhatsAppSenderOptions

    return [
        ("The gateway", Settings),
        ("Logs (serve --log-format wins)", LogOptions),
        ("Branding (what the app's code gives wins)", Branding),
        ("The web widget's socket", WebOptions),
        ("WhatsApp through Twilio (on when the credentials are set)", TwilioOptions),
        ("WhatsApp senders (Twilio and the Cloud API)", WhatsAppSenderOptions),
        ("WhatsApp through Meta's Cloud API (on when the credentials are set)", WhatsAppCloudOptions),
        ("Telegram (on when the bot token is set)", TelegramOptions),
    ]


def setting_variable(model: type[BaseSettings], name: str) -> str:
    """The environment variable of field ``name`` of ``model``: its documented ``AGORA_*`` alias, else prefix + name."""
    alias = model.model_fields[name].validation_alias
    choices = [alias] if isinstance(alias, str) else list(getattr(alias, "choices", []))
    for choice in choices:
        if isinstance(choice, str) and choice.upper().startswith("AGORA_"):
            return choice.upper()
    return f"{str(model.model_config.get('env_prefix') or '').upper()}{name.upper()}"


def default_channels() -> list[Channel]:
    """The channels a gateway serves when ``create_app`` is given none.

    The web widget, AG-UI, A2A and MCP always; WhatsApp through Twilio when ``AGORA_TWILIO_*`` is
    set, through Meta's Cloud API when ``AGORA_WHATSAPP_CLOUD_*`` is, Telegram when
    ``AGORA_TELEGRAM_*`` is (their routes then say which setting is missing, if one is).
    """
    from channels.a2a import A2AChannel
    from channels.ag_ui import AgUiChannel
    from channels.mcp import McpChannel
    from channels.telegram import TelegramChannel, TelegramOptions
    from channels.web import WebChannel
    from channels.whatsapp import TwilioOptions, WhatsAppChannel, WhatsAppCloudChannel, WhatsAppCloudOptions

    channels: list[Channel] = [WebChannel(), AgUiChannel(), A2AChannel(), McpChannel()]
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
        runtime: A ready runtime; without one the app ``settings`` name is built
            (``load_gateway``: ``AGORA_APP``, ``AGORA_TOOLS_PATH``, else the demo). A runtime you
            pass is started with the app but stays yours to close; one built here closes with
            the app. A passed runtime is served as an app (``Branding()``), not as the demo.
        channels: The channels to serve (the app's, else ``default_channels()``): each is set
            up on the app in order, starts after the runtime and stops before it.
        catalog: The components tools may show (the app's, else ``default_catalog()``).

    Returns:
        The ``aiohttp`` application: serve it with ``web.run_app`` or ``agora-gateway serve``.
    """
    settings = settings or Settings()
    if runtime is None:
        return assemble(settings, load_gateway(settings), channels=channels, catalog=catalog)
    return assemble(settings, Gateway(), runtime=runtime, channels=channels, catalog=catalog)


def assemble(
    settings: Settings,
    gateway: Gateway,
    *,
    runtime: Runtime | None = None,
    owns_runtime: bool = False,
    channels: Sequence[Channel] | None = None,
    catalog: Catalog | None = None,
) -> web.Application:
    """The application serving ``gateway`` (``channels`` and ``catalog`` override the app's).

    ``runtime`` is served as it is (closed with the app only if ``owns_runtime``); without one,
    the app's own is built (``gateway.runtime(settings)``) and closes with the app. What may
    refuse the declaration (its branding from ``AGORA_BRAND_*``, the channels' settings, two
    channels of one name) is checked first: a refused app has built no runtime or client and
    left a passed runtime as it was.
    """
    catalog = catalog or gateway.catalog or default_catalog()
    branding = gateway.resolved_branding()
    if channels is None:
        channels = gateway.channels
    chosen = _check_channels(list(channels) if channels is not None else default_channels())
    secret = settings.secret_bytes()  # after the checks: a refused start says one line, not the random secret's too
    resolvers: list[Any]
    if gateway.identity is not None:
        resolvers = list(gateway.identity)
    else:
        resolvers = [
            SignedTokenResolver(
                secret, audience=settings.token_audience, issuer=settings.token_issuer, leeway=settings.token_leeway
            )
        ]
        if settings.oidc_jwks_url and settings.oidc_issuer and settings.oidc_audience:
            resolvers.append(
                OidcResolver(
                    settings.oidc_jwks_url,
                    settings.oidc_issuer,
                    settings.oidc_audience,
                    roles_claim=settings.oidc_roles_claim,
                    tenant_claim=settings.oidc_tenant_claim,
                )
            )
        if settings.trusted_headers:
            resolvers.append(TrustedHeaderResolver())
        if settings.anonymous:
            resolvers.append(AnonymousCookieResolver(secret, secure=settings.base_url().startswith("https://")))
    if runtime is None:
        runtime, owns_runtime = gateway.runtime(settings), True
    served = runtime  # for the lifecycle's closure (mypy narrows the parameter only here)
    metrics = Metrics()
    served.observers.append(metrics)
    media, render_cache, media_redis = _caches(settings, secret, served.store)
    services = GatewayServices(
        settings=settings,
        runtime=served,
        renderer=Renderer(catalog, assets_dir=gateway.static_dir, cache=render_cache),
        catalog=catalog,
        media=media,
        identity=ChainResolver(resolvers),
        metrics=metrics,
        secret=secret,
        attachments=Attachments(
            backend=media.backend,
            accepted=tuple(settings.attachment_types),
            max_bytes=settings.attachment_max_bytes,
            ttl=settings.retention_days * 86_400 if settings.retention_days else DEFAULT_ATTACHMENT_TTL,
        ),
        branding=branding,
        demo=gateway.demo,
    )
    uploads = {"/agent/attachments": upload_allowance(settings.read_timeout, settings.attachment_max_bytes)}
    middlewares: list[Middleware] = [error_middleware, body_deadline(settings.read_timeout, longer=uploads)]
    if settings.trust_forwarded:  # each connection is the proxy's: count per forwarded address instead
        counter = AddressCounter(settings.max_connections_per_address)
        middlewares.insert(1, connection_limit(counter, services.client_address))
    middlewares.insert(0, access_log)  # outermost: every request's log scope and its one line (gateway._access)
    app = web.Application(
        middlewares=middlewares,
        client_max_size=1024 * 1024,
        # The keep-alive timer is the header deadline; a malformed request logs one line (gateway._guard).
        # aiohttp's own access log (any runner's) off: it writes the query string (gateway._access is ours).
        handler_args={"keepalive_timeout": settings.read_timeout, "logger": ProtocolLog(), "access_log": None},
    )
    app[SERVICES] = services
    app[CHANNEL_SERVICES] = services
    served.threads.erasers.append(services)  # an erased thread's rendered media go with it
    served.attachment_reader = services.attachments.read  # tools and models read the turn's files
    add_routes(app, static_dir=gateway.static_dir)

    async def close() -> None:
        # The runtime closes the store it owns (once); a SQL store's media and render cache go with it.
        # A runtime passed in is left as it came, also after a failed start: no observer, no eraser
        # of this app's (its media backend is closed here).
        served.observers.remove(metrics)
        served.threads.erasers.remove(services)
        if served.attachment_reader == services.attachments.read:
            served.attachment_reader = None
        await services.renderer.aclose()
        for client in media_redis:
            await client.aclose()
        if owns_runtime:
            await served.aclose()
            await _close_models(served)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        try:
            # Fail at start-up, with the store's own words, rather than on the first turn.
            await served.store.ping()
        except BaseException:
            await close()
            raise
        await served.start()
        try:
            yield
        finally:
            await close()

    app.cleanup_ctx.append(lifecycle)

    # Channels after the lifecycle: they start after the runtime and stop before it.
    app[CHANNELS] = chosen
    for channel in chosen:
        _SET_UP.add(channel)
        with channel_routes(app, channel.name):  # the access log names a route's channel
            channel.setup(app, services)
    return app
