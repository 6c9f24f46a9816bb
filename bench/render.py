"""Render benchmarks: python bench/render.py [--renders 1000] [--repeat 40]

Prints, side by side, for a one-page KpiCards card:

- jinja2 HTML per render (in-process);
- the bare pipeline written inline (weasyprint ``HTML(...).write_pdf`` with one reused
  ``FontConfiguration``, then pypdfium2 render at 1080 px, then Pillow ``save`` with defaults),
  against the same work through ``Renderer`` on a cache miss (a worker process, IPC included).
  The two are sampled alternately, so both see the same machine load;
- a cache hit;
- renders per second with a pool of 2 workers, and each worker's RSS along the run.

Run it from the repository root with the project importable (installed, or ``PYTHONPATH=.``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from renderers import Renderer, default_catalog
from renderers._html import COMPONENT_STYLESHEET_PATH, HtmlEngine

CARD: dict[str, Any] = {
    "title": "Sales, last 30 days",
    "items": [
        {"label": "Revenue", "value": 128430, "unit": "USD", "delta": 12.4},
        {"label": "Orders", "value": 1204, "delta": 3.1},
        {"label": "Refund rate", "value": "1.8", "unit": "%", "delta": "-0.4 pts"},
        {"label": "Avg. basket", "value": 106.67, "unit": "USD", "delta": -2.5},
    ],
}


def card(index: int) -> dict[str, Any]:
    """The card with a distinct title, so every render is a cache miss."""
    return {**CARD, "title": f"Sales, last 30 days #{index}"}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Bare:
    """The reference pipeline, in this process, library defaults, one reused FontConfiguration."""

    def __init__(self) -> None:
        import pypdfium2
        import weasyprint
        from weasyprint.text.fonts import FontConfiguration

        self.weasyprint, self.pdfium = weasyprint, pypdfium2
        self.fonts = FontConfiguration()
        self.css = weasyprint.CSS(filename=str(COMPONENT_STYLESHEET_PATH), font_config=self.fonts)
        self.engine = HtmlEngine()
        self.definition = default_catalog().get("KpiCards")

    def page(self, index: int) -> str:
        fragment = self.engine.fragment(self.definition, self.definition.validate(card(index)), for_print=True)
        return self.engine.page(fragment, profile="image", title="")

    def pdf(self, page: str) -> bytes:
        pdf: bytes = self.weasyprint.HTML(string=page).write_pdf(stylesheets=[self.css], font_config=self.fonts)
        return pdf

    def png(self, page: str) -> bytes:
        document = self.pdfium.PdfDocument(self.pdf(page))
        first = document[0]
        image = first.render(scale=1080 / first.get_width()).to_pil()
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        first.close()
        document.close()
        return buffer.getvalue()


async def median_of(fn: Callable[[int], Awaitable[object]], repeat: int) -> float:
    samples = []
    for index in range(repeat):
        started = time.perf_counter()
        await fn(index)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def paired(bare: Bare, renderer: Renderer, repeat: int) -> dict[str, float]:
    """Alternate bare and Renderer samples of PDF and PNG; medians in seconds."""
    samples: dict[str, list[float]] = {"bare pdf": [], "miss pdf": [], "bare png": [], "miss png": []}
    for index in range(repeat):
        page = bare.page(index)
        for name, run in (("bare pdf", bare.pdf), ("bare png", bare.png)):
            started = time.perf_counter()
            run(page)
            samples[name].append(time.perf_counter() - started)
        for name, fmt, offset in (("miss pdf", "pdf", 1000), ("miss png", "png", 2000)):
            started = time.perf_counter()
            await renderer.render("KpiCards", card(offset + index), fmt)  # type: ignore[arg-type]
            samples[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in samples.items()}


async def main(renders: int, repeat: int) -> None:
    load = os.getloadavg()
    print(f"renderers bench: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")

    async with Renderer(cache=None) as html_renderer:
        html = await median_of(lambda i: html_renderer.render("KpiCards", card(i), "html"), 500)

    started = time.perf_counter()
    bare = Bare()
    weasyprint_import = time.perf_counter() - started

    async with Renderer(workers=1, cache=None) as single:
        for index in range(5):  # start the worker, warm fonts and caches on both sides
            await single.render("KpiCards", card(-1 - index), "png")
            await single.render("KpiCards", card(-100 - index), "pdf")
            bare.png(bare.page(-1 - index))
        medians = await paired(bare, single, repeat)
        sample = await single.render("KpiCards", card(3000), "png")

    async with Renderer(workers=1) as cached:
        await cached.render("KpiCards", CARD, "png")
        hit = await median_of(lambda i: cached.render("KpiCards", CARD, "png"), 2000)

    async with Renderer(workers=2, cache=None) as pool_renderer:
        await asyncio.gather(*(pool_renderer.render("KpiCards", card(-10 - i), "png") for i in range(4)))
        pids = pool_renderer.pool.worker_pids()
        memory: list[tuple[int, list[float]]] = [(0, [rss_mb(pid) for pid in pids])]
        done = 0
        started = time.perf_counter()
        while done < renders:
            count = min(100, renders - done)
            await asyncio.gather(
                *(pool_renderer.render("KpiCards", card(10_000 + done + i), "png") for i in range(count))
            )
            done += count
            memory.append((done, [rss_mb(pid) for pid in pids]))
        throughput = renders / (time.perf_counter() - started)
        replaced = pool_renderer.pool.worker_pids() != pids

    bare_pdf, bare_png = medians["bare pdf"], medians["bare png"]
    miss_pdf, miss_png = medians["miss pdf"], medians["miss png"]
    rows = [
        ("jinja2 HTML fragment, per render", ms(html), "in-process, cheap", ""),
        ("weasyprint + pypdfium2 import (once per worker)", ms(weasyprint_import), "off the start-up path", ""),
        ("bare pipeline: PDF", ms(bare_pdf), "about 65 ms measured here", ""),
        ("bare pipeline: PNG", ms(bare_png), "about 70 ms measured here", ""),
        (
            "Renderer PDF, cache miss",
            ms(miss_pdf),
            f"<= 1.2x bare ({ms(bare_pdf * 1.2).strip()})",
            f"{miss_pdf / bare_pdf:.2f}x",
        ),
        (
            "Renderer PNG, cache miss",
            ms(miss_png),
            f"<= 1.2x bare ({ms(bare_png * 1.2).strip()})",
            f"{miss_png / bare_png:.2f}x",
        ),
        ("Renderer PNG, cache hit", ms(hit), "< 1 ms", "met" if hit < 0.001 else "MISSED"),
        (f"pool of 2 workers, {renders} PNG misses", f"{throughput:8.1f} /s", "", ""),
    ]
    width = max(len(row[0]) for row in rows)
    print(f"{'measure (median)':<{width}}  {'value':>11}  {'target':<32}  vs bare")
    for name, value, target, note in rows:
        print(f"{name:<{width}}  {value:>11}  {target:<32}  {note}")
    print(f"\nPNG: {len(sample.data) / 1024:.0f} KB, 1080 x {_png_height(sample.data)} px, {sample.page_count} page")
    print("\nworker RSS (MB) after N renders (both workers):")
    shown = {0, 100, renders // 2, renders}
    for count, sizes in memory:
        if count in shown:
            print(f"  {count:>6}: " + "  ".join(f"{size:7.1f}" for size in sizes))
    first, last = memory[1][1], memory[-1][1]
    growth = max(b - a for a, b in zip(first, last, strict=True))
    print(f"  growth from render 100 to {renders}: {growth:+.1f} MB per worker at most (target: flat)")
    if replaced:
        print("  note: a worker was replaced during the run")


def _png_height(data: bytes | str) -> int:
    assert isinstance(data, bytes)
    return int.from_bytes(data[20:24], "big")  # IHDR height


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renders", type=int, default=1000, help="renders for throughput and memory")
    parser.add_argument("--repeat", type=int, default=40, help="samples per latency figure")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.renders, arguments.repeat))
