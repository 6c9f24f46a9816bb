"""``negotiate``: which form of a ``ui`` event a client gets (DESIGN section 5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

from tools import UiCapabilities

from ._catalog import Catalog, ComponentDef, MediaKind
from ._errors import PropsInvalidError

__all__ = ["DELIVERY_FORMATS", "Delivery", "negotiate"]

Delivery = Literal["props", "html", "image", "pdf", "text"]
"""What a channel delivers for one ``ui`` event: the props for the client to draw, or a
server-rendered form."""

DELIVERY_FORMATS: dict[Delivery, Literal["html", "png", "pdf", "text"] | None] = {
    "props": None,
    "html": "html",
    "image": "png",
    "pdf": "pdf",
    "text": "text",
}
"""The ``Renderer.render`` format of each delivery (``props`` needs no render)."""


def negotiate(ui: Any, capabilities: UiCapabilities | None, catalog: Catalog) -> Delivery:
    """Decide how a client gets a component, in the order of DESIGN section 5.

    1. ``"props"`` when the client declared this component at this version in
       ``capabilities.components`` (whether or not the catalog knows it);
    2. a component the catalog does not know (name, or name at this version) can only be
       ``"text"`` from here on;
    3. ``"html"`` when ``"html"`` is among ``capabilities.formats``;
    4. the component's preferred media (``"image"`` for charts and cards, ``"pdf"`` for documents,
       long tables and long code) when accepted, else the other of the two when accepted;
    5. ``"text"``: every client reads text (``fallback_text``, else the component's text form).

    The order of ``formats`` does not reorder these steps; it is the client's statement of what
    it accepts.

    Args:
        ui: The ``ui`` event or a ``tools.UiComponent``: anything with ``component`` and
            ``version`` (attributes or mapping keys) and, optionally, ``props``, which lets a
            component choose its media by its props (a table of more than 25 rows prefers PDF).
        capabilities: What the client declared; ``None`` means a text-only client.
        catalog: The server's components.
    """
    name, version, props = _read(ui)
    caps = capabilities if capabilities is not None else UiCapabilities()
    if caps.accepts_component(name, version):
        return "props"
    definition = catalog.find(name, version)
    if definition is None:
        return "text"
    accepted = set(caps.formats)
    if "html" in accepted:
        return "html"
    preferred = definition.media_for(_validated(definition, props)) if callable(definition.media) else definition.media
    other: MediaKind = "pdf" if preferred == "image" else "image"
    for media in (preferred, other):
        if media in accepted:
            return media
    return "text"


def _read(ui: Any) -> tuple[str, int, Any]:
    if isinstance(ui, Mapping):
        return str(ui.get("component", "")), int(ui.get("version") or 1), ui.get("props")
    return str(ui.component), int(getattr(ui, "version", 1) or 1), getattr(ui, "props", None)


def _validated(definition: ComponentDef[Any], props: Any) -> BaseModel | None:
    if not isinstance(props, Mapping | BaseModel):
        return None
    try:
        model: BaseModel = definition.validate(props)
    except PropsInvalidError:
        return None
    return model
