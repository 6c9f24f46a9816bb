"""``Rendered``: what a render produces, and the format names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MIME_TYPES", "RENDER_FORMATS", "RenderFormat", "Rendered"]

RenderFormat = Literal["html", "png", "pdf", "text"]
"""What ``Renderer.render`` produces: an HTML fragment, PNG images, a PDF document, or text."""

RENDER_FORMATS: tuple[RenderFormat, ...] = ("html", "png", "pdf", "text")

MIME_TYPES: dict[RenderFormat, str] = {
    "html": "text/html",
    "png": "image/png",
    "pdf": "application/pdf",
    "text": "text/plain",
}


@dataclass(frozen=True)
class Rendered:
    """One component in one format.

    ``Rendered(data, mime, pages)``:

    - ``html``: ``data`` is the fragment (``str``), ``pages`` is empty;
    - ``text``: ``data`` is the text (``str``), ``pages`` is empty;
    - ``png``: ``data`` is the first page's PNG, ``pages`` every page's PNG, in order;
    - ``pdf``: ``data`` is the PDF, ``pages`` holds that one document.

    So a channel sends ``pages`` as media files, whatever the format.
    """

    data: str | bytes
    """The fragment or text (``str``), or the first PNG page or the PDF (``bytes``)."""
    mime: str
    """``text/html``, ``text/plain``, ``image/png`` or ``application/pdf``."""
    pages: tuple[bytes, ...] = ()
    """The media files to deliver: each PNG page, or the one PDF; empty for html and text."""
    page_count: int = 1
    """Pages laid out: PNG images or PDF pages; 1 for html and text."""

    @property
    def size(self) -> int:
        """Bytes held (an estimate for text), for cache accounting."""
        if self.pages:
            return sum(len(page) for page in self.pages)
        return len(self.data)
