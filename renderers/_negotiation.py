"""``negotiate``: which form of a ``ui`` event a client gets (docs/architecture.md, "Components")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from tools import UiCapabilities

from ._catalog import Catalog, ComponentDef, MediaKind
from ._errors import PropsInvalidError

__all__ = ["DELIVERY_FORMATS", "Delivery", "NegotiableUi", "negotiate"]

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


class NegotiableUi(Protocol):
    """What ``negotiate`` reads of a component to deliver: a ``ui`` event, a ``tools.UiComponent``."""

    @property
    def component(self) -> str:
        """The catalog name."""
        ...

    @property
    def version(self) -> int:
        """The version of its props shape."""
        ...

    @property
    def props(self) -> Mapping[str, object]:
        """Its props (a component may choose its media by them)."""
        ...


def negotiate(
    ui: NegotiableUi | Mapping[str, object], capabilities: UiCapabilities | None, catalog: Catalog
) -> Delivery:
    """Decide how a client gets a component, in this order (docs/architecture.md, "Components").

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
        ui: The ``ui`` event or a ``tools.UiComponent`` (``NegotiableUi``), or a mapping with
            the same keys (``version`` and ``props`` optional). ``props`` lets a component
            choose its media by its props (a table of more than 25 rows prefers PDF).
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


def _read(ui: NegotiableUi | Mapping[str, object]) -> tuple[str, int, object]:
    if isinstance(ui, Mapping):
        version = ui.get("version") or 1
        return str(ui.get("component", "")), int(version) if isinstance(version, int | str) else 1, ui.get("props")
    return ui.component, ui.version or 1, ui.props


def _validated(definition: ComponentDef[Any], props: object) -> BaseModel | None:
    if not isinstance(props, Mapping | BaseModel):
        return None
    try:
        model: BaseModel = definition.validate(props)
    except PropsInvalidError:
        return None
    return model
