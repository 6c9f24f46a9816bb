"""The Renderer's machinery: cache, shared renders, time limits, crashes, event-loop lag."""

import asyncio
import gc
import logging
import signal
import statistics
import time
from typing import Any

import pypdfium2 as pdfium
import pytest
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from renderers_support import SAMPLES, png_image

from renderers import (
    DELIVERY_FORMATS,
    MemoryRenderCache,
    PropsInvalidError,
    RedisRenderCache,
    Rendered,
    Renderer,
    RenderFailedError,
    RenderPool,
    RenderTimeoutError,
    TieredRenderCache,
    UnknownComponentError,
    negotiate,
)
from renderers._worker import WorkerInfo
from tools import UiCapabilities, UiComponent, UserError

pytestmark = pytest.mark.asyncio(loop_scope="session")

CARD = {"tone": "info", "title": "Heads up", "text": "Deploy at noon."}


class ProbeCache(MemoryRenderCache):
    """Sets ``looked_up`` once ``expected`` lookups happened (a render looks up before it joins a flight)."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected
        self.lookups = 0
        self.looked_up = asyncio.Event()

    async def get(self, key: str) -> Rendered | None:
        self.lookups += 1
        if self.lookups >= self.expected:
            self.looked_up.set()
        return await super().get(key)


async def test_a_repeated_render_is_a_cache_hit_under_a_millisecond(renderer: Renderer) -> None:
    first = await renderer.render("Callout", CARD, "png")
    second = await renderer.render("Callout", dict(reversed(list(CARD.items()))), "png")
    assert second is first
    assert renderer.stats.hits == 1 and renderer.stats.produced["png"] == 1
    timings = []
    for _ in range(200):
        started = time.perf_counter()
        await renderer.render("Callout", CARD, "png")
        timings.append(time.perf_counter() - started)
    assert statistics.median(timings) < 0.001, statistics.median(timings)


async def test_camel_and_snake_case_props_share_a_cache_entry(renderer: Renderer) -> None:
    props = SAMPLES["Chart"]
    snake = {("x_key" if k == "xKey" else k): v for k, v in props.items()}
    assert await renderer.render("Chart", props, "html") is await renderer.render("Chart", snake, "html")


async def test_formats_and_versions_do_not_share_entries(renderer: Renderer) -> None:
    html = await renderer.render("Callout", CARD, "html")
    text = await renderer.render("Callout", CARD, "text")
    assert html.mime == "text/html" and text.mime == "text/plain" and renderer.stats.hits == 0


async def test_concurrent_renders_of_one_key_share_one_render(shared_pool: RenderPool) -> None:
    async with Renderer(pool=shared_pool) as renderer:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(renderer.render("KpiCards", SAMPLES["KpiCards"], "png")) for _ in range(10)]
        results = [task.result() for task in tasks]
        assert all(result is results[0] for result in results)
        assert renderer.stats.produced["png"] == 1
        assert renderer.stats.shared == 9 and renderer.stats.misses == 10
        assert renderer.in_flight == 0


async def test_a_caller_that_leaves_does_not_stop_the_shared_render(shared_pool: RenderPool) -> None:
    probe = ProbeCache(expected=1)
    async with Renderer(pool=shared_pool, cache=probe) as renderer:
        leaving = asyncio.create_task(renderer.render("Timeline", SAMPLES["Timeline"], "png"))
        await asyncio.wait_for(probe.looked_up.wait(), 10)
        assert renderer.in_flight == 1
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        staying = await asyncio.wait_for(renderer.render("Timeline", SAMPLES["Timeline"], "png"), 30)
        assert png_image(staying.data).width == 1080  # type: ignore[arg-type]
        assert renderer.stats.produced["png"] == 1
        assert renderer.stats.shared + renderer.stats.hits == 1  # joined the flight, or found it cached


async def test_event_loop_lag_stays_under_50ms_during_50_png_renders(shared_pool: RenderPool) -> None:
    """A ticker wakes every 5 ms; its lateness is the loop's lag.

    The machine running the tests may be shared (other suites, other agents): a late wake-up
    can mean the OS gave the core to someone else rather than that our loop was busy. So each
    lag also records the CPU time this thread spent meanwhile: lag caused by work on the loop
    costs CPU, waiting for a core does not. The strict bound applies to the former; wall-clock
    lag is asserted at the 95th percentile.

    The objects earlier tests left behind are frozen first, as ``serve`` freezes what start-up
    made (``tune_gc``): a full collection over a thousand tests' leftovers (seen: 175 ms) is
    not the renderer's doing.
    """
    gc.collect()
    gc.freeze()
    try:
        await _measure_lag(shared_pool)
    finally:
        gc.unfreeze()


async def _measure_lag(shared_pool: RenderPool) -> None:
    loop = asyncio.get_running_loop()
    wall: list[float] = []
    busy: list[float] = []
    done = asyncio.Event()

    async def tick() -> None:
        while not done.is_set():
            started, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(0.005)  # a clock, not synchronisation: lag = how late it wakes
            late = max(0.0, loop.time() - started - 0.005)
            wall.append(late)
            busy.append(min(late, time.thread_time() - cpu))

    async def render_all() -> list[Rendered]:
        try:
            return await asyncio.gather(
                *(renderer.render("Callout", {**CARD, "title": f"Card {i}"}, "png") for i in range(50))
            )
        finally:
            done.set()

    async with Renderer(pool=shared_pool) as renderer:
        async with asyncio.TaskGroup() as group:
            group.create_task(tick())
            rendered = group.create_task(render_all())
    assert len({r.data for r in rendered.result()}) == 50
    assert renderer.stats.produced["png"] == 50
    assert len(wall) > 20
    wall.sort()
    report = f"wall lag p50 {wall[len(wall) // 2] * 1e3:.1f} ms, p95 {wall[int(len(wall) * 0.95)] * 1e3:.1f} ms, "
    report += f"max {wall[-1] * 1e3:.1f} ms; max lag spent working on the loop {max(busy) * 1e3:.1f} ms"
    print(report)
    assert max(busy) < 0.05, report
    assert wall[int(len(wall) * 0.95)] < 0.05, report


async def test_time_limit_and_crash_leave_a_working_pool() -> None:
    rows = [{f"c{j}": f"value {i}-{j}" for j in range(8)} for i in range(500)]
    heavy = {"columns": [{"key": f"c{j}", "label": f"Column {j}"} for j in range(8)], "rows": rows}
    async with RenderPool(1, initializer=_init_worker()) as pool:
        async with Renderer(pool=pool, timeout=0.05, timeout_per_kb=0, cache=None) as hasty:
            with pytest.raises(RenderTimeoutError) as raised:
                await hasty.render("DataTable", heavy, "pdf")
        assert raised.value.component == "DataTable" and raised.value.timeout == 0.05
        assert raised.value.code == "render_timeout"
        async with Renderer(pool=pool, timeout=60) as patient:
            first = await patient.render("Callout", CARD, "png")
            assert png_image(first.data).width == 1080  # type: ignore[arg-type]
            with pytest.raises(RenderFailedError, match="died during the call"):
                await pool.run(signal.raise_signal, signal.SIGKILL)
            again = await patient.render("Callout", {**CARD, "title": "After the crash"}, "png")
            assert png_image(again.data).width == 1080  # type: ignore[arg-type]
        assert pool.workers_started == 3  # the first, one after the time limit, one after the crash


async def test_the_time_budget_grows_with_the_props_and_is_bounded() -> None:
    renderer = Renderer(timeout=10, timeout_per_kb=0.1)
    assert renderer.budget(0) == 10
    assert renderer.budget(200 * 1024) == pytest.approx(30)
    assert renderer.budget(10_000 * 1024) == 60  # at most six times the base: a hung render still ends


@pytest.mark.slow
async def test_a_table_at_the_props_limits_renders_as_a_document_in_its_default_budget(
    shared_pool: RenderPool,
) -> None:
    columns = [
        {"key": f"c{j}", "label": f"Column {j}", "format": "currency" if j % 3 == 0 else "text"} for j in range(12)
    ]
    rows = [{f"c{j}": i * 1.5 if j % 3 == 0 else f"value {i}-{j} lorem ipsum" for j in range(12)} for i in range(500)]
    async with Renderer(pool=shared_pool, cache=None) as renderer:  # the default timeout and budget
        pdf = await renderer.render("DataTable", {"title": "Everything", "columns": columns, "rows": rows}, "pdf")
    assert pdf.page_count > 20
    document = pdfium.PdfDocument(pdf.data)
    last = document[len(document) - 1].get_textpage().get_text_range()
    assert "value 499-11 lorem ipsum" in last.replace("\r\n", " ").replace("\n", " ")


def _init_worker() -> Any:
    from renderers import _worker

    return _worker.init_worker


async def test_workers_report_harfbuzz_subset(shared_pool: RenderPool) -> None:
    async with Renderer(pool=shared_pool) as renderer:
        await renderer.render("Callout", {**CARD, "title": "warm"}, "pdf")
    infos = list(shared_pool.worker_info().values())
    assert infos and all(isinstance(info, WorkerInfo) and info.harfbuzz_subset for info in infos)


async def test_a_missing_harfbuzz_subset_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    async with Renderer() as renderer:
        slow = WorkerInfo(pid=1, harfbuzz_subset=False, weasyprint_version="70.0")
        with caplog.at_level(logging.WARNING, logger="renderers"):
            renderer.pool._on_ready(slow)  # type: ignore[misc]
            renderer.pool._on_ready(slow)  # type: ignore[misc]
    warnings = [r for r in caplog.records if "libharfbuzz-subset0" in r.getMessage()]
    assert len(warnings) == 1


async def test_misuse_and_bad_input_are_clear_errors() -> None:
    renderer = Renderer(max_props_bytes=200)
    with pytest.raises(UserError, match="fmt must be one of"):
        await renderer.render("Callout", CARD, "gif")  # type: ignore[arg-type]
    with pytest.raises(UnknownComponentError):
        await renderer.render("Nope", {}, "png")
    with pytest.raises(PropsInvalidError, match="more than the limit of 200"):
        await renderer.render("Callout", {"text": "x" * 500}, "html")
    await renderer.aclose()
    await renderer.aclose()
    with pytest.raises(RuntimeError, match="closed Renderer"):
        await renderer.render("Callout", CARD, "html")


async def test_a_negotiated_delivery_renders_through_render(renderer: Renderer) -> None:
    # One path: negotiate decides, render draws (DELIVERY_FORMATS names its format); no second
    # reader of ui events on the renderer.
    assert not hasattr(renderer, "render_ui")
    ui = UiComponent(component="Callout", props=CARD, fallback_text="Deploy at noon")
    assert negotiate(ui, UiCapabilities(formats=["image"]), renderer.catalog) == "image"
    cases = {"text": ("text/plain", "Deploy at noon"), "image": ("image/png", None), "html": ("text/html", None)}
    for delivery, (mime, data) in cases.items():
        fmt = DELIVERY_FORMATS[delivery]
        assert fmt is not None
        rendered = await renderer.render(
            ui.component, ui.props, fmt, version=ui.version, fallback_text=ui.fallback_text
        )
        assert rendered.mime.startswith(mime)
        if data is not None:
            assert rendered.data == data
    assert DELIVERY_FORMATS["props"] is None  # the client draws those itself


@pytest.mark.redis
async def test_renders_are_shared_between_processes_through_redis(
    shared_pool: RenderPool, redis_client: Redis, redis_prefix: str
) -> None:
    def tiered() -> TieredRenderCache:
        return TieredRenderCache(MemoryRenderCache(), RedisRenderCache(redis_client, prefix=redis_prefix, ttl=60))

    async with Renderer(pool=shared_pool, cache=tiered()) as first:
        made = await first.render("Checklist", SAMPLES["Checklist"], "png")
        text = await first.render("Checklist", SAMPLES["Checklist"], "text")
    async with Renderer(pool=shared_pool, cache=tiered()) as second:
        found = await second.render("Checklist", SAMPLES["Checklist"], "png")
        found_text = await second.render("Checklist", SAMPLES["Checklist"], "text")
        again = await second.render("Checklist", SAMPLES["Checklist"], "png")
    assert found == made and found_text == text and again is found
    assert second.stats.produced == {"html": 0, "png": 0, "pdf": 0, "text": 0} and second.stats.hits == 3
    ttls = [await redis_client.pttl(key) async for key in redis_client.scan_iter(match=redis_prefix + "*", count=1000)]
    assert len(ttls) == 2 and all(0 < ttl <= 60_000 for ttl in ttls)


@pytest.mark.redis
async def test_redis_cache_misbehaving_is_a_miss_not_a_failure(redis_prefix: str) -> None:
    dead = Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    cache = RedisRenderCache(dead, prefix=redis_prefix)
    assert await cache.get("k") is None
    await cache.set("k", Rendered("x", "text/plain"))
    await dead.aclose()
    with pytest.raises(UserError, match="decode_responses=False"):
        RedisRenderCache(Redis(decode_responses=True))


async def test_layouts_past_the_page_limit_are_refused(shared_pool: RenderPool) -> None:
    rows = [{"n": f"entry {i}"} for i in range(120)]
    props = {"columns": [{"key": "n", "label": "Entry"}], "rows": rows}
    async with Renderer(pool=shared_pool, max_pages=1, timeout=120) as renderer:
        with pytest.raises(RenderFailedError, match=r"pages, more than the limit of 1") as raised:
            await renderer.render("DataTable", props, "pdf")
    assert raised.value.component == "DataTable"
