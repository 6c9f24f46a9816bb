"""Make a rendered fragment safe to insert into a page, whatever a template did with its props.

Autoescaping keeps props from opening tags, but a template may still put a prop where markup
matters (``<a href="{{ props.url }}">``). So every fragment goes through an allow-list: known
HTML and SVG elements only, no ``script``/``style``/``iframe`` (dropped with their content), no
event handlers, URLs limited to http(s), mailto, tel, fragments, relative paths and raster
``data:image``; ``url(...)`` only to ``#fragments``; ``style`` without ``url``, ``expression``
or escapes. Tags are re-balanced, so a fragment can never close its host's elements.
"""

from __future__ import annotations

import re
from html import escape
from html.parser import HTMLParser

__all__ = ["sanitize_fragment"]

_HTML = frozenset(
    "a abbr article aside b bdi bdo blockquote br caption cite code col colgroup dd del details dfn div dl dt em "
    "figcaption figure footer h1 h2 h3 h4 h5 h6 header hr i img ins kbd li mark ol p pre q s samp section small "
    "span strong sub summary sup table tbody td tfoot th thead time tr u ul var wbr".split()
)
_SVG = frozenset(
    "svg g path rect circle ellipse line polyline polygon text tspan title desc defs lineargradient "
    "radialgradient stop clippath symbol use marker pattern mask".split()
)
_DROP_WITH_CONTENT = frozenset(
    "script style template iframe object embed noscript textarea select option math foreignobject xmp "
    "plaintext noembed noframes frame frameset applet head title".split()
)
_VOID = frozenset("br col hr img wbr".split())

_SVG_CASE = {
    name.lower(): name
    for name in (
        "viewBox preserveAspectRatio gradientUnits gradientTransform patternUnits patternContentUnits "
        "clipPathUnits markerWidth markerHeight markerUnits refX refY textLength lengthAdjust "
        "linearGradient radialGradient clipPath"
    ).split()
}

_ATTRS = frozenset(
    (
        "class id title lang dir role hidden tabindex width height colspan rowspan scope headers abbr align "
        "valign alt datetime cite href src start reversed value span open "
        # SVG
        "viewbox preserveaspectratio xmlns xmlns:xlink x y x1 y1 x2 y2 cx cy r rx ry d points fill "
        "fill-opacity fill-rule stroke stroke-width stroke-linecap stroke-linejoin stroke-dasharray "
        "stroke-dashoffset stroke-opacity stroke-miterlimit opacity transform text-anchor dominant-baseline "
        "alignment-baseline font-size font-weight font-family font-style letter-spacing dx dy offset "
        "stop-color stop-opacity gradientunits gradienttransform clip-path clip-rule mask marker-start "
        "marker-mid marker-end markerwidth markerheight markerunits refx refy orient vector-effect "
        "shape-rendering focusable xlink:href textlength lengthadjust visibility display color patternunits "
        "style"
    ).split()
)
_URL_ATTRS = frozenset({"href", "src", "xlink:href", "cite"})
_PAINT_ATTRS = frozenset({"fill", "stroke", "clip-path", "mask", "marker-start", "marker-mid", "marker-end"})
_SAFE_SCHEMES = frozenset({"http", "https", "mailto", "tel"})
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[a-z0-9+/=]*$")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f-\x9f\u200b-\u200f\u2028\u2029\ufeff]+")
_URL_FUNCTION = re.compile(r"url\s*\(\s*['\"]?\s*#[A-Za-z][\w\-.:]*\s*['\"]?\s*\)", re.IGNORECASE)
_BAD_STYLE = re.compile(r"url\s*\(|expression|javascript|vbscript|@import|\\|behavior|binding|image-set|src\s*\(|[<>]")


def sanitize_fragment(html: str) -> str:
    """Return ``html`` reduced to the allow-list, with balanced tags."""
    cleaner = _Cleaner()
    cleaner.feed(html)
    cleaner.close()
    return cleaner.result()


def _safe_url(value: str, *, name: str, tag: str) -> bool:
    compact = _INVISIBLE.sub("", value).lower()
    if tag == "use":
        return compact.startswith("#")
    match = _SCHEME.match(compact)
    if match is None:
        return not compact.startswith("//")  # relative path or fragment; "//host" is a foreign origin
    if match.group(1) == "data":
        return name == "src" and _DATA_IMAGE.match(compact) is not None
    return match.group(1) in _SAFE_SCHEMES


def _safe_value(name: str, value: str, tag: str) -> bool:
    if name in _URL_ATTRS:
        return _safe_url(value, name=name, tag=tag)
    if name == "style":
        return _BAD_STYLE.search(_INVISIBLE.sub("", value).lower()) is None
    if name in _PAINT_ATTRS:
        # fill="url(#g)" and friends may point inside the fragment, nowhere else.
        return "url" not in _URL_FUNCTION.sub("", value).lower()
    return True


class _Cleaner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._out: list[str] = []
        self._open: list[str] = []
        self._skip: list[str] = []

    def result(self) -> str:
        self._out.extend(f"</{_SVG_CASE.get(tag, tag)}>" for tag in reversed(self._open))
        self._open.clear()
        return "".join(self._out)

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], *, self_closing: bool) -> None:
        if self._skip:
            if tag in _DROP_WITH_CONTENT and not self_closing:
                self._skip.append(tag)
            return
        if tag in _DROP_WITH_CONTENT:
            if not self_closing:
                self._skip.append(tag)
            return
        if tag not in _HTML and tag not in _SVG:
            return  # unknown element: drop the tag, keep its text
        parts = [_SVG_CASE.get(tag, tag)]
        for name, value in attrs:
            if not (name in _ATTRS or name.startswith(("aria-", "data-"))):
                continue
            text = "" if value is None else value
            if _safe_value(name, text, tag):
                parts.append(f'{_SVG_CASE.get(name, name)}="{escape(text, quote=True)}"')
        if self_closing and tag in _SVG:
            self._out.append(f"<{' '.join(parts)}/>")
            return
        self._out.append(f"<{' '.join(parts)}>")
        if tag not in _VOID:
            self._open.append(tag)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, self_closing=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, self_closing=True)

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag not in self._open:
            return  # stray end tag: never let it close the host's elements
        while self._open:
            top = self._open.pop()
            self._out.append(f"</{_SVG_CASE.get(top, top)}>")
            if top == tag:
                break

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._out.append(escape(data, quote=False))
