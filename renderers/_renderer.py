"""``Renderer``: validate, look up the cache, share concurrent renders, render in-process or in the pool."""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from opentelemetry import trace
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from tools import UserError

from . import _worker
from ._cache import MemoryRenderCache, RenderCache
from ._catalog import Catalog, ComponentDef
from ._components import default_catalog
from ._errors import PropsInvalidError, RenderError, RenderFailedError, TemplateFailedError
from ._html import HtmlEngine, PageProfile, component_stylesheet
from ._pool import RemoteError, RenderPool
from ._rendered import MIME_TYPES, RENDER_FORMATS, Rendered, RenderFormat
from ._textform import generic_text

__all__ = ["RenderStats", "Renderer"]

logger = logging.getLogger("renderers")


class _Default(enum.Enum):
    TOKEN = "default"


_DEFAULT: Final = _Default.TOKEN

WORKER_MAX_CALLS = 2_000
"""Renders a worker of a renderer's own pool serves before a fresh one replaces it.

Resident memory of a render worker creeps up by a few KB per render in native code (pango,
cairo, pdfium; the Python heap stays flat, and one reused ``FontConfiguration`` avoids the 0.2 MB
per render a new one would cost): recycling bounds it for about one second of CPU per 2,000
renders."""

_KEY_SCHEMA = "agora-render/1"
"""Bump when the render pipeline changes in a way the cache keys do not already capture."""


class _State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


@dataclass(kw_only=True)
class RenderStats:
    """Counters of one ``Renderer`` since it was built."""

    hits: int = 0
    """Renders answered from the cache."""
    misses: int = 0
    """Renders that had to be produced (including those shared by concurrent callers)."""
    shared: int = 0
    """Calls that joined a render of the same key already running instead of starting one."""
    produced: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RENDER_FORMATS, 0))
    """Renders actually carried out, by format."""


class Renderer:
    """Renders catalog components as HTML, PNG, PDF or text.

    ``html`` and ``text`` run in this process (on the event loop for small props, in a thread for
    large ones). ``png`` and ``pdf`` run in a ``RenderPool`` of worker processes that starts on
    the first such render, so building a ``Renderer`` (or importing ``renderers``) never loads
    weasyprint. Every render validates the props first; results are cached by a hash of
    (component, version, template, format, canonical props), and concurrent renders of the same
    key share one piece of work.

    Use it as ``async with Renderer() as renderer:`` or call ``await renderer.aclose()``; it
    belongs to the event loop that first renders with it.

    Args:
        catalog: The components; default ``default_catalog()``.
        pool: A pool to render PNG/PDF in, shared with others and left open by ``aclose``;
            default a pool of this renderer's own, sized to the cores.
        workers: Size of the renderer's own pool; default the cores this process may use.
        cache: Where renders are kept; default a ``MemoryRenderCache()``; ``None`` for none.
        timeout: Seconds a PNG/PDF render may take in its worker before it is cut off
            (``RenderTimeoutError``; the worker is replaced).
        timeout_per_kb: Seconds added to ``timeout`` per KiB of the props' JSON, up to six
            times ``timeout`` in all: layout time grows with the text to lay out (a
            500-row, 12-column table, about 145 KiB, takes 18-26 s on a busy 2-core machine, so
            it gets 46 s), a hung render is still cut off.
        image_width: Width of PNG images in pixels (the page is laid out at phone width and
            rasterised to this).
        max_pages: Refuse layouts of more pages (``RenderFailedError``).
        max_props_bytes: Refuse props whose canonical JSON is larger (``PropsInvalidError``).
        inline_limit: Props of more JSON bytes than this have their HTML rendered in a thread
            instead of on the event loop.
        assets_dir: The folder a gateway serves at ``/assets/`` (``Gateway(static_dir=...)``).
            PNG and PDF renders read ``/assets/...`` URLs from it on disk; without it, and for
            any path outside it, any other file and any remote URL, the image is left out (a
            render never makes a network request).
    """

    def __init__(
        self,
        catalog: Catalog | None = None,
        *,
        pool: RenderPool | None = None,
        workers: int | None = None,
        cache: RenderCache | None | _Default = _DEFAULT,
        timeout: float = 10.0,
        timeout_per_kb: float = 0.25,
        image_width: int = 1080,
        max_pages: int = 50,
        max_props_bytes: int = 2_000_000,
        inline_limit: int = 32_000,
        assets_dir: str | Path | None = None,
    ) -> None:
        if timeout <= 0 or timeout_per_kb < 0 or image_width < 100 or max_pages < 1:
            raise UserError("timeout must be > 0, timeout_per_kb >= 0, image_width >= 100 and max_pages >= 1")
        self.catalog = catalog if catalog is not None else default_catalog()
        """The components this renderer knows."""
        self.cache: RenderCache | None = MemoryRenderCache() if cache is _DEFAULT else cache
        """Where renders are kept (``None``: no caching)."""
        self.stats = RenderStats()
        """Counters since this renderer was built."""
        self.timeout = timeout
        self.timeout_per_kb = timeout_per_kb
        self.image_width = image_width
        self.max_pages = max_pages
        self.max_props_bytes = max_props_bytes
        self.inline_limit = inline_limit
        self.assets_dir = Path(assets_dir).resolve() if assets_dir is not None else None
        """Where ``/assets/...`` URLs of PNG/PDF renders are read from (``None``: nowhere)."""
        if self.assets_dir is not None and not self.assets_dir.is_dir():
            raise UserError(f"Renderer(assets_dir=...): {str(assets_dir)!r} is not a folder")
        self.stylesheet = _stylesheet(self.catalog)
        """The CSS of this catalog: the built-in stylesheet, then each component's own ``css``.
        A page that shows fragments from ``render(..., "html")`` links or inlines it once (the
        gateway serves it at ``/static/components.css``)."""
        self._pool = pool
        self._owns_pool = pool is None
        self._workers = workers
        self._html = HtmlEngine()
        self._state = _State.OPEN
        self._media_slots: asyncio.Semaphore | None = None
        """PNG/PDF renders being prepared or in a worker: at most one per worker."""
        self._inflight: dict[str, asyncio.Task[Rendered]] = {}
        """Renders in progress by key; concurrent callers of one key share its task."""
        self._template_hashes: dict[ComponentDef[Any], str] = {}
        # A PNG of the same props differs by the folder its images come from.
        self._salt = hashlib.sha256(
            f"{_KEY_SCHEMA}|{image_width}|{self.assets_dir}|{component_stylesheet()}".encode()
        ).hexdigest()
        self._warned_harfbuzz = False

    # -- lifecycle

    async def __aenter__(self) -> Renderer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Cancel renders in progress and close the pool if this renderer made it. Idempotent."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        flights = list(self._inflight.values())
        for task in flights:
            task.cancel()
        await asyncio.gather(*flights, return_exceptions=True)
        if self._owns_pool and self._pool is not None:
            await self._pool.aclose()

    @property
    def pool(self) -> RenderPool:
        """The pool PNG/PDF renders run in (created on first use, started on the first render)."""
        if self._pool is None:
            self._pool = RenderPool(
                self._workers,
                initializer=_worker.init_worker,
                on_ready=self._worker_ready,
                max_calls=WORKER_MAX_CALLS,
            )
        return self._pool

    def _worker_ready(self, info: Any) -> None:
        if isinstance(info, _worker.WorkerInfo) and not info.harfbuzz_subset and not self._warned_harfbuzz:
            self._warned_harfbuzz = True
            logger.warning(
                "weasyprint runs without libharfbuzz-subset: every PDF and PNG render is about 3x slower. "
                "Install the Debian package libharfbuzz-subset0."
            )

    # -- rendering

    async def render(
        self,
        component: str,
        props: Mapping[str, Any] | BaseModel,
        fmt: RenderFormat,
        *,
        version: int | None = None,
        fallback_text: str | None = None,
    ) -> Rendered:
        """Render one component.

        Args:
            component: Catalog name.
            props: Raw props (camelCase or snake_case keys), or an instance of the props model.
            fmt: ``"html"``, ``"png"``, ``"pdf"`` or ``"text"``.
            version: The version the caller holds (a ``ui`` event's); ``None`` takes the catalog's.
            fallback_text: For ``"text"``: returned as is (after the props validate) in place of
                the component's text form, as a ``ui`` event's ``fallback_text`` asks. For a
                component the catalog does not know, ``"text"`` gives this, or else the props as
                JSON under the component's name.

        Raises:
            UnknownComponentError: the catalog has no such component (at ``version``) and
                ``fmt`` is not ``"text"``.
            PropsInvalidError: the props failed validation or are too large; nothing rendered.
            RenderTimeoutError: a PNG/PDF render ran past ``timeout``.
            TemplateFailedError: the component's template, ``context`` or text form failed (a
                ``RenderFailedError``).
            RenderFailedError: the engine failed, the layout had too many pages, or a worker died.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot render with a closed Renderer")
        if fmt not in MIME_TYPES:
            raise UserError(f"fmt must be one of {', '.join(RENDER_FORMATS)}, not {fmt!r}")
        if fmt == "text" and self.catalog.find(component, version) is None:
            return Rendered(fallback_text or _unknown_text(component, props), MIME_TYPES["text"])
        definition = self.catalog.get(component, version)
        model = definition.validate(props)
        if fmt == "text" and fallback_text and fallback_text.strip():
            return Rendered(fallback_text, MIME_TYPES["text"])
        canonical = self._canonical(definition, model)
        key = self._key(definition, fmt, canonical)
        if self.cache is not None:
            cached = await self.cache.get(key)
            if cached is not None:
                self.stats.hits += 1
                _cache_hit(True)
                return cached
        self.stats.misses += 1
        _cache_hit(False)
        return await self._shared(key, lambda: self._produce(key, definition, model, fmt, len(canonical)))

    def _canonical(self, definition: ComponentDef[Any], model: BaseModel) -> bytes:
        try:
            canonical = model.model_dump_json(by_alias=False).encode()
        except PydanticSerializationError as exc:
            raise PropsInvalidError(
                definition.name, [{"loc": (), "msg": f"props do not serialize as JSON: {exc}", "type": "not_json"}]
            ) from exc
        if len(canonical) > self.max_props_bytes:
            message = f"props are {len(canonical):,} bytes of JSON, more than the limit of {self.max_props_bytes:,}"
            raise PropsInvalidError(definition.name, [{"loc": (), "msg": message, "type": "too_large"}])
        return canonical

    def _key(self, definition: ComponentDef[Any], fmt: str, canonical: bytes) -> str:
        template_hash = self._template_hashes.get(definition)
        if template_hash is None:
            source = f"{definition.template}\0{definition.css}".encode()
            template_hash = self._template_hashes[definition] = hashlib.sha256(source).hexdigest()
        digest = hashlib.sha256(f"{self._salt}|{definition.name}|{definition.version}|{template_hash}|{fmt}|".encode())
        digest.update(canonical)
        return digest.hexdigest()

    @property
    def in_flight(self) -> int:
        """Renders in progress (each possibly shared by several callers)."""
        return len(self._inflight)

    async def _shared(self, key: str, produce: Callable[[], Coroutine[Any, Any, Rendered]]) -> Rendered:
        """Run ``produce`` once per key at a time; every caller of that key meanwhile awaits it.

        A caller that is cancelled leaves the render running: it finishes (within ``timeout``)
        and fills the cache for the next caller. Cancelling it instead would kill a worker
        process mid-render, and restarting one costs more than finishing the render.
        ``aclose`` cancels whatever is still running.
        """
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(produce())  # a factory: no coroutine left unawaited
            self._inflight[key] = task
            task.add_done_callback(lambda done: self._landed(key, done))
        else:
            self.stats.shared += 1
        return await asyncio.shield(task)

    def _landed(self, key: str, task: asyncio.Task[Rendered]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # marks it retrieved: every caller may have left before it ended

    async def _produce(
        self, key: str, definition: ComponentDef[Any], model: BaseModel, fmt: RenderFormat, size: int
    ) -> Rendered:
        in_thread = size > self.inline_limit
        if fmt == "text":
            text = (
                (await asyncio.to_thread(_text_form, definition, model)) if in_thread else _text_form(definition, model)
            )
            rendered = Rendered(text, MIME_TYPES["text"])
        elif fmt == "html":
            fragment = await self._fragment(definition, model, in_thread=in_thread, for_print=False)
            rendered = Rendered(fragment, MIME_TYPES["html"])
        else:
            if self._media_slots is None:
                self._media_slots = asyncio.Semaphore(self.pool.size)
            # Prepare the page only when a worker can take it: fifty queued renders then cost
            # the event loop one jinja render at a time instead of fifty in one go.
            async with self._media_slots:
                fragment = await self._fragment(definition, model, in_thread=in_thread, for_print=True)
                rendered = await self._render_media(definition, model, fragment, fmt, self.budget(size))
        self.stats.produced[fmt] += 1
        if self.cache is not None:
            await self.cache.set(key, rendered)
        return rendered

    async def _fragment(
        self, definition: ComponentDef[Any], model: BaseModel, *, in_thread: bool, for_print: bool
    ) -> str:
        if in_thread:
            return await asyncio.to_thread(self._html.fragment, definition, model, for_print=for_print)
        return self._html.fragment(definition, model, for_print=for_print)

    def budget(self, props_bytes: int) -> float:
        """Seconds a PNG/PDF render of props of that many bytes of JSON may take."""
        return min(self.timeout + self.timeout_per_kb * props_bytes / 1024, 6 * self.timeout)

    async def _render_media(
        self, definition: ComponentDef[Any], model: BaseModel, fragment: str, fmt: RenderFormat, timeout: float
    ) -> Rendered:
        title = getattr(model, "title", None)
        profile: PageProfile = "pdf" if fmt == "pdf" else "image"
        page = self._html.page(
            fragment, profile=profile, title=title if isinstance(title, str) else definition.name, css=definition.css
        )
        assets = str(self.assets_dir) if self.assets_dir is not None else None
        try:
            if fmt == "pdf":
                pdf = await self.pool.run(_worker.render_pdf, page, self.max_pages, assets, timeout=timeout)
                warnings, rendered = pdf.warnings, Rendered(pdf.pdf, MIME_TYPES["pdf"], (pdf.pdf,), pdf.pages)
            else:
                png = await self.pool.run(
                    _worker.render_png, page, self.image_width, self.max_pages, assets, timeout=timeout
                )
                pages = tuple(png.pages)
                warnings, rendered = png.warnings, Rendered(pages[0], MIME_TYPES["png"], pages, len(pages))
        except RemoteError as exc:  # weasyprint's own errors, crossed from the worker
            raise RenderFailedError(f"Rendering {definition.name} failed: {exc}", component=definition.name) from exc
        except RenderError as exc:
            exc.component = exc.component or definition.name
            raise
        except Exception as exc:  # a built-in one
            raise RenderFailedError(f"Rendering {definition.name} failed: {exc}", component=definition.name) from exc
        for warning in warnings:
            logger.debug("weasyprint, rendering %s: %s", definition.name, warning)
        return rendered


def _stylesheet(catalog: Catalog) -> str:
    own = [f"\n/* {d.name} */\n{d.css.strip()}\n" for d in catalog if d.css.strip()]
    return component_stylesheet() + "".join(own)


def _text_form(definition: ComponentDef[Any], model: BaseModel) -> str:
    try:
        return definition.text(model)
    except Exception as exc:  # the component's own function: its failure, not the renderer's
        message = " ".join(str(exc).split())[:300]
        raise TemplateFailedError(
            f"Text form of {definition.name} failed: {type(exc).__name__}: {message}", component=definition.name
        ) from exc


def _unknown_text(component: str, props: Mapping[str, Any] | BaseModel) -> str:
    data = props.model_dump(mode="json") if isinstance(props, BaseModel) else props
    try:
        return generic_text(component, json.loads(json.dumps(data, default=str)))
    except (TypeError, ValueError):
        return generic_text(component, {})


def _cache_hit(hit: bool) -> None:
    """Say on the current span (the gateway's ``render <component>``) whether the cache answered."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("agora.render.cache_hit", hit)
