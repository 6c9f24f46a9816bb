import re
from html.parser import HTMLParser
from typing import Any

import pytest
from renderers_support import RTL_EMOJI, SAMPLES, hostile_props

from renderers import (
    COMPONENT_STYLESHEET_PATH,
    ComponentDef,
    ComponentProps,
    Renderer,
    component_stylesheet,
    default_catalog,
)
from renderers._sanitize import sanitize_fragment

VOID = {"br", "col", "hr", "img", "wbr"}
URL_ATTRS = {"href", "src", "xlink:href", "action", "formaction", "cite"}
STYLED_ATTRS = {"style", "fill", "stroke", "clip-path", "mask", "marker-start", "marker-mid", "marker-end"}


class Inspector(HTMLParser):
    """Collects tags, attributes and text, and checks the tags balance."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.unbalanced: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.unbalanced.append(tag)
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def inspect(html: str) -> Inspector:
    inspector = Inspector()
    inspector.feed(html)
    inspector.close()
    return inspector


def assert_safe(html: str) -> Inspector:
    page = inspect(html)
    assert not {"script", "style", "iframe", "object", "embed"} & set(page.tags)
    assert not [a for a in page.attrs if a[1].startswith("on")]
    assert not [a for a in page.attrs if a[1] in URL_ATTRS and "javascript:" in a[2].lower().replace("\t", "")]
    assert not [a for a in page.attrs if a[1] in STYLED_ATTRS and re.search(r"url\((?!#)", a[2].lower())]
    assert page.unbalanced == [] and page.stack == [], (page.unbalanced, page.stack)
    return page


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_every_builtin_renders_a_safe_fragment(component: str) -> None:
    async with Renderer() as renderer:
        rendered = await renderer.render(component, SAMPLES[component], "html")
    assert rendered.mime == "text/html" and rendered.pages == ()
    assert isinstance(rendered.data, str)
    page = assert_safe(rendered.data)
    assert page.tags[0] in ("div", "article")
    assert "ag-c" in dict((n, v) for _, n, v in page.attrs[:1]).get("class", "")


@pytest.mark.parametrize("component", sorted(SAMPLES))
async def test_hostile_props_are_escaped(component: str) -> None:
    async with Renderer() as renderer:
        rendered = await renderer.render(component, hostile_props()[component], "html")
    assert isinstance(rendered.data, str)
    page = assert_safe(rendered.data)
    text = "".join(page.text).replace("\u200b", "")
    assert "<script>" in text  # shown as text, so it was escaped
    assert "&lt;script&gt;" in rendered.data
    if component not in ("Timeline",):
        assert RTL_EMOJI.split(" · ")[0] in text


async def test_chart_svg_survives_a_closing_svg_tag_in_its_labels() -> None:
    async with Renderer() as renderer:
        rendered = await renderer.render("Chart", hostile_props()["Chart"], "html")
    assert isinstance(rendered.data, str)
    page = assert_safe(rendered.data)
    assert page.tags.count("svg") >= 2  # the swatches and the chart
    assert "polyline" in page.tags and "circle" in page.tags
    assert "&lt;/svg&gt;" in rendered.data


class LinkProps(ComponentProps):
    url: str
    image: str
    css: str
    label: str


LINK_TEMPLATE = (
    '<div class="ag-c"><a href="{{ props.url }}" onclick="steal()">{{ props.label }}</a>'
    '<img src="{{ props.image }}" onerror="steal()"><p style="{{ props.css }}">styled</p>'
    '<script>steal()</script><iframe src="https://evil.example"></iframe></div></div></section>'
    '<svg viewBox="0 0 10 10"><use href="https://evil.example/s.svg#x"/><rect fill="url(#ok)"/>'
    '<rect fill="url(https://evil.example)"/></svg><div class="unclosed">'
)


async def test_custom_templates_are_sanitized_even_with_urls_from_props() -> None:
    catalog = default_catalog().extend([ComponentDef("Link", 1, LinkProps, LINK_TEMPLATE)])
    props = {
        "url": " JaVa\tScRiPt:alert(1)",
        "image": "https://cdn.example/logo.png",
        "css": "background-image: url(https://evil.example/track.png)",
        "label": "Open",
    }
    async with Renderer(catalog) as renderer:
        html = (await renderer.render("Link", props, "html")).data
    assert isinstance(html, str)
    page = assert_safe(html)
    anchor = [a for a in page.attrs if a[0] == "a"]
    assert anchor == []  # href dropped, onclick dropped
    assert ("img", "src", "https://cdn.example/logo.png") in page.attrs
    assert not [a for a in page.attrs if a[1] == "style"]
    assert not [a for a in page.attrs if a[0] == "use"]
    assert ("rect", "fill", "url(#ok)") in page.attrs
    assert "viewBox" in html  # SVG attribute case restored
    assert "steal()" not in "".join(page.text)


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ("<b>ok</b></div></div>", "<b>ok</b>"),
        ("<div><span>open", "<div><span>open</span></div>"),
        ('<a href="mailto:a@b.c">m</a>', '<a href="mailto:a@b.c">m</a>'),
        ('<a href="//evil.example">x</a>', "<a>x</a>"),
        ('<a href="/relative?q=1&amp;r=2">x</a>', '<a href="/relative?q=1&amp;r=2">x</a>'),
        ('<img src="data:image/png;base64,AAAA">', '<img src="data:image/png;base64,AAAA">'),
        ('<img src="data:text/html;base64,AAAA">', "<img>"),
        ("<style>body{}</style><p>t</p>", "<p>t</p>"),
        ("<!-- note --><p>t</p>", "<p>t</p>"),
        ("<custom-el>text</custom-el>", "text"),
        ('<p style="width: 40%">w</p>', '<p style="width: 40%">w</p>'),
        ('<p style="color: red; background: u\\72l(x)">w</p>', "<p>w</p>"),
        ("<svg><foreignObject><div>x</div></foreignObject></svg>", "<svg></svg>"),
        ("a &lt; b &amp; c", "a &lt; b &amp; c"),
    ],
)
def test_sanitizer(dirty: str, clean: str) -> None:
    assert sanitize_fragment(dirty) == clean


def test_stylesheet_is_exported_and_namespaced() -> None:
    css = component_stylesheet()
    assert css == COMPONENT_STYLESHEET_PATH.read_text(encoding="utf-8")
    classes = set(re.findall(r"(?<![\w.#-])\.(-?[A-Za-z_][\w-]*)", re.sub(r"/\*.*?\*/", "", css, flags=re.S)))
    assert classes and all(name.startswith("ag-") for name in classes), sorted(
        n for n in classes if not n.startswith("ag-")
    )
    assert "@media print" in css and "@page" in css


async def test_every_class_the_builtins_use_is_styled() -> None:
    css = component_stylesheet()
    used: set[str] = set()
    async with Renderer() as renderer:
        for component, props in SAMPLES.items():
            html = (await renderer.render(component, props, "html")).data
            assert isinstance(html, str)
            attrs = inspect(html).attrs
            root = set(attrs[0][2].split())  # "ag-c ag-datatable": the second names the component for hosts
            used.update(c for _, name, value in attrs if name == "class" for c in value.split() if c not in root)
            used.add("ag-c")
    missing = sorted(name for name in used if f".{name}" not in css)
    assert missing == []


async def test_large_props_render_html_off_the_event_loop_with_the_same_result() -> None:
    rows = [{"a": f"row {i}", "b": i * 1.5} for i in range(400)]
    props: dict[str, Any] = {
        "columns": [{"key": "a", "label": "A"}, {"key": "b", "label": "B", "format": "number"}],
        "rows": rows,
    }
    async with Renderer(cache=None) as inline, Renderer(cache=None, inline_limit=10) as threaded:
        assert (await inline.render("DataTable", props, "html")).data == (
            await threaded.render("DataTable", props, "html")
        ).data


def test_sanitizer_keeps_harmless_text_attributes() -> None:
    html = '<span title="Our URL policy: url(x) javascript: is text here" aria-label="see url(x)">t</span>'
    assert sanitize_fragment(html) == html
