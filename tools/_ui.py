"""The small UI types that tools produce and channels declare.

``renderers`` builds on these; they live here because a tool's context carries them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from ._models import PositionalModel

__all__ = ["COMPONENT_NAME_PATTERN", "UI_FORMATS", "ComponentRef", "UiCapabilities", "UiComponent", "UiFormat"]

COMPONENT_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9]{0,63}$"
"""What a component name may look like: a letter, then up to 63 letters or digits."""

_COMPONENT_NAME = re.compile(COMPONENT_NAME_PATTERN)

UiFormat = Literal["html", "image", "pdf", "text"]
"""A server-rendered form a client accepts."""

UI_FORMATS: tuple[UiFormat, ...] = ("html", "image", "pdf", "text")


class UiComponent(PositionalModel):
    """A component a tool shows: its name, props, version and an optional id and text.

    Returned from ``present(output, ctx)`` or pushed with ``ctx.emit_ui``. Pushing the same ``id``
    again replaces the component in place.
    """

    component: str = Field(pattern=COMPONENT_NAME_PATTERN)
    """Catalog name, e.g. ``"DataTable"``."""
    props: dict[str, Any] = Field(default_factory=dict)
    """The component's props; plain JSON."""
    version: int = Field(default=1, ge=1)
    """Version of the component's props shape."""
    id: str | None = Field(default=None, min_length=1, max_length=200)
    """Stable id; the runtime assigns one when missing."""
    fallback_text: str | None = None
    """Text shown where the component cannot be drawn; else the component's own text form."""


class ComponentRef(PositionalModel):
    """A component a client draws itself from props, at one version."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(pattern=COMPONENT_NAME_PATTERN)
    version: int = Field(default=1, ge=1, le=2**53 - 1)


class UiCapabilities(PositionalModel):
    """What a client can show: components it draws from props, and server-rendered formats.

    Validation is strict: unknown keys, bad names, non-positive versions and duplicates are
    refused, so a channel can answer 400 on a bad declaration.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    components: list[ComponentRef] | None = None
    """Components drawn natively from props; ``None`` or ``[]`` means none."""
    formats: list[UiFormat] = Field(default_factory=lambda: list[UiFormat](["text"]))
    """Server-rendered forms accepted, in order of preference."""

    @field_validator("components")
    @classmethod
    def _unique_components(cls, value: list[ComponentRef] | None) -> list[ComponentRef] | None:
        if value is not None:
            names = [ref.name for ref in value]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            if duplicates:
                raise ValueError(f"duplicate component names: {', '.join(duplicates)}")
        return value

    @field_validator("formats")
    @classmethod
    def _unique_formats(cls, value: list[UiFormat]) -> list[UiFormat]:
        if len(set(value)) != len(value):
            raise ValueError("duplicate formats")
        return value

    def accepts_component(self, name: str, version: int) -> bool:
        """Whether the client draws ``name`` at ``version`` itself."""
        return any(ref.name == name and ref.version == version for ref in self.components or ())


def is_component_name(name: object) -> bool:
    """Whether ``name`` is a valid component name."""
    return isinstance(name, str) and _COMPONENT_NAME.fullmatch(name) is not None
