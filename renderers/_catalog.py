"""``ComponentDef`` (one component: props model, template, text form, media) and ``Catalog``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

import jinja2
from pydantic import BaseModel, ValidationError

from tools import COMPONENT_NAME_PATTERN

from ._errors import ComponentDefinitionError, PropsInvalidError, UnknownComponentError
from ._textform import generic_text

__all__ = ["Catalog", "ComponentDef", "MediaKind"]

MediaKind = Literal["image", "pdf"]
"""The media a component prefers when a client takes media rather than HTML."""

P = TypeVar("P", bound=BaseModel)

_SYNTAX_CHECK = jinja2.Environment(autoescape=True)
# fullmatch, not match: with ``re.match`` the pattern's ``$`` would let a trailing newline through.
_NAME = re.compile(COMPONENT_NAME_PATTERN)


@dataclass(frozen=True, init=False)
class ComponentDef(Generic[P]):
    """One component: how its props look, how it draws, how it reads as text, which media it prefers.

    ``ComponentDef(name, version, props, template, fallback_text=None, media="image")``; every
    argument also works by keyword. The definition is checked at once: a bad name, a version
    below 1, props that are not a pydantic model or a template that does not parse raise
    ``ComponentDefinitionError``. A template that fails later (an undefined name, a filter that
    does not exist, a ``context`` that raises) is a ``RenderFailedError`` of its render: channels
    then send the component's text form.

    Example:
        ```python
        class BadgeProps(ComponentProps):
            label: str

        badge = ComponentDef(
            name="Badge",
            props=BadgeProps,
            template='<span class="ag-c ag-badge">{{ props.label }}</span>',
            fallback_text=lambda p: f"[{p.label}]",
        )
        ```
    """

    name: str
    """Catalog name; matches ``^[A-Za-z][A-Za-z0-9]{0,63}$``."""
    version: int
    """Version of the props shape; a ``ui`` event at another version is not this component."""
    props: type[P]
    """The pydantic model every render validates the props against."""
    template: str
    """jinja2 source of the HTML fragment (autoescaped). It sees ``props`` (the validated model),
    ``component`` (the name) and whatever ``context`` returns. It may ``{% import %}`` the
    built-in macros (``"_macros.html.j2"``) and use the ``format_value`` filter."""
    fallback_text: Callable[[P], str] | None
    """The component's own text form; ``None`` falls back to its title and props as JSON."""
    media: MediaKind | Callable[[P | None], MediaKind]
    """Preferred media for image/PDF clients, or a function of the props (``None`` when the
    props are unknown or invalid) that chooses, e.g. PDF for a long table."""
    context: Callable[[P], Mapping[str, Any]] | None = field(default=None)
    """Extra template variables computed from the props in Python (chart geometry, formatted cells)."""
    description: str = field(default="")
    """One line for tool authors and catalogs; not rendered."""
    sanitize: bool = field(default=True)
    """Pass the rendered HTML through the allow-list sanitizer (``script``, event handlers,
    ``javascript:`` URLs and CSS ``url()`` removed, tags balanced). Keep it on unless the template
    is audited never to put a prop in a URL, ``style`` or event attribute, as the built-ins are
    (their tests render hostile props without it and check the output)."""
    css: str = field(default="")
    """The component's own stylesheet. The web widget gets it in ``/static/components.css`` after
    the built-in rules (``Renderer.stylesheet``); PNG and PDF pages of this component carry it
    too. Prefix its classes (``ag-product-card``): it shares a page with every other component.
    ``url(/assets/...)`` reads the app's static folder, as an ``img`` does."""

    def __init__(
        self,
        name: str,
        version: int = 1,
        props: type[P] | None = None,
        template: str | None = None,
        fallback_text: Callable[[P], str] | None = None,
        media: MediaKind | Callable[[P | None], MediaKind] = "image",
        *,
        context: Callable[[P], Mapping[str, Any]] | None = None,
        description: str = "",
        sanitize: bool = True,
        css: str = "",
    ) -> None:
        if not isinstance(name, str) or _NAME.fullmatch(name) is None:
            raise ComponentDefinitionError(f"Component name {name!r} does not match {COMPONENT_NAME_PATTERN}.")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ComponentDefinitionError(f"Component {name}: version must be an int >= 1, not {version!r}.")
        if not (isinstance(props, type) and issubclass(props, BaseModel)):
            raise ComponentDefinitionError(f"Component {name}: props must be a pydantic model class.")
        if not isinstance(template, str) or not template.strip():
            raise ComponentDefinitionError(f"Component {name}: template must be jinja2 source text.")
        try:
            _SYNTAX_CHECK.parse(template)
        except jinja2.TemplateSyntaxError as exc:
            raise ComponentDefinitionError(f"Component {name}: template line {exc.lineno}: {exc.message}") from exc
        if not (media in ("image", "pdf") or callable(media)):
            raise ComponentDefinitionError(f"Component {name}: media must be 'image', 'pdf' or a function.")
        if not isinstance(css, str) or "</" in css or "<!--" in css:
            # The print page carries it in a <style> element: markup in it would end that element.
            raise ComponentDefinitionError(f"Component {name}: css must be CSS text, without '</' or '<!--'.")
        for attr, value in (
            ("name", name),
            ("version", version),
            ("props", props),
            ("template", template),
            ("fallback_text", fallback_text),
            ("media", media),
            ("context", context),
            ("description", description),
            ("sanitize", sanitize),
            ("css", css),
        ):
            object.__setattr__(self, attr, value)

    def validate(self, props: Mapping[str, Any] | BaseModel) -> P:
        """Validate raw props into the props model.

        Raises:
            PropsInvalidError: naming every failing field; nothing should be rendered.
        """
        try:
            if isinstance(props, BaseModel) and not isinstance(props, self.props):
                props = props.model_dump(by_alias=False)
            return self.props.model_validate(props)
        except ValidationError as exc:
            errors = exc.errors(include_url=False, include_input=False, include_context=False)
            raise PropsInvalidError(self.name, [dict(e) for e in errors]) from exc

    def media_for(self, props: P | None) -> MediaKind:
        """The media this component prefers for these props (``None``: props unknown)."""
        if callable(self.media):
            return self.media(props)
        return self.media

    def text(self, props: P) -> str:
        """The component's text form for validated props."""
        if self.fallback_text is not None:
            text = self.fallback_text(props)
            if text.strip():
                return text
        return generic_text(self.name, props.model_dump(mode="json", by_alias=False))


class Catalog:
    """The components a gateway knows, one definition per name. Immutable.

    Args:
        components: The definitions; a name given twice raises ``ComponentDefinitionError``.
    """

    __slots__ = ("_defs",)

    def __init__(self, components: Iterable[ComponentDef[Any]] = ()) -> None:
        defs: dict[str, ComponentDef[Any]] = {}
        for definition in components:
            if not isinstance(definition, ComponentDef):
                raise ComponentDefinitionError(
                    f"Catalog entries must be ComponentDef, not {type(definition).__name__}."
                )
            if definition.name in defs:
                raise ComponentDefinitionError(f"Component {definition.name!r} is defined twice.")
            defs[definition.name] = definition
        self._defs = defs

    def extend(self, components: Iterable[ComponentDef[Any]]) -> Catalog:
        """A new catalog with these definitions added; one with an existing name replaces it.

        Names repeated within ``components`` are still refused.
        """
        added = Catalog(components)
        return Catalog([*(d for n, d in self._defs.items() if n not in added._defs), *added])

    def find(self, name: str, version: int | None = None) -> ComponentDef[Any] | None:
        """The definition of ``name`` (at ``version``, when given), or ``None``."""
        definition = self._defs.get(name)
        if definition is None or (version is not None and definition.version != version):
            return None
        return definition

    def get(self, name: str, version: int | None = None) -> ComponentDef[Any]:
        """The definition of ``name`` (at ``version``, when given).

        Raises:
            UnknownComponentError: no such name, or the catalog holds another version.
        """
        definition = self.find(name, version)
        if definition is None:
            known = self._defs.get(name)
            raise UnknownComponentError(name, version, known_version=known.version if known else None)
        return definition

    @property
    def names(self) -> tuple[str, ...]:
        """Component names, in definition order."""
        return tuple(self._defs)

    def __contains__(self, name: object) -> bool:
        return name in self._defs

    def __iter__(self) -> Iterator[ComponentDef[Any]]:
        return iter(self._defs.values())

    def __len__(self) -> int:
        return len(self._defs)

    def __repr__(self) -> str:
        return f"Catalog({', '.join(f'{d.name}@{d.version}' for d in self)})"
