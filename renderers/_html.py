"""HTML: jinja2 (autoescape always on) turns validated props into a safe fragment or a print page."""

from __future__ import annotations

import functools
import re
from html import escape
from pathlib import Path
from typing import Any, Literal

import jinja2
from pydantic import BaseModel

from ._catalog import ComponentDef
from ._errors import TemplateFailedError
from ._formats import format_value
from ._sanitize import sanitize_fragment

__all__ = [
    "ASSETS_PATH",
    "COMPONENT_STYLESHEET_PATH",
    "PAGE_BASE_URL",
    "STATIC_DIR",
    "TEMPLATES_DIR",
    "HtmlEngine",
    "PageProfile",
    "component_stylesheet",
]

_PACKAGE_DIR = Path(__file__).resolve().parent
TEMPLATES_DIR = _PACKAGE_DIR / "templates"
"""The built-in templates and ``_macros.html.j2``, importable from any component template."""
STATIC_DIR = _PACKAGE_DIR / "static"
"""Files a PDF/PNG render may read (the only ``file:`` URLs the renderer fetches)."""
COMPONENT_STYLESHEET_PATH = STATIC_DIR / "components.css"
"""Path of the component stylesheet (``ag-`` classes, plus the print rules for PDF and PNG pages)."""

ASSETS_PATH = "/assets/"
"""Where a gateway serves its app's static folder: a component shows ``/assets/product.png``."""
PAGE_BASE_URL = "https://gateway.invalid/"
"""The base URL of print pages. ``/assets/x.png`` in a fragment becomes
``https://gateway.invalid/assets/x.png``, which the render worker's fetcher reads from the
renderer's ``assets_dir`` on disk; it is never requested (``.invalid`` names no host, and the
fetcher refuses every other URL). Any other base would make a root-relative path ambiguous."""

PageProfile = Literal["pdf", "image"]
"""How a fragment is laid out for weasyprint: A4 document pages, or phone-width image pages."""


@functools.cache
def component_stylesheet() -> str:
    """The CSS text of the component stylesheet, for a page that shows component fragments.

    The web widget links or inlines it once; fragments from ``Renderer.render(..., "html")``
    then look as they do in the PNG and PDF forms. Every class is prefixed ``ag-``.
    """
    return COMPONENT_STYLESHEET_PATH.read_text(encoding="utf-8")


_LONG_RUN = re.compile(r"[^\s\u200b<>]{36,}")
_SOFT_BREAK_EVERY = 24
_TAG = re.compile(r"(<[^>]*>)")
_UNIT = re.compile(r"&#?[A-Za-z0-9]+;|.", re.DOTALL)
"""One character of escaped text: an entity (``&amp;``) counts as one and is never split."""


def soft_wrap(html: str) -> str:
    """Give text runs of 36 or more non-space characters a zero-width space every 24 characters.

    For print pages: weasyprint sizes table columns by their longest unbreakable run and lays a
    10,000-character word out very slowly. Runs of up to 35 characters (IBANs, UUIDs) stay
    whole, so they still copy and paste as they are.

    Only text between tags changes, never a tag: a long ``src="/assets/a-long-product-name.png"``
    or ``data:`` URL stays whole (a break in it would lose the image). The fragment is escaped
    HTML (autoescaped, or sanitized), so a ``<`` in text is always an entity; entities are kept
    whole and count as one character.
    """
    parts = _TAG.split(html)
    for index in range(0, len(parts), 2):  # even places hold the text between tags
        if len(parts[index]) >= 36:
            parts[index] = _LONG_RUN.sub(_split_run, parts[index])
    return "".join(parts)


def _split_run(match: re.Match[str]) -> str:
    units = _UNIT.findall(match.group(0))
    if len(units) < 36:
        return match.group(0)
    return "\u200b".join("".join(units[i : i + _SOFT_BREAK_EVERY]) for i in range(0, len(units), _SOFT_BREAK_EVERY))


def _build_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        auto_reload=False,
    )
    env.globals["zip"] = zip
    env.filters["format_value"] = format_value
    return env


class HtmlEngine:
    """Renders component templates. One per ``Renderer``; compiled templates are kept per definition.

    Fragments for weasyprint pages then get invisible break opportunities in long unbroken runs
    of text (see ``soft_wrap``); fragments for the web keep their text as it is.
    """

    def __init__(self) -> None:
        self._env = _build_environment()
        self._compiled: dict[ComponentDef[Any], jinja2.Template] = {}

    def fragment(self, definition: ComponentDef[Any], props: BaseModel, *, for_print: bool = False) -> str:
        """The component's HTML fragment for validated ``props``, sanitized.

        ``for_print`` prepares it for weasyprint: long unbroken runs of text get invisible break
        opportunities (see ``soft_wrap``). Templates of definitions with ``sanitize`` (every
        component but the audited built-ins) go through ``sanitize_fragment``.

        Raises:
            TemplateFailedError: the template failed to compile (a filter that does not exist) or
                to render (an undefined name, a missing include, a filter raising), or the
                definition's ``context`` raised.
        """
        context: dict[str, Any] = {"props": props, "component": definition.name}
        try:
            template = self._compiled.get(definition)
            if template is None:
                # Compiling finds what ComponentDef's parse-only check cannot: unknown filters and tests.
                template = self._env.from_string(definition.template)
                self._compiled[definition] = template
            if definition.context is not None:
                context.update(definition.context(props))
            html = template.render(context)
        except Exception as exc:  # a template or context bug: report it as this component's failure
            raise TemplateFailedError(
                f"Template of {definition.name} failed: {type(exc).__name__}: {_one_line(exc)}",
                component=definition.name,
            ) from exc
        html = (sanitize_fragment(html) if definition.sanitize else html).strip()
        return soft_wrap(html) if for_print else html

    def page(self, fragment: str, *, profile: PageProfile, title: str, css: str = "") -> str:
        """A whole HTML document around ``fragment`` for weasyprint.

        The shared stylesheet is not inlined: workers parse it once and pass it to every render.
        ``css``, the component's own stylesheet (``ComponentDef.css``), is, in a ``<style>``.
        """
        style = f"<style>{css}</style>" if css else ""
        return (
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{escape(title)}</title>{style}</head>"
            f'<body class="ag-page ag-page--{profile}">{fragment}</body></html>'
        )


def _one_line(exc: BaseException) -> str:
    """An exception's message on one line, cut to 300 characters (it goes into one log line)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:299] + "…"
