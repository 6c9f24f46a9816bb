"""What render workers run. Light to import: the engine (weasyprint) loads in ``init_worker``.

The parent pickles references to these functions and sends them to a worker of the
``RenderPool``; each worker process holds one ``Engine`` for its whole life.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["PdfOutput", "PngOutput", "WorkerInfo", "init_worker", "render_pdf", "render_png", "worker_rss"]

_engine: Engine | None = None


@dataclass(frozen=True, kw_only=True)
class WorkerInfo:
    """What a render worker reports once it is ready."""

    pid: int
    harfbuzz_subset: bool
    """False: weasyprint falls back to a slow font subsetter (install ``libharfbuzz-subset0``)."""
    weasyprint_version: str


@dataclass(frozen=True, kw_only=True)
class PdfOutput:
    """A PDF render."""

    pdf: bytes
    pages: int
    warnings: list[str]


@dataclass(frozen=True, kw_only=True)
class PngOutput:
    """A PNG render: one image per page."""

    pages: list[bytes]
    warnings: list[str]


def init_worker() -> WorkerInfo:
    """Load weasyprint and build this process's engine (fonts, stylesheet, fetcher)."""
    global _engine
    import weasyprint

    from ._engine import Engine, has_harfbuzz_subset

    _engine = Engine()
    return WorkerInfo(pid=os.getpid(), harfbuzz_subset=has_harfbuzz_subset(), weasyprint_version=weasyprint.__version__)


def _require_engine() -> Engine:
    if _engine is None:
        raise RuntimeError("render worker used before init_worker()")
    return _engine


def render_pdf(html: str, max_pages: int, assets: str | None = None) -> PdfOutput:
    """Lay out ``html`` as a PDF document; ``/assets/...`` URLs read files under ``assets``."""
    pdf, pages, warnings = _require_engine().pdf(html, max_pages=max_pages, assets=assets)
    return PdfOutput(pdf=pdf, pages=pages, warnings=warnings)


def render_png(html: str, width: int, max_pages: int, assets: str | None = None) -> PngOutput:
    """Lay out ``html`` and rasterise each page as a PNG ``width`` pixels wide (``assets`` as for PDF)."""
    pages, warnings = _require_engine().png(html, width=width, max_pages=max_pages, assets=assets)
    return PngOutput(pages=pages, warnings=warnings)


def worker_rss() -> int:
    """The calling process's resident memory in bytes (Linux), for benchmarks and health checks."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
