"""The CPU side of rendering: weasyprint lays out the page, pypdfium2 rasterises it, Pillow encodes.

Imported only inside render workers (``_worker.init_worker``): importing weasyprint costs about
half a second and must stay off the gateway's start-up path and its event loop.
"""

from __future__ import annotations

import io
import logging
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pypdfium2 as pdfium
import weasyprint
from PIL import Image, ImageChops
from weasyprint.text import ffi as weasy_ffi
from weasyprint.text.fonts import FontConfiguration
from weasyprint.urls import URLFetcher, URLFetcherResponse

from ._assets import published_path
from ._errors import RenderFailedError
from ._html import ASSETS_PATH, COMPONENT_STYLESHEET_PATH, PAGE_BASE_URL, STATIC_DIR

__all__ = ["Engine", "has_harfbuzz_subset", "rasterize"]

_PNG_COMPRESS_LEVEL = 3
"""zlib level for PNG: 3 encodes a 1080 px page about twice as fast as the default 6 for a few
percent more bytes; these images travel once and are cached."""


def has_harfbuzz_subset() -> bool:
    """Whether weasyprint found ``libharfbuzz-subset`` (without it every PDF is about 3x slower)."""
    harfbuzz = weasy_ffi.harfbuzz
    return weasy_ffi.harfbuzz_subset is not None and bool(harfbuzz.hb_version_atleast(4, 1, 0))


_IMAGE_MARGIN_PT = 12.0
"""The image pages' margin (16 CSS px) in PDF points: the trimmed bottom keeps as much."""


_ASSET_LIMIT = 16 * 1024 * 1024
"""Bytes of one file an image may read from the assets folder; a larger file is left out."""


class _LocalOnlyFetcher(URLFetcher):  # type: ignore[misc]
    """Reads ``data:`` URLs, the package's ``static/`` files and the app's assets; refuses the rest.

    - ``data:`` URLs: the URL itself;
    - ``/assets/<path>`` (resolved against ``PAGE_BASE_URL``): ``<assets>/<path>`` on disk, when
      the render names an assets folder and the resolved path (``..`` and symlinks followed) is
      a file of at most 16 MiB inside it, with no hidden name (``.env``) on the way;
    - ``file:`` URLs under the package's ``static/``: that file (the stylesheet's own references);
    - anything else (``http(s):``, other ``file:`` paths, a path out of the assets folder):
      refused; weasyprint leaves the image out and records a warning.

    A template may put a prop in an ``img``: a render must never become a request from the
    gateway's network, nor read a file the app did not publish.
    """

    def __init__(self) -> None:
        super().__init__(allowed_protocols={"data"}, fail_on_errors=False)
        self._root = STATIC_DIR.resolve()
        self.assets: Path | None = None
        """The assets folder of the render under way (set by ``Engine.pdf``)."""

    def fetch(self, url: str, headers: Any = None) -> URLFetcherResponse:
        if url.startswith("data:"):
            return super().fetch(url, headers)
        parts = urlsplit(url)
        path: Path | None = None
        if parts.scheme == "file" and parts.netloc in ("", "localhost"):
            path = published_path(self._root, Path(unquote(parts.path)))
        elif url.startswith(_ASSETS_URL) and self.assets is not None:
            path = published_path(self.assets, self.assets / unquote(parts.path).removeprefix(ASSETS_PATH))
        if path is not None and path.is_file() and path.stat().st_size <= _ASSET_LIMIT:
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            return URLFetcherResponse(url, body=path.read_bytes(), headers={"Content-Type": mime})
        raise ValueError(f"refused to fetch {url[:80]!r}: renders read only data: URLs, /assets/ and their own files")


_ASSETS_URL = PAGE_BASE_URL.rstrip("/") + ASSETS_PATH


class _CollectedLog(logging.Handler):
    """Collects weasyprint's warnings of one render, to hand back to the parent."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < 20:
            self.records.append(record.getMessage()[:300])


class Engine:
    """The renderer of one worker process.

    It holds a reused ``FontConfiguration`` (a new one per render grows memory by about 0.2 MB
    each time), the component stylesheet parsed once, and the local-only fetcher.
    """

    def __init__(self) -> None:
        self._log = _CollectedLog()
        logging.getLogger("weasyprint").addHandler(self._log)
        logging.getLogger("weasyprint").propagate = False
        self._fonts = FontConfiguration()
        self._fetcher = _LocalOnlyFetcher()
        self._css = weasyprint.CSS(
            filename=str(COMPONENT_STYLESHEET_PATH), font_config=self._fonts, url_fetcher=self._fetcher
        )

    def pdf(self, html: str, *, max_pages: int, assets: str | None = None) -> tuple[bytes, int, list[str]]:
        """Lay ``html`` out and write it as a PDF; ``/assets/...`` URLs read files under ``assets``.

        Returns:
            The PDF, its page count, and weasyprint's warnings (refused fetches, CSS it ignored).

        Raises:
            RenderFailedError: more than ``max_pages`` pages.
        """
        self._log.records = []
        self._fetcher.assets = Path(assets).resolve() if assets else None
        try:
            document = weasyprint.HTML(string=html, base_url=PAGE_BASE_URL, url_fetcher=self._fetcher).render(
                stylesheets=[self._css], font_config=self._fonts
            )
            pages = len(document.pages)
            if pages > max_pages:
                raise RenderFailedError(f"The layout has {pages} pages, more than the limit of {max_pages}.")
            return document.write_pdf(), pages, self._log.records
        finally:
            self._fetcher.assets = None

    def png(self, html: str, *, width: int, max_pages: int, assets: str | None = None) -> tuple[list[bytes], list[str]]:
        """Lay ``html`` out, rasterise every page at ``width`` pixels and encode each as PNG.

        The last page is trimmed below its content (keeping a margin as deep as the top one), so a
        short card gives a short image.
        """
        pdf, _, warnings = self.pdf(html, max_pages=max_pages, assets=assets)
        return rasterize(pdf, width=width), warnings


def rasterize(pdf: bytes, *, width: int) -> list[bytes]:
    """Every page of ``pdf`` as a PNG ``width`` pixels wide, blank space below the content cut off.

    A quick low-resolution pass finds where each page's content ends, and only that part is
    rasterised at full size: a short card on a phone-height page costs a third of the pixels.
    """
    document = pdfium.PdfDocument(pdf)
    images: list[bytes] = []
    try:
        for index in range(len(document)):
            page = document[index]
            try:
                page_width, page_height = page.get_width(), page.get_height()
                keep = min(page_height, _content_bottom(page) + _IMAGE_MARGIN_PT)
                bitmap = page.render(
                    scale=width / page_width,
                    crop=(0, page_height - keep, 0, 0),
                    may_draw_forms=False,
                    rev_byteorder=True,
                )
                image = bitmap.to_pil()
            finally:
                page.close()
            buffer = io.BytesIO()
            (image if image.mode == "RGB" else image.convert("RGB")).save(
                buffer, format="PNG", compress_level=_PNG_COMPRESS_LEVEL
            )
            images.append(buffer.getvalue())
    finally:
        document.close()
    return images


_PROBE_SCALE = 0.5


def _content_bottom(page: pdfium.PdfPage) -> float:
    """How far down the page (in PDF points) something differs from the page's background."""
    probe = page.render(scale=_PROBE_SCALE, may_draw_forms=False, rev_byteorder=True).to_pil().convert("RGB")
    background = probe.getpixel((0, probe.height - 1))
    box = ImageChops.difference(probe, Image.new("RGB", probe.size, background)).getbbox()
    if box is None:
        return float(page.get_height())
    return (box[3] + 1) / _PROBE_SCALE  # one probe pixel of slack: 2 points
