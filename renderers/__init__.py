"""Components as HTML, PNG images, PDF documents and text: one definition, every channel.

``Renderer(catalog).render(component, props, fmt)`` draws a catalog component; ``negotiate``
decides which form a client gets; ``MediaStore`` keeps rendered media behind signed URLs.
Importing this package is cheap: weasyprint, pypdfium2 and Pillow load only in render workers.

A channel delivering a ``ui`` event::

    delivery = negotiate(event, capabilities, renderer.catalog)
    if delivery == "props":
        send_props(event)                                   # the client draws it
    else:
        rendered = await renderer.render(
            event.component, event.props, DELIVERY_FORMATS[delivery],
            version=event.version, fallback_text=event.fallback_text,
        )
        if delivery in ("image", "pdf"):                    # WhatsApp: media with a caption
            for page in rendered.pages:
                token = await media.put(page, rendered.mime)
                send_media(f"{public_base_url}/media/{token}")
        else:
            send(rendered.data)                             # an HTML fragment, or text
"""

from ._assets import published_path
from ._cache import (
    MemoryRenderCache,
    RedisRenderCache,
    RenderCache,
    TieredRenderCache,
    decode_rendered,
    encode_rendered,
)
from ._catalog import Catalog, ComponentDef, MediaKind
from ._components import (
    CalloutProps,
    ChartProps,
    ChecklistProps,
    CodeBlockProps,
    DataTableProps,
    DocumentProps,
    KpiCardsProps,
    TimelineProps,
    default_catalog,
)
from ._errors import (
    ComponentDefinitionError,
    MediaTokenError,
    MediaTokenReason,
    MediaUnavailableError,
    PropsInvalidError,
    RenderError,
    RenderFailedError,
    RenderTimeoutError,
    TemplateFailedError,
    UnknownComponentError,
)
from ._formats import ValueFormat, format_value
from ._html import ASSETS_PATH, COMPONENT_STYLESHEET_PATH, component_stylesheet
from ._media import MediaBackend, MediaItem, MediaStore, MemoryMediaBackend, RedisMediaBackend
from ._negotiation import DELIVERY_FORMATS, Delivery, NegotiableUi, negotiate
from ._pool import RemoteError, RenderPool
from ._props import ComponentProps, at_most
from ._rendered import RENDER_FORMATS, Rendered, RenderFormat
from ._renderer import Renderer, RenderStats

__all__ = [
    "ASSETS_PATH",
    "COMPONENT_STYLESHEET_PATH",
    "DELIVERY_FORMATS",
    "RENDER_FORMATS",
    "CalloutProps",
    "Catalog",
    "ChartProps",
    "ChecklistProps",
    "CodeBlockProps",
    "ComponentDef",
    "ComponentDefinitionError",
    "ComponentProps",
    "DataTableProps",
    "Delivery",
    "DocumentProps",
    "KpiCardsProps",
    "MediaBackend",
    "MediaItem",
    "MediaKind",
    "MediaStore",
    "MediaTokenError",
    "MediaTokenReason",
    "MediaUnavailableError",
    "MemoryMediaBackend",
    "MemoryRenderCache",
    "NegotiableUi",
    "PropsInvalidError",
    "RedisMediaBackend",
    "RedisRenderCache",
    "RemoteError",
    "RenderCache",
    "RenderError",
    "RenderFailedError",
    "RenderFormat",
    "RenderPool",
    "RenderStats",
    "RenderTimeoutError",
    "Rendered",
    "Renderer",
    "TemplateFailedError",
    "TieredRenderCache",
    "TimelineProps",
    "UnknownComponentError",
    "ValueFormat",
    "at_most",
    "component_stylesheet",
    "decode_rendered",
    "default_catalog",
    "encode_rendered",
    "format_value",
    "negotiate",
    "published_path",
]
