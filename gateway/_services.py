"""``GatewayServices``: what every channel of one gateway app shares."""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from renderers import Catalog, MediaStore, MediaTokenError, Renderer, RenderError, TemplateFailedError, negotiate
from tools import Actor, UiCapabilities

from ._attachments import Attachments
from ._errors import RateLimitedError, UnauthenticatedError
from ._gateway import Branding
from ._identity import ChainResolver, verify_actor_token
from ._logs import bind_log
from ._metrics import Metrics
from ._push._state import ChannelState
from ._queue import Accepted
from ._runtime import Runtime, RuntimeObserver
from ._settings import Settings
from ._tracing import parent_of, render_span
from .events import QueueMode, Turn, UiEvent

__all__ = ["SERVICES", "DeliveredUi", "GatewayServices", "MediaRef", "RateLimitedError", "UnauthenticatedError"]

S = TypeVar("S", bound=ChannelState)

logger = logging.getLogger("gateway.services")

_MIME_EXT = {"image/png": "png", "application/pdf": "pdf"}
_MEDIA_URLS_KEPT = 1024


class MediaRef(BaseModel):
    """One stored page of a rendered component: a signed, expiring URL and what it holds."""

    model_config = ConfigDict(frozen=True)

    url: str
    mime: str
    filename: str
    token: str
    """The media store's token (``services.media.get(token)`` reads the bytes back)."""


class DeliveredUi(BaseModel):
    """How a ``ui`` event reaches one client: the negotiated form and what goes with it.

    ``form`` is ``props`` (the client draws the component from ``props``), ``html``, ``image``
    or ``pdf`` (``media`` holds one ``MediaRef`` per page, ``text`` the component as text, for a
    caption), or ``text``. ``text`` is filled for every form but ``props`` and ``html``.
    """

    model_config = ConfigDict(frozen=True)

    form: str
    props: dict[str, Any] | None = None
    html: str | None = None
    media: tuple[MediaRef, ...] = ()
    text: str | None = None

    def wire(self) -> dict[str, Any]:
        """The fields a JSON wire adds to a ``ui`` event (``form`` and the filled ones; media as dicts)."""
        out: dict[str, Any] = {"form": self.form}
        if self.html is not None:
            out["html"] = self.html
        if self.media:
            out["media"] = [{"url": m.url, "mime": m.mime, "filename": m.filename} for m in self.media]
        if self.text is not None:
            out["text"] = self.text
        return out


def _address_group(address: str) -> str:
    """The bucket of an anonymous visitor's address: an IPv6 address's /64, any other as it is.

    One IPv6 host commonly holds a whole /64 (2^64 addresses): a bucket per address would give
    it as many buckets as it wants. An IPv4-mapped IPv6 address is its IPv4 address.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(kw_only=True, eq=False)
class GatewayServices:
    """The runtime and everything around it that channels use.

    Identity, rendering, media, rate limits and metrics. One per app, in ``app[SERVICES]``.
    """

    settings: Settings
    runtime: Runtime
    renderer: Renderer
    catalog: Catalog
    media: MediaStore
    identity: ChainResolver
    metrics: Metrics
    secret: bytes
    attachments: Attachments
    """Files people send: stored, resolved for a turn, read back (every channel's)."""
    branding: Branding = field(default_factory=Branding)
    demo: bool = False
    _media_urls: OrderedDict[tuple[str, str, int, str, str], tuple[float, tuple[MediaRef, ...]]] = field(
        default_factory=OrderedDict, repr=False
    )
    _broken: set[tuple[str, int, str]] = field(default_factory=set, repr=False)
    """Components whose template (``"template"``) or text form (``"text"``) failed: logged once each."""

    async def resolve_actor(self, request: web.Request) -> Actor:
        """The caller's actor.

        Raises:
            InvalidTokenError: A bad token was presented (401).
            UnauthenticatedError: Nothing identified the caller (401).
        """
        actor = await self.identity.resolve(request)
        if actor is None:
            raise UnauthenticatedError("Sign in: send a signed actor token")
        bind_log(actor=actor.id)  # the request's remaining lines name its actor (hashed)
        return actor

    async def identify(self, request: web.Request) -> Actor | None:
        """The caller's actor, or ``None`` when nothing identified them (yet).

        Raises:
            InvalidTokenError: A bad token was presented (401).
        """
        actor = await self.identity.resolve(request)
        if actor is not None:
            bind_log(actor=actor.id)
        return actor

    async def verify_token(self, token: str) -> Actor:
        """The actor of a bearer token a channel read itself (a web socket's ``hello``).

        The app's token resolvers check it (its own signed tokens, an ``OidcResolver``'s
        provider); an app whose identity has none checks it as one of its signed actor tokens.

        Raises:
            InvalidTokenError: A bad token (401).
            IdentityUnavailableError: The identity provider's keys cannot be had (503).
        """
        if not self.identity.token_resolvers():
            return verify_actor_token(token, self.secret)
        return await self.identity.verify_token(token)

    def attach_identity(self, request: web.Request, response: web.StreamResponse) -> None:
        """Set on ``response`` what identifies the caller next time (a new anonymous visitor's cookie)."""
        self.identity.attach_cookie(request, response)

    def client_address(self, request: web.Request) -> str | None:
        """The address a request came from, for the per-address rate limit of anonymous turns.

        Behind a proxy every request comes from the proxy: with ``trust_forwarded`` the last
        ``X-Forwarded-For`` hop is used, the one our proxy appended (earlier hops are whatever
        the client sent, so they are never trusted).
        """
        if self.settings.trust_forwarded:
            hops = [hop.strip() for hop in request.headers.get("X-Forwarded-For", "").split(",")]
            if hops[-1]:
                return hops[-1][:64]
        return request.remote

    async def start_turn(self, turn: Turn, *, client: str | None = None) -> str:
        """Start a turn for a channel, after the rate limits.

        Every actor has a bucket; anonymous actors also share one per ``client`` (the remote
        address), since dropping a cookie makes a new anonymous actor.

        Raises:
            RateLimitedError: The actor (or its address) started too many turns lately (429).
            StoreUnavailableError: The store cannot be reached to charge the turn (503).
        """
        await self.limit(turn.actor, client)
        return await self.runtime.start_turn(turn)

    async def send(self, turn: Turn, *, client: str | None = None, mode: QueueMode | None = None) -> Accepted:
        """Send a turn for a channel, after the rate limits: it begins now or waits in the thread's queue.

        ``Runtime.send`` says what a busy thread does with it (``mode``, the agent's ``queue_mode``
        by default).

        Raises:
            RateLimitedError: The actor (or its address) sent too many messages lately (429).
            StoreUnavailableError: The store cannot be reached to charge the message (503).
            QueueFullError: The thread's queue is full (429).
        """
        await self.limit(turn.actor, client)
        return await self.runtime.send(turn, mode=mode)

    async def limit(self, actor: Actor, client: str | None = None) -> None:
        """Charge one message to ``actor``'s bucket (and an anonymous actor's address's).

        Sending a turn charges it; so does what rewrites a queued one (an edit writes its whole
        text to the thread's log again), so that neither grows the store without bound. The
        buckets are the store's (``Store.take_token``): every process sharing the store takes
        from the same ones, so N processes allow the rate once, not N times (``memory://``
        keeps them in this process). ``turn_burst`` messages at once, refilled at
        ``turn_rate_per_minute``.

        Raises:
            RateLimitedError: The actor (or its address) sent too many lately (429).
            StoreUnavailableError: The store cannot be reached to charge the message (503): the
                message is refused, never let through uncounted.
        """
        # Two namespaces, each under its own fixed tag: an actor named "client:<address>" must
        # neither drain that address's bucket nor be drained by it.
        keys = [f"turns:actor:{actor.key}"]
        if client and actor.id.startswith("anon:"):
            keys.append(f"turns:client:{_address_group(client)}")
        rate, burst = self.settings.turn_rate_per_minute / 60.0, float(self.settings.turn_burst)
        for key in keys:
            retry = await self.runtime.store.take_token(key, rate=rate, burst=burst, now=time.time())
            if retry > 0:
                self.metrics.rate_limited.inc()
                wait = max(1, math.ceil(retry))  # never "try again in 0 s"
                raise RateLimitedError(f"Too many messages; try again in {wait} s", retry_after=retry)

    @overload
    def state(self, prefix: str) -> ChannelState: ...

    @overload
    def state(self, prefix: str, kind: type[S]) -> S: ...

    def state(self, prefix: str, kind: type[ChannelState] = ChannelState) -> ChannelState:
        """A channel's own keys in the store's channel state, under ``prefix`` (``wa``, ``tg``...).

        ``kind`` is the ``ChannelState`` subclass that types them (``PushState``, a channel's own).
        """
        return kind(self.runtime.store, prefix)

    def observe(self, observer: RuntimeObserver) -> None:
        """Tell ``observer.events_written(thread_id, events)`` of every write this process makes."""
        self.runtime.observers.append(observer)

    def unobserve(self, observer: RuntimeObserver) -> None:
        """Stop telling ``observer``."""
        if observer in self.runtime.observers:
            self.runtime.observers.remove(observer)

    async def media_bytes(self, token: str) -> tuple[bytes, str, str] | None:
        """A stored media item's ``(bytes, mime, filename)``, or ``None`` when unknown or expired.

        Channels that upload components (Telegram, the Cloud API) read the rendered pages here.
        """
        try:
            item = await self.media.get(token)
        except MediaTokenError:
            return None
        return item.data, item.mime, item.filename or "file"

    def media_url(self, token: str) -> str:
        """The public URL of a stored media item."""
        return f"{self.settings.base_url()}/media/{token}"

    async def render(
        self, component: str, props: dict[str, Any], fmt: str, version: int, *, run_id: str | None = None
    ) -> Any:
        """Render a component (timed and counted in the metrics; traced in the trace of ``run_id``)."""
        started = time.perf_counter()
        parent = await parent_of(run_id, self.runtime.store.get_run)
        try:
            with render_span(component, fmt, parent):
                return await self.renderer.render(component, props, fmt, version=version)  # type: ignore[arg-type]
        finally:
            self.metrics.render_count(fmt).inc()
            self.metrics.render_time(fmt).observe(time.perf_counter() - started)

    async def deliver_ui(self, event: UiEvent, capabilities: UiCapabilities) -> DeliveredUi:
        """How a ``ui`` event reaches a client with ``capabilities`` (docs/architecture.md, "Components").

        The component's props when the client draws it itself; else the rendered form:
        ``html``, one ``MediaRef`` per page for ``image`` and ``pdf``, or ``text``. A component
        that cannot be rendered falls back to its text: a component whose own template fails
        (``TemplateFailedError``) is logged once per component and version, since it will fail
        again; any other render failure is logged each time, in one line.
        """
        form = negotiate(event, capabilities, self.catalog)
        try:
            match form:
                case "props":
                    return DeliveredUi(form="props", props=event.props)
                case "html":
                    rendered = await self.render(
                        event.component, event.props, "html", event.version, run_id=event.run_id
                    )
                    return DeliveredUi(form="html", html=str(rendered.data))
                case "image" | "pdf":
                    media = await self._media_of(event, form)
                    return DeliveredUi(form=form, media=media, text=await self.ui_text(event))
        except TemplateFailedError as exc:
            self._broken_once(event, "template", exc)
        except RenderError as exc:
            logger.warning("rendering %s as %s failed (%s); sending text", event.component, form, exc)
        except Exception:
            logger.warning("rendering %s as %s failed; sending text", event.component, form, exc_info=True)
        return DeliveredUi(form="text", text=await self.ui_text(event))

    def _broken_once(self, event: UiEvent, part: str, exc: TemplateFailedError) -> None:
        key = (event.component, event.version, part)
        if key in self._broken:
            return
        self._broken.add(key)
        instead = "as its text form" if part == "template" else f"as [{event.component}]"
        logger.error(
            "component %s (version %d) failed: %s. It is sent %s on every channel; this is logged once.",
            event.component,
            event.version,
            str(exc).rstrip("."),
            instead,
        )

    async def _media_of(self, event: UiEvent, form: str) -> tuple[MediaRef, ...]:
        """Signed URLs of a component's pages, stored once per thread, component and props.

        Every socket, replay and channel that shows the same component of a thread reuses the
        same stored bytes while their URLs have at least half their life left. The bytes are the
        thread's (``MediaStore.put(thread_id=...)``): erasing the thread erases them.
        """
        fmt = "png" if form == "image" else "pdf"
        props = json.dumps(event.props, sort_keys=True, default=str)
        key = (event.thread_id, event.component, event.version, fmt, props)
        now = time.monotonic()
        known = self._media_urls.get(key)
        if known is not None and known[0] > now:
            self._media_urls.move_to_end(key)
            return known[1]
        rendered = await self.render(event.component, event.props, fmt, event.version, run_id=event.run_id)
        pages = rendered.pages or [rendered.data]
        media = []
        for index, page in enumerate(pages):
            filename = f"{event.component.lower()}-{index + 1}.{_MIME_EXT.get(rendered.mime, 'bin')}"
            token = await self.media.put(page, rendered.mime, filename=filename, thread_id=event.thread_id)
            media.append(MediaRef(url=self.media_url(token), mime=rendered.mime, filename=filename, token=token))
        refs = tuple(media)
        self._media_urls[key] = (now + self.media.ttl / 2, refs)
        while len(self._media_urls) > _MEDIA_URLS_KEPT:
            self._media_urls.popitem(last=False)
        return refs

    async def forget_thread(self, thread_id: str) -> None:
        """Erase the media rendered for ``thread_id`` (and forget their URLs): the thread was erased.

        Raises:
            MediaUnavailableError: The media backend cannot be reached.
        """
        for key in [key for key in self._media_urls if key[0] == thread_id]:
            del self._media_urls[key]
        await self.media.forget_thread(thread_id)

    async def ui_text(self, event: UiEvent) -> str:
        """The text form of a ``ui`` event: its fallback text, else the component's own text."""
        if event.fallback_text:
            return event.fallback_text
        try:
            rendered = await self.render(event.component, event.props, "text", event.version, run_id=event.run_id)
            return str(rendered.data)
        except TemplateFailedError as exc:
            self._broken_once(event, "text", exc)
        except Exception:
            pass  # invalid props: said by the render that failed first, when there was one
        return f"[{event.component}]"


SERVICES = web.AppKey("agora_services", GatewayServices)
"""Where a gateway app keeps its ``GatewayServices``."""
