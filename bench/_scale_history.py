"""Turn latency on a thread that already holds 10, 1,000 or 10,000 messages, per store, side by side.

A turn (a user message -> a text reply, ``ScriptedModel``) begins by reading the thread's history
window (the agent's ``history_limit``, 200): it must cost the same however long the thread is.
Each size gets threads of its own, seeded with that many messages (written in batches through
the store), and each thread takes few enough measured turns that it grows by at most a tenth;
every thread takes one turn first, unmeasured (a process's first turn on a thread). Printed:
p50 and p99 ms per store and size, and each size's p50 as a multiple of the 10-message one's
(the target: Redis at 1,000 and 10,000 within 1.2x).

Stores: ``memory``; ``redis`` (a key prefix of its own on ``REDIS_URL``, removed after);
``sqlite`` (a file in a temporary folder); ``postgres`` (a database the bench creates on
``POSTGRES_URL`` and drops after).

    python bench/_scale_history.py [--stores memory,redis,sqlite,postgres] [--sizes 10,1000,10000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _keys import drop_prefix  # type: ignore[import-not-found]  # noqa: E402

from gateway import Runtime, Turn  # noqa: E402
from gateway.models import AssistantMessage, ModelRequest, ScriptedModel, ScriptStep, UserMessage  # noqa: E402
from gateway.stores import Batch, MemoryStore  # noqa: E402
from tools import Actor  # noqa: E402

__all__ = ["history_section"]

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
KINDS = ("memory", "redis", "sqlite", "postgres")
TARGET = 1.2
"""A long thread's p50 as a multiple of the 10-message one's, at most (Redis)."""

ACTOR = Actor(id="bench-history", roles=["member"])
REPLY = ScriptStep(text="It is 21 °C in Lisbon, and the sea is calm this afternoon.")
_SEED_BATCH = 500


def _reply(request: ModelRequest, index: int) -> ScriptStep:
    return REPLY


@asynccontextmanager
async def _store(kind: str) -> AsyncIterator[Any]:
    """A fresh store of ``kind``, removed (its keys, file or database) when done."""
    name = f"bench_history_{uuid.uuid4().hex[:8]}"
    if kind == "memory":
        yield MemoryStore()
        return
    if kind == "redis":
        from gateway.stores import RedisStore

        store = RedisStore(REDIS_URL, prefix=name)
        try:
            yield store
        finally:
            await store.aclose()
            await drop_prefix(REDIS_URL, name)
        return
    if kind == "sqlite":
        from gateway.stores import SqliteStore

        folder = Path(tempfile.mkdtemp(prefix="agora-bench-"))
        sqlite = SqliteStore(folder / f"{name}.db")
        try:
            yield sqlite
        finally:
            await sqlite.aclose()
            shutil.rmtree(folder, ignore_errors=True)
        return
    import asyncpg

    from gateway.stores import PostgresStore

    admin = await asyncpg.connect(POSTGRES_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        base, _, _ = POSTGRES_URL.rpartition("/")
        postgres = PostgresStore(f"{base}/{name}")
        try:
            yield postgres
        finally:
            await postgres.aclose()
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def _turn(runtime: Runtime, thread_id: str) -> float:
    started = time.perf_counter()
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ACTOR, text="Weather in Lisbon?"))
    status = await runtime.wait(run_id)
    if status != "completed":
        raise RuntimeError(f"turn ended {status}")
    return time.perf_counter() - started


async def _seed(runtime: Runtime, thread_id: str, size: int) -> None:
    """A thread of ``size`` messages: one real turn (it makes the thread), then batches of the rest."""
    await _turn(runtime, thread_id)  # 2 messages
    left = max(0, size - 2)
    while left > 0:
        count = min(_SEED_BATCH, left)
        messages: list[Any] = [
            UserMessage(content=f"Question {index}: what is the weather like in Lisbon today?")
            if index % 2 == 0
            else AssistantMessage(content=f"Answer {index}: {REPLY.text}")
            for index in range(count)
        ]
        await runtime.store.write(thread_id, Batch(messages=messages))
        left -= count


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(kind: str, size: int, samples: int) -> list[float]:
    """Latencies of ``samples`` turns on threads of ``size`` messages (each thread grows by a tenth at most)."""
    per_thread = max(1, size // 40)
    threads = max(1, -(-samples // per_thread))
    latencies: list[float] = []
    async with _store(kind) as store:
        runtime = Runtime(model=ScriptedModel(_reply), store=store)
        try:
            ids = [f"h-{size}-{index}-{uuid.uuid4().hex[:6]}" for index in range(threads)]
            for thread_id in ids:
                await _seed(runtime, thread_id, size)
                await _turn(runtime, thread_id)  # a process's first turn on the thread: unmeasured
            gc.collect()
            for thread_id in ids:
                for _ in range(per_thread):
                    if len(latencies) < samples:
                        latencies.append(await _turn(runtime, thread_id))
        finally:
            await runtime.aclose()
    return latencies


async def history_section(kinds: list[str], sizes: list[int], quick: bool) -> None:
    """Print turn latency (p50/p99 ms) per store kind and thread size, and each p50 beside the smallest size's."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise ValueError(f"store kinds are {', '.join(KINDS)}, not {', '.join(unknown)}")
    samples = 60 if quick else 200
    sizes = sorted(sizes)
    print(f"turn latency by thread length ({samples} turns per cell; history window 200 messages)")
    figures: dict[tuple[str, int], tuple[float, float]] = {}
    for kind in kinds:
        for size in sizes:
            latencies = await _measure(kind, size, samples)
            figures[(kind, size)] = (_pct(latencies, 0.5), _pct(latencies, 0.99))
    head = f"{'messages':>9}" + "".join(f"  {kind + ' p50/p99 ms (x ' + str(sizes[0]) + ')':>34}" for kind in kinds)
    print(head)
    for size in sizes:
        cells = []
        for kind in kinds:
            p50, p99 = figures[(kind, size)]
            ratio = p50 / figures[(kind, sizes[0])][0]
            cells.append(f"  {p50 * 1e3:>14.2f} / {p99 * 1e3:>7.2f} ({ratio:>5.2f}x)")
        print(f"{size:>9,}" + "".join(cells))
    if "redis" in kinds and len(sizes) > 1:
        base = figures[("redis", sizes[0])][0]
        for size in sizes[1:]:
            ratio = figures[("redis", size)][0] / base
            verdict = "met" if ratio <= TARGET else "MISSED"
            print(
                f"redis at {size:,} messages: p50 {ratio:.2f}x the {sizes[0]}-message thread's"
                f" (target <= {TARGET}x: {verdict})"
            )


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", default="memory,redis,sqlite,postgres")
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    kinds = [kind.strip() for kind in args.stores.split(",") if kind.strip()]
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    asyncio.run(history_section(kinds, sizes, args.quick))


if __name__ == "__main__":
    _main()
