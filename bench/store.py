"""Store micro-benchmark: MemoryStore and RedisStore side by side.

    python bench/store.py [--redis redis://127.0.0.1:6379/0] [--quick]

Figures: ``write`` of a typical step batch (3 events + 1 journal entry + the run record) per second,
sequentially and from 50 threads at once; ``read_events`` of 1,000 events; live-tail fan-out
latency (write -> each of 100 subscribers receives) p50/p99; the runtime's turn rate (user message
-> one read tool -> text reply), sequentially and 20 at once; and this process's CPU time per turn,
steadier than rates on a shared machine (Redis's own CPU is not counted). The Redis store uses a
throwaway key prefix that it deletes afterwards (never FLUSHDB: the server may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _keys import drop_prefix  # type: ignore[import-not-found]  # noqa: E402
from pydantic import BaseModel  # noqa: E402

from gateway import Runtime, Turn  # noqa: E402
from gateway.events import RunStartedEvent, TextDeltaEvent, ToolCompletedEvent, ToolStartedEvent  # noqa: E402
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest  # noqa: E402
from gateway.stores import Batch, MemoryStore, RedisStore, RunRecord, Store, ThreadRecord, ToolSettledEntry  # noqa: E402
from tools import Actor, ToolContext, define_tool  # noqa: E402


class CityInput(BaseModel):
    city: str


@define_tool(name="get_weather", description="Weather", input=CityInput)
async def get_weather(input: CityInput, ctx: ToolContext) -> dict[str, Any]:
    return {"city": input.city, "temp": 21, "sky": "clear"}


async def new_thread(store: Store) -> RunRecord:
    thread_id = f"b-{uuid.uuid4().hex[:10]}"
    turn = Turn(thread_id=thread_id, actor=Actor(id="u1"), text="What is the weather in Lisbon?")
    run = RunRecord(run_id=f"run_{uuid.uuid4().hex}", thread_id=thread_id, agent="default", turn=turn)
    batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    await store.begin_run(
        run, thread=ThreadRecord(thread_id=thread_id, owner_id="u1"), batch=batch, lease_owner="bench", lease_ttl=60
    )
    stored = await store.get_run(run.run_id)
    assert stored is not None
    return stored


def step_batch(run: RunRecord, n: int) -> Batch:
    """What one tool step writes: started, completed, a text delta, and the journal entry."""
    ids = dict(thread_id=run.thread_id, run_id=run.run_id)
    call = f"tc_{n}"
    return Batch(
        run=run,
        events=[
            ToolStartedEvent(**ids, tool_call_id=call, tool="get_weather", kind="read",
                             input={"city": "Lisbon"}, label="Weather", running="Checking Lisbon"),
            ToolCompletedEvent(**ids, tool_call_id=call, tool="get_weather",
                               output={"city": "Lisbon", "temp": 21, "sky": "clear"}, done="Checked Lisbon"),
            TextDeltaEvent(**ids, message_id="m1", delta="It is sunny in Lisbon. "),
        ],
        journal=[ToolSettledEntry(tool_call_id=call, name="get_weather", status="completed",
                                  output={"city": "Lisbon", "temp": 21, "sky": "clear"})],
    )  # fmt: skip


async def rate(count: int, body: Callable[[int], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await body(count)
    return count / (time.perf_counter() - started)


async def bench_writes(store: Store, count: int) -> tuple[float, float]:
    run = await new_thread(store)

    async def sequential(n: int) -> None:
        for i in range(n):
            await store.write(run.thread_id, step_batch(run, i))

    runs = [await new_thread(store) for _ in range(50)]

    async def concurrent(n: int) -> None:
        async def one(r: RunRecord) -> None:
            for i in range(n // 50):
                await store.write(r.thread_id, step_batch(r, i))

        await asyncio.gather(*(one(r) for r in runs))

    return await rate(count, sequential), await rate(count, concurrent)


async def bench_read(store: Store, repeats: int) -> float:
    run = await new_thread(store)
    for i in range(333):
        await store.write(run.thread_id, step_batch(run, i))
    assert len(await store.read_events(run.thread_id, 0, limit=1000)) == 1000
    started = time.perf_counter()
    for _ in range(repeats):
        await store.read_events(run.thread_id, 0, limit=1000)
    return (time.perf_counter() - started) / repeats * 1000


async def bench_fanout(store: Store, subscribers: int, writes: int) -> tuple[float, float]:
    run = await new_thread(store)
    latencies: list[float] = []
    sent: dict[int, float] = {}
    received: dict[int, int] = {}
    all_in = asyncio.Event()

    async def follow(ready: asyncio.Event) -> None:
        async for event in store.subscribe(run.thread_id, after_seq=1):
            if not ready.is_set():
                ready.set()
            latencies.append(time.perf_counter() - sent[event.seq])
            received[event.seq] = received.get(event.seq, 0) + 1
            if received[event.seq] == subscribers:
                all_in.set()
            if event.seq == writes + 2:
                return

    readies = [asyncio.Event() for _ in range(subscribers)]
    tasks = [asyncio.create_task(follow(ready)) for ready in readies]
    sent[2] = time.perf_counter()
    await store.write(run.thread_id, Batch(events=[TextDeltaEvent(thread_id=run.thread_id, run_id=run.run_id,
                                                                  message_id="m", delta="warm-up")]))  # fmt: skip
    async with asyncio.timeout(30):
        for ready in readies:
            await ready.wait()
        latencies.clear()
        for n in range(writes):
            all_in.clear()
            sent[3 + n] = time.perf_counter()
            await store.write(run.thread_id, Batch(events=[TextDeltaEvent(thread_id=run.thread_id,
                                                       run_id=run.run_id, message_id="m", delta=str(n))]))  # fmt: skip
            await all_in.wait()
        await asyncio.gather(*tasks)
    quantiles = statistics.quantiles(latencies, n=100)
    return quantiles[49] * 1000, quantiles[98] * 1000


async def bench_turns(store: Store, count: int, concurrency: int) -> float:
    def script(request: Any, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})])
        return ScriptStep(text="It is sunny in Lisbon.")

    runtime = Runtime(tools=[get_weather], model=ScriptedModel(script), store=store)

    async def turns(n: int) -> None:
        async def one(i: int) -> None:
            thread_id = f"turn-{uuid.uuid4().hex[:10]}"
            run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Weather?"))
            assert await runtime.wait(run_id) == "completed"

        for start in range(0, n, concurrency):
            await asyncio.gather(*(one(i) for i in range(start, min(n, start + concurrency))))

    try:
        return await rate(count, turns)
    finally:
        await runtime.aclose()


LOWER_IS_BETTER = ("(ms)",)


async def measure(store: Store, quick: bool) -> dict[str, float]:
    scale = 4 if quick else 1
    seq_writes, conc_writes = await bench_writes(store, 4000 // scale)
    read_ms = await bench_read(store, 40 // scale)
    p50, p99 = await bench_fanout(store, 100, 200 // scale)
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    turns_seq = await bench_turns(store, 600 // scale, 1)
    after = resource.getrusage(resource.RUSAGE_SELF)
    turn_cpu = (after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime) / (600 // scale) * 1000
    turns_conc = await bench_turns(store, 1000 // scale, 20)
    return {
        "write step batch, sequential (/s)": seq_writes,
        "write step batch, 50 threads (/s)": conc_writes,
        "read_events 1,000 events (ms)": read_ms,
        "fan-out to 100 subscribers p50 (ms)": p50,
        "fan-out to 100 subscribers p99 (ms)": p99,
        "turns, sequential (/s)": turns_seq,
        "turns, 20 at once (/s)": turns_conc,
        "CPU of this process per turn (ms)": turn_cpu,
    }


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's best round: the machine may be shared, and noise only ever slows things down."""
    pick = {name: (min if name.endswith(LOWER_IS_BETTER) else max) for name in rounds[0]}
    return {name: pick[name](r[name] for r in rounds) for name in rounds[0]}


def show(value: float, name: str) -> str:
    return f"{value:.2f}" if name.endswith(LOWER_IS_BETTER) else f"{value:,.0f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--quick", action="store_true", help="a quarter of the work")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best of each figure is shown")
    options = parser.parse_args()

    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    memory, store = MemoryStore(), RedisStore(options.redis, prefix=prefix)
    rounds: dict[str, list[dict[str, float]]] = {"MemoryStore": [], "RedisStore": []}
    try:
        await store.ping()
        for _ in range(options.rounds):  # interleaved, so both see the same machine
            rounds["MemoryStore"].append(await measure(memory, options.quick))
            rounds["RedisStore"].append(await measure(store, options.quick))
    finally:
        await memory.aclose()
        await store.aclose()
        await drop_prefix(options.redis, prefix)

    figures = {name: best(results) for name, results in rounds.items()}
    width = max(len(name) for name in figures["MemoryStore"])
    print(f"{'':{width}}  {'MemoryStore':>12}  {'RedisStore':>12}  {'Redis/Memory':>12}")
    for name, value in figures["MemoryStore"].items():
        other = figures["RedisStore"][name]
        print(f"{name:{width}}  {show(value, name):>12}  {show(other, name):>12}  {other / value:>12.2f}")
    print(f"(best of {options.rounds} interleaved rounds; Redis at {options.redis})")


if __name__ == "__main__":
    asyncio.run(main())
