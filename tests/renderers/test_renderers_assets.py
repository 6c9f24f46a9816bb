"""Custom components in PNG and PDF: images from the assets folder only, their own CSS, their failures.

A render reads ``/assets/<path>`` from ``Renderer(assets_dir=...)`` on disk and nothing else: no
path out of that folder (``..``, encoded or not, a symlink), no other file, no remote URL, which
would be a request from the gateway's network. What is refused is left out of the page.
"""

import shutil
from pathlib import Path

import pytest
from aiohttp import web

from renderers import (
    ComponentDef,
    ComponentDefinitionError,
    ComponentProps,
    Renderer,
    RenderFailedError,
    RenderPool,
    TemplateFailedError,
    default_catalog,
)
from tests.custom_components import ENOUGH_MUG, MUG_PROPS, PHOTO, PRODUCT, mug_pixels, pdf_mug_pixels

pytestmark = pytest.mark.asyncio(loop_scope="session")


class PictureProps(ComponentProps):
    src: str


PICTURE = ComponentDef(
    "Picture",
    1,
    PictureProps,
    '<div class="ag-c"><img src="{{ props.src }}" alt="a picture" style="width: 100%"></div>',
    sanitize=False,  # the URLs reach the engine as the template wrote them: the fetcher is what is tested
)


LONG_NAME = "lisbon-tile-mug-in-cobalt-blue-with-a-saucer.png"
"""Long enough that a break for print layout (every 24 characters of a run) would cut its URL."""


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """``published/`` (the assets: ``ok.png``, ``link.png`` -> ``../secret.png``) beside ``secret.png``."""
    published = tmp_path / "published"
    (published / "sub").mkdir(parents=True)
    (published / "ok.png").write_bytes(PHOTO)
    (published / "sub" / "deep.png").write_bytes(PHOTO)
    (published / LONG_NAME).write_bytes(PHOTO)
    shutil.copy(published / "ok.png", tmp_path / "secret.png")
    (published / "link.png").symlink_to(tmp_path / "secret.png")
    return tmp_path


async def test_the_product_card_shows_its_photo_in_png_and_pdf(shared_pool: RenderPool) -> None:
    async with Renderer(PRODUCT.catalog, pool=shared_pool, assets_dir=PRODUCT.STATIC_DIR) as renderer:
        png = await renderer.render("ProductCard", MUG_PROPS, "png")
        pdf = await renderer.render("ProductCard", MUG_PROPS, "pdf")
    assert mug_pixels(png.data) > ENOUGH_MUG  # type: ignore[arg-type]
    assert pdf_mug_pixels(pdf.data) > ENOUGH_MUG  # type: ignore[arg-type]


async def test_without_an_assets_folder_the_photo_is_left_out(shared_pool: RenderPool) -> None:
    async with Renderer(PRODUCT.catalog, pool=shared_pool) as renderer:
        png = await renderer.render("ProductCard", MUG_PROPS, "png")
    assert mug_pixels(png.data) == 0  # type: ignore[arg-type]


async def test_only_files_inside_the_assets_folder_are_read(shared_pool: RenderPool, folders: Path) -> None:
    catalog = default_catalog().extend([PICTURE])
    async with Renderer(catalog, pool=shared_pool, assets_dir=folders / "published") as renderer:

        async def shown(src: str) -> int:
            return mug_pixels((await renderer.render("Picture", {"src": src}, "png")).data)  # type: ignore[arg-type]

        assert await shown("/assets/ok.png") > ENOUGH_MUG
        assert await shown("/assets/sub/deep.png") > ENOUGH_MUG
        assert await shown(f"/assets/{LONG_NAME}") > ENOUGH_MUG
        assert await shown("https://gateway.invalid/assets/ok.png") > ENOUGH_MUG  # what /assets/ok.png resolves to
        for refused in (
            "/assets/../secret.png",
            "/assets/%2e%2e/secret.png",
            "/assets/sub/..%2f..%2fsecret.png",
            "/assets/link.png",  # a symlink out of the folder
            "/assets//" + str(folders / "secret.png"),
            "/secret.png",
            "secret.png",
            (folders / "published" / "ok.png").as_uri(),  # the right file, but as a file: URL
            (folders / "secret.png").as_uri(),
            "https://gateway.invalid/secret.png",
            "/assets/missing.png",
        ):
            assert await shown(refused) == 0, refused


async def test_a_hidden_file_in_the_assets_folder_is_never_read(shared_pool: RenderPool, folders: Path) -> None:
    published = folders / "published"
    (published / ".private").mkdir()
    (published / ".private" / "photo.png").write_bytes(PHOTO)
    (published / ".photo.png").write_bytes(PHOTO)
    (published / "alias.png").symlink_to(published / ".photo.png")
    (published / "loop.png").symlink_to(published / "loop.png")
    catalog = default_catalog().extend([PICTURE])
    async with Renderer(catalog, pool=shared_pool, assets_dir=published) as renderer:
        for src in (
            "/assets/.photo.png",
            "/assets/.private/photo.png",
            "/assets/%2ephoto.png",
            "/assets/alias.png",
            "/assets/loop.png",
        ):
            png = await renderer.render("Picture", {"src": src}, "png")
            assert mug_pixels(png.data) == 0, src  # type: ignore[arg-type]


async def test_a_remote_image_is_never_fetched(shared_pool: RenderPool) -> None:
    hits: list[str] = []

    async def photo(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(body=PHOTO, content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name:.*}", photo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        catalog = default_catalog().extend([PICTURE])
        async with Renderer(catalog, pool=shared_pool, assets_dir=PRODUCT.STATIC_DIR) as renderer:
            for src in (f"http://127.0.0.1:{port}/assets/product.png", f"http://localhost:{port}/product.png"):
                png = await renderer.render("Picture", {"src": src}, "png")
                assert mug_pixels(png.data) == 0  # type: ignore[arg-type]
        assert hits == []
    finally:
        await runner.cleanup()


class SwatchProps(ComponentProps):
    label: str


_SWATCH = '<div class="ag-c ag-test-tint">{{ props.label }}</div>'
_GREEN = ".ag-test-tint { background: rgb(10, 200, 120); height: 200px; }"


def _green_pixels(png: bytes) -> int:
    import io

    from PIL import Image

    data = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    return sum(1 for i in range(0, len(data), 3) if data[i : i + 3] == bytes((10, 200, 120)))


async def test_a_components_own_css_is_in_the_stylesheet_and_its_pages(shared_pool: RenderPool) -> None:
    styled = ComponentDef("Swatch", 1, SwatchProps, _SWATCH, css=_GREEN)
    plain = ComponentDef("Swatch", 1, SwatchProps, _SWATCH)
    async with Renderer(default_catalog().extend([styled]), pool=shared_pool) as renderer:
        assert renderer.stylesheet.endswith("/* Swatch */\n" + _GREEN + "\n")
        green = await renderer.render("Swatch", {"label": "x"}, "png")
    async with Renderer(default_catalog().extend([plain]), pool=shared_pool) as renderer:
        assert "ag-test-tint" not in renderer.stylesheet
        unstyled = await renderer.render("Swatch", {"label": "x"}, "png")
    assert _green_pixels(green.data) > 10_000 and _green_pixels(unstyled.data) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("css", ["</style><script>alert(1)</script>", "a { } <!-- b", 42])
async def test_css_that_could_end_its_style_element_is_refused(css: object) -> None:
    with pytest.raises(ComponentDefinitionError, match="css must be CSS text"):
        ComponentDef("Swatch", 1, SwatchProps, _SWATCH, css=css)  # type: ignore[arg-type]


class CountProps(ComponentProps):
    count: int = 1


def _failing_text(props: CountProps) -> str:
    raise KeyError("no such field")


@pytest.mark.parametrize(
    ("template", "fmt", "said"),
    [
        (
            "<p>{{ props.nope }}</p>",
            "html",
            "UndefinedError: 'test_renderers_assets.CountProps object' has no attribute 'nope'",
        ),
        ("<p>{{ props.count // 0 }}</p>", "png", "ZeroDivisionError"),
        (
            "<p>{{ props.count | no_such_filter }}</p>",
            "pdf",
            "TemplateAssertionError: No filter named 'no_such_filter'",
        ),
        ('<p>{% include "missing.html.j2" %}</p>', "html", "TemplateNotFound: 'missing.html.j2' not found"),
        ("<p>fine</p>", "text", "Text form of Broken failed: KeyError"),
    ],
)
async def test_a_component_whose_own_code_fails_is_a_template_failure(
    shared_pool: RenderPool, template: str, fmt: str, said: str
) -> None:
    broken = ComponentDef("Broken", 1, CountProps, template, _failing_text)
    async with Renderer(default_catalog().extend([broken]), pool=shared_pool) as renderer:
        with pytest.raises(TemplateFailedError) as raised:
            await renderer.render("Broken", {}, fmt)  # type: ignore[arg-type]
        assert renderer.stats.produced == {"html": 0, "png": 0, "pdf": 0, "text": 0}
    assert isinstance(raised.value, RenderFailedError) and raised.value.code == "template_failed"
    assert raised.value.component == "Broken" and said in str(raised.value)
    assert "\n" not in str(raised.value)
