"""Turns per second through the agent loop, and the latency a turn adds over the model call.

Scenario (the one the peers were measured on): a user message -> one read tool call -> a text
reply, with a ScriptedModel; then the same with one ui component pushed by the tool. Every turn
writes its events, journal and history to the store and fills the tool's narration.

    python bench/loop.py [--turns 3000] [--concurrency 50] [--redis redis://127.0.0.1:6379/0]
                         [--gc default|tuned|both] [--loop asyncio|uvloop]

``--loop uvloop`` runs on the loop ``agora-gateway serve`` picks when uvloop is installed.

Peers, measured on this machine for the same scenario in-process: the OpenAI Agents SDK 289 runs/s
(3.2 ms p50), pydantic-ai 214 runs/s (4.4 ms), plain Python with pydantic validation 127k runs/s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from gateway import Runtime, Turn  # noqa: E402
from gateway.cli import tune_gc  # noqa: E402
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest  # noqa: E402
from gateway.stores import MemoryStore  # noqa: E402
from tools import Actor, ToolPresentation, define_tool  # noqa: E402

ACTOR = Actor(id="bench", roles=["member"])


class CityInput(BaseModel):
    city: str


def make_tools(with_ui: bool) -> list[Any]:
    @define_tool(
        name="get_weather",
        description="Current weather for a city.",
        input=CityInput,
        presentation=ToolPresentation(label="Weather", running="Checking {city}", done="Checked {city}"),
    )
    async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
        if with_ui:
            ctx.emit_ui("KpiCards", {"items": [{"label": input.city, "value": 21, "unit": "°C"}]})
        return {"city": input.city, "temp": 21}

    return [get_weather]


TOOL_STEP = ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})])
TEXT_STEP = ScriptStep(text="It is 21 °C in Lisbon.")


def script(request: ModelRequest, index: int) -> ScriptStep:
    return TOOL_STEP if request.step == 0 else TEXT_STEP


async def bare_model_call(model: ScriptedModel, request: ModelRequest) -> None:
    async for _ in model.stream(request):
        pass


async def measure_bare(n: int = 20_000) -> float:
    model = ScriptedModel(script)
    request = ModelRequest(agent="a", instructions="", messages=[], step=0)
    started = time.perf_counter()
    for _ in range(n):
        request.step = _ % 2
        await bare_model_call(model, request)
    return (time.perf_counter() - started) / n * 2  # two model calls per turn


async def one_turn(runtime: Runtime) -> float:
    started = time.perf_counter()
    run_id = await runtime.start_turn(Turn(thread_id=f"b-{uuid.uuid4().hex}", actor=ACTOR, text="Weather in Lisbon?"))
    status = await runtime.wait(run_id)
    if status != "completed":
        raise RuntimeError(f"turn ended {status}")
    return time.perf_counter() - started


async def run_case(store: Any, *, with_ui: bool, turns: int, concurrency: int) -> tuple[float, list[float], float]:
    runtime = Runtime(tools=make_tools(with_ui), model=ScriptedModel(script), store=store)
    try:
        for _ in range(min(200, turns)):  # warm up
            await one_turn(runtime)
        gc.collect()
        latencies: list[float] = []
        cpu_started = time.process_time()
        started = time.perf_counter()
        if concurrency == 1:
            for _ in range(turns):
                latencies.append(await one_turn(runtime))
        else:
            remaining = turns

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    latencies.append(await one_turn(runtime))

            async with asyncio.TaskGroup() as group:
                for _ in range(concurrency):
                    group.create_task(worker())
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        return len(latencies) / elapsed, latencies, cpu / len(latencies)
    finally:
        await runtime.aclose()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def drop_keys(url: str, prefix: str) -> None:
    import redis.asyncio as redis

    client = redis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()


def set_gc(mode: str) -> None:
    gc.unfreeze()
    gc.collect()
    if mode == "tuned":
        tune_gc()
    else:
        gc.set_threshold(700, 10, 10)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--gc", choices=["default", "tuned", "both"], default="both")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio", help="the event loop")
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    print(f"event loop: {args.loop}")

    bare = await measure_bare()
    print(f"bare model calls per turn (2 ScriptedModel streams): {bare * 1e6:.1f} µs")
    print("gc: 'default' is CPython's (700, 10, 10); 'tuned' is what `agora-gateway serve` sets (gateway.cli.tune_gc)")
    print(
        f"{'store':<7} {'gc':<8} {'scenario':<10} {'clients':>7} {'turns/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'added p50 ms':>13} {'added p99 ms':>13} {'CPU µs/turn':>12}"
    )
    prefixes: list[str] = []
    stores: list[tuple[str, Any]] = [("memory", MemoryStore)]
    if not args.no_redis:
        from gateway.stores import RedisStore

        def redis_store() -> Any:
            prefixes.append(f"bench-{uuid.uuid4().hex[:8]}")
            return RedisStore(args.redis, prefix=prefixes[-1])

        stores.append(("redis", redis_store))
    results: dict[tuple[str, str, str, int], float] = {}
    modes = ["default", "tuned"] if args.gc == "both" else [args.gc]
    try:
        for store_name, factory in stores:
            for mode in modes:
                set_gc(mode)
                for scenario, with_ui in (("tool+text", False), ("tool+ui", True)):
                    for clients in (1, args.concurrency):
                        store = factory()
                        rate, latencies, cpu = await run_case(
                            store, with_ui=with_ui, turns=args.turns, concurrency=clients
                        )
                        await store.aclose()
                        results[(store_name, mode, scenario, clients)] = rate
                        p50, p99 = pct(latencies, 0.5), pct(latencies, 0.99)
                        print(
                            f"{store_name:<7} {mode:<8} {scenario:<10} {clients:>7} {rate:>9.0f} {p50 * 1e3:>8.2f}"
                            f" {p99 * 1e3:>8.2f} {(p50 - bare) * 1e3:>13.2f} {(p99 - bare) * 1e3:>13.2f}"
                            f" {cpu * 1e6:>12.0f}"
                        )
    finally:
        set_gc("default")
        for prefix in prefixes:
            await drop_keys(args.redis, prefix)
    print()
    for mode in modes:
        mem = results[("memory", mode, "tool+text", 1)]
        print(f"[gc {mode}] memory, sequential: {mem:,.0f} turns/s (target >= 2,900: 10x the OpenAI Agents SDK's 289)")
        if ("redis", mode, "tool+text", 1) in results:
            for clients in (1, args.concurrency):
                red, mem_c = (
                    results[("redis", mode, "tool+text", clients)],
                    results[("memory", mode, "tool+text", clients)],
                )
                print(
                    f"[gc {mode}] redis, {clients} client(s): {red:,.0f} turns/s = {red / mem_c:.0%} of memory's"
                    f" {mem_c:,.0f} (target >= 50%)"
                )


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.loop == "uvloop":
        import uvloop

        uvloop.run(main(arguments))
    else:
        asyncio.run(main(arguments))
