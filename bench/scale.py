"""Cost as work grows: each figure beside its target, in one run.

    python bench/scale.py [--only history,replay,threads,approvals,renders,sockets] [--quick]
                          [--redis redis://127.0.0.1:6379/0]

Sections:
- history: turn latency on a thread with 10, 1,000 and 10,000 earlier messages, per store
  (``bench/_scale_history.py``);
- replay: 100,000 events replayed to a web socket that reconnects with ``after_seq`` 0, per store:
  the time until the last one arrived, and the server's peak RSS above what it held before
  (``VmHWM`` after resetting it through ``/proc/PID/clear_refs``);
- threads: 10,000 idle threads (one finished turn each) in Redis, bytes per thread as the sum of
  ``MEMORY USAGE`` over the bench's private key prefix (and the ``INFO memory`` ``used_memory``
  delta, noisier: the server is shared), keys per thread; the memory store's bytes per thread
  by tracemalloc;
- approvals: ``GET /agent/approvals`` (the first page, 20) with 1,000 pending approvals, p50/p99,
  per store;
- renders: the event loop's lag while 50 PNG renders run at once (a 5 ms ticker's lateness);
- sockets: 18,000 idle web sockets on one gateway process against a bare aiohttp web-socket
  server, RSS per socket, and ``/healthz`` p99 while they are held. Every process raises its
  soft limit of open files to the hard one (``resource.setrlimit``); the clients run in three
  separate processes.

Servers run in child processes of this script (it re-invokes itself); Redis sections use a
throwaway key prefix they delete afterwards (never FLUSHDB: the server may be shared).
``--quick`` runs small sizes, as a smoke test (under a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _keys import drop_prefix  # type: ignore[import-not-found]  # noqa: E402

SECRET = "bench-secret-bench-secret-bench"
SECTIONS = ("history", "replay", "threads", "approvals", "renders", "sockets")
KINDS = ("memory", "redis", "sqlite")


# -- helpers ---------------------------------------------------------------------------------------


def raise_open_files() -> tuple[int, int]:
    """Raise this process's soft limit of open files to its hard limit; answer (old soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return soft, hard


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field}")


def reset_peak(pid: int) -> None:
    """Reset the process's peak RSS (``VmHWM``) to its current RSS."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def wait_port(port: int, process: subprocess.Popen[bytes], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # noqa: TID251 - the orchestrator is synchronous on purpose
    raise RuntimeError(f"server on {port} did not start")


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], cwd=ROOT)


def stop(*processes: subprocess.Popen[bytes] | None) -> None:
    for process in processes:
        if process is not None and process.poll() is None:
            process.terminate()
    for process in processes:
        if process is not None:
            process.wait()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def store_url(kind: str, redis_url: str, prefix: str, folder: str) -> str:
    if kind == "redis":
        return f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}"
    if kind == "sqlite":
        return f"sqlite:///{folder}/{prefix}.db"
    return "memory://"


def row(*cells: Any, widths: tuple[int, ...] = (24, 14, 14, 14, 14)) -> None:
    print(
        "  ".join(
            f"{cell:>{w}}" if i else f"{cell:<{w}}" for i, (cell, w) in enumerate(zip(cells, widths, strict=False))
        )
    )


# -- the gateway server (child process) ------------------------------------------------------------


async def _seed(store: Any, seed: str, count: int) -> None:
    """Write what a section reads before the server answers: events of one thread, or approvals."""
    from gateway import Turn
    from gateway.events import RunStartedEvent, TextDeltaEvent
    from gateway.stores import ApprovalRecord, Batch, RunRecord, ThreadRecord
    from tools import Actor, Confirmation

    async def begin(thread_id: str, owner: str) -> RunRecord:
        turn = Turn(thread_id=thread_id, actor=Actor(id=owner), text="hello")
        run = RunRecord(run_id=f"run_{uuid.uuid4().hex}", thread_id=thread_id, agent="default", turn=turn)
        batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
        thread = ThreadRecord(thread_id=thread_id, owner_id=owner, channel="web")
        await store.begin_run(run, thread=thread, batch=batch, lease_owner="bench", lease_ttl=600)
        stored = await store.get_run(run.run_id)
        assert stored is not None
        return stored

    if seed == "events":
        run = await begin("replay", "replayer")
        ids = {"thread_id": "replay", "run_id": run.run_id, "message_id": "m1"}
        written = 1
        while written < count:
            n = min(1000, count - written)
            await store.write(
                "replay", Batch(events=[TextDeltaEvent(**ids, delta=f"word {written + k} ") for k in range(n)])
            )
            written += n
    elif seed == "approvals":
        expires = time.time() + 86400
        for k in range(count):
            thread_id = f"approval-{k}"
            run = await begin(thread_id, "boss")
            record = ApprovalRecord(
                tool_call_id=f"tc_{uuid.uuid4().hex}",
                run_id=run.run_id,
                thread_id=thread_id,
                tool="purge_cache",
                input={"key": f"cache:{k}"},
                requester_id="boss",
                confirmation=Confirmation(title=f"Purge cache:{k}?", verb="Purge", detail=None),
                tone="destructive",
                expires_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(expires)),
                expires_ts=expires,
                requested_ts=1_000_000.0 + k,
            )
            await store.write(thread_id, Batch(run=run, approvals=[record], release=True))


def serve_gateway(port: int, url: str, seed: str, count: int) -> None:
    import logging

    from aiohttp import web

    from gateway import Runtime, Settings, create_app
    from gateway.app import build_store
    from gateway.cli import tune_gc
    from gateway.models import ScriptedModel, ScriptStep

    logging.basicConfig(level=logging.WARNING)
    raise_open_files()
    settings = Settings(secret=SECRET, port=port, turn_rate_per_minute=10_000_000, turn_burst=10_000_000, store_url=url)
    model = ScriptedModel(lambda request, index: ScriptStep(text="Hello."))
    runtime = Runtime(model=model, store=build_store(settings), owns_store=True)
    app = create_app(settings, runtime=runtime)
    if seed != "none":

        async def seed_store(app: web.Application) -> None:
            await _seed(runtime.store, seed, count)

        app.on_startup.append(seed_store)
    tune_gc()  # as `agora-gateway serve` does
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


async def seed_url(url: str, seed: str, count: int) -> None:
    """Seed a shared store from this (child) process: the server's RSS then holds none of it."""
    from gateway import Settings
    from gateway.app import build_store

    store = build_store(Settings(secret=SECRET, store_url=url))
    try:
        await _seed(store, seed, count)
    finally:
        await store.aclose()


def start_gateway(url: str, seed: str, count: int) -> tuple[subprocess.Popen[bytes], int]:
    """A gateway on ``url`` holding ``seed``: written by another process unless the store is in memory."""
    if url == "memory://":
        return start_server("serve-gateway", url, seed, str(count))
    subprocess.run([sys.executable, __file__, "seed", url, seed, str(count)], cwd=ROOT, check=True)
    return start_server("serve-gateway", url, "none", "0")


def serve_bare(port: int) -> None:
    from aiohttp import WSMsgType, web

    raise_open_files()

    async def echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await ws.send_str(message.data)
        return ws

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    app = web.Application()
    app.router.add_get("/ws", echo)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


def start_server(*args: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = spawn(args[0], str(port), *args[1:])
    wait_port(port, server)
    return server, port


def token(actor_id: str, roles: tuple[str, ...] = ()) -> str:
    from gateway import sign_actor_token
    from tools import Actor

    return sign_actor_token(Actor(id=actor_id, roles=list(roles)), SECRET, 3600)


# -- replay ----------------------------------------------------------------------------------------


async def replay_once(port: int, count: int) -> float:
    import aiohttp

    hello = {"type": "hello", "token": token("replayer"), "thread_id": "replay", "after_seq": 0}
    async with aiohttp.ClientSession() as session:
        started = time.perf_counter()
        ws = await session.ws_connect(f"http://127.0.0.1:{port}/agent/ws", max_msg_size=0)
        await ws.send_str(json.dumps(hello))
        seen = 0
        async with asyncio.timeout(60 if count < 10_000 else 300):
            async for message in ws:
                frame = json.loads(message.data)
                if "seq" in frame and frame.get("type") != "welcome":
                    seen += 1
                    if frame["seq"] != seen:
                        raise RuntimeError(f"event {frame['seq']} arrived as number {seen}")
                    if seen == count:
                        break
                elif frame["type"] == "error":
                    raise RuntimeError(frame)
        elapsed = time.perf_counter() - started
        await ws.close()
    if seen != count:
        raise RuntimeError(f"{seen} of {count} events arrived")
    return elapsed


def section_replay(kinds: list[str], count: int, redis_url: str, folder: str) -> None:
    print(f"\n== replay: {count:,} events to a reconnecting web socket (after_seq 0)")
    print("   peak = the server's VmHWM during the replay above its RSS before it; target: streamed (flat)")
    row("store", "seconds", "events/s", "RSS before MB", "peak +MB")
    for kind in kinds:
        prefix = f"scale-{uuid.uuid4().hex[:8]}"
        server, port = start_gateway(store_url(kind, redis_url, prefix, folder), "events", count)
        try:
            time.sleep(1.0)  # noqa: TID251 - let the server settle after seeding
            before = proc_kb(server.pid, "VmRSS")
            reset_peak(server.pid)
            elapsed = asyncio.run(replay_once(port, count))
            peak = proc_kb(server.pid, "VmHWM")
            row(
                kind,
                f"{elapsed:.2f}",
                f"{count / elapsed:,.0f}",
                f"{before / 1024:.1f}",
                f"{(peak - before) / 1024:.1f}",
            )
        finally:
            stop(server)
            if kind == "redis":
                asyncio.run(drop_prefix(redis_url, prefix))


# -- threads ---------------------------------------------------------------------------------------


async def _idle_threads(store: Any, count: int, tag: str) -> None:
    """``count`` threads with one finished turn each (user message -> text reply)."""
    from gateway import Runtime, Turn
    from gateway.models import ScriptedModel, ScriptStep
    from tools import Actor

    runtime = Runtime(model=ScriptedModel(lambda request, index: ScriptStep(text="Hello there.")), store=store)
    try:

        async def one(i: int) -> None:
            turn = Turn(thread_id=f"idle-{tag}-{i}", actor=Actor(id=f"u{i % 100}"), text="Hi")
            run_id = await runtime.start_turn(turn)
            assert await runtime.wait(run_id) == "completed"

        for start in range(0, count, 20):
            await asyncio.gather(*(one(i) for i in range(start, min(count, start + 20))))
    finally:
        await runtime.aclose()


async def _redis_threads(redis_url: str, count: int) -> tuple[float, float, float, float]:
    import redis.asyncio as redis

    from gateway.stores import RedisStore

    prefix = f"scale-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    store = RedisStore(redis_url, prefix=prefix)
    try:
        await store.ping()
        await _idle_threads(store, 20, "warm")  # the indexes' buckets and scripts exist before counting
        keys0 = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        used0 = int((await client.info("memory"))["used_memory"])
        usage0 = await _memory_usage(client, keys0)
        await _idle_threads(store, count, "n")
        used1 = int((await client.info("memory"))["used_memory"])
        keys1 = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        usage1 = await _memory_usage(client, keys1)
    finally:
        await store.aclose()
        await client.aclose()
        await drop_prefix(redis_url, prefix)
    return (
        (usage1 - usage0) / count,
        (used1 - used0) / count,
        (len(keys1) - len(keys0)) / count,
        len(keys1) / (count + 20),
    )


async def _memory_usage(client: Any, keys: list[bytes]) -> int:
    total = 0
    for start in range(0, len(keys), 500):
        pipe = client.pipeline(transaction=False)
        for key in keys[start : start + 500]:
            pipe.execute_command("MEMORY", "USAGE", key, "SAMPLES", "0")
        total += sum(int(n or 0) for n in await pipe.execute())
    return total


async def _memory_threads(count: int) -> float:
    import tracemalloc

    from gateway.stores import MemoryStore

    store = MemoryStore()
    await _idle_threads(store, 20, "warm")  # imports, caches and the runtime's lazily-built state first
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    await _idle_threads(store, count, "n")
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    await store.aclose()
    return (after - before) / count


def section_threads(count: int, redis_url: str) -> None:
    print(f"\n== threads: {count:,} idle threads (one finished turn each)")
    usage, used, new_keys, keys = asyncio.run(_redis_threads(redis_url, count))
    memory = asyncio.run(_memory_threads(count))
    row("store", "bytes/thread", "keys/thread", "how")
    row("redis", f"{usage:,.0f}", f"{new_keys:.2f}", "sum of MEMORY USAGE SAMPLES 0 over the prefix's keys")
    row("redis", f"{used:,.0f}", "", "INFO memory used_memory delta (shared server: noisy)")
    row("memory", f"{memory:,.0f}", "", "tracemalloc, after gc.collect()")
    print(f"   ({keys:.2f} keys per thread counting the shared index keys)")


# -- approvals -------------------------------------------------------------------------------------


async def list_approvals(port: int, requests: int) -> tuple[float, float, int]:
    import aiohttp

    headers = {"Authorization": f"Bearer {token('boss')}"}
    times: list[float] = []
    async with aiohttp.ClientSession() as session:
        listed = 0
        for _ in range(requests + 10):
            started = time.perf_counter()
            async with session.get(f"http://127.0.0.1:{port}/agent/approvals", headers=headers) as answer:
                body = await answer.json()
                if answer.status != 200:
                    raise RuntimeError(body)
            times.append(time.perf_counter() - started)
            listed = len(body["approvals"])
    times = times[10:]  # warm-up
    return quantile(times, 0.5) * 1000, quantile(times, 0.99) * 1000, listed


def section_approvals(kinds: list[str], count: int, requests: int, redis_url: str, folder: str) -> None:
    print(f"\n== approvals: GET /agent/approvals (first page) with {count:,} pending, {requests} requests")
    row("store", "p50 ms", "p99 ms", "listed", "target")
    for kind in kinds:
        prefix = f"scale-{uuid.uuid4().hex[:8]}"
        server, port = start_gateway(store_url(kind, redis_url, prefix, folder), "approvals", count)
        try:
            p50, p99, listed = asyncio.run(list_approvals(port, requests))
            row(kind, f"{p50:.2f}", f"{p99:.2f}", listed, "flat")
        finally:
            stop(server)
            if kind == "redis":
                asyncio.run(drop_prefix(redis_url, prefix))


# -- renders ---------------------------------------------------------------------------------------


async def _render_lag(count: int) -> tuple[float, float, float, float]:
    from renderers import Renderer

    card = {"tone": "info", "title": "Heads up", "text": "Deploy at noon."}
    loop = asyncio.get_running_loop()
    wall: list[float] = []
    busy: list[float] = []
    async with Renderer(workers=2) as renderer:
        await renderer.render("Callout", {**card, "title": "warm-up"}, "png")
        done = asyncio.Event()

        async def tick() -> None:
            while not done.is_set():
                started, cpu = loop.time(), time.thread_time()
                await asyncio.sleep(0.005)  # a clock: lag = how late it wakes
                late = max(0.0, loop.time() - started - 0.005)
                wall.append(late)
                busy.append(min(late, time.thread_time() - cpu))

        async def render_all() -> float:
            started = time.perf_counter()
            try:
                await asyncio.gather(
                    *(renderer.render("Callout", {**card, "title": f"Card {i}"}, "png") for i in range(count))
                )
            finally:
                done.set()
            return time.perf_counter() - started

        gc.collect()
        gc.freeze()
        async with asyncio.TaskGroup() as group:
            group.create_task(tick())
            took = group.create_task(render_all())
        gc.unfreeze()
    return quantile(wall, 0.5) * 1000, quantile(wall, 0.99) * 1000, max(busy) * 1000, took.result()


def section_renders(count: int) -> None:
    print(f"\n== renders: {count} concurrent PNG renders (2 workers), event-loop lag of a 5 ms ticker")
    p50, p99, busy, took = asyncio.run(_render_lag(count))
    row("figure", "value", "target")
    row("lag p50 ms", f"{p50:.1f}", "")
    row("lag p99 ms", f"{p99:.1f}", "< 50")
    row("max lag working ms", f"{busy:.1f}", "< 50")
    row("renders took s", f"{took:.2f}", "")


# -- sockets ---------------------------------------------------------------------------------------


async def client_idle(port: int, count: int, kind: str, hold_file: str) -> None:
    """Open ``count`` idle sockets, write 'ready' to ``hold_file``, keep them open until killed."""
    import aiohttp

    raise_open_files()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sockets = []
        for i in range(count):
            if kind == "bare":
                sockets.append(await session.ws_connect(f"http://127.0.0.1:{port}/ws", autoping=True))
                continue
            ws = await session.ws_connect(f"http://127.0.0.1:{port}/agent/ws", autoping=True)
            await ws.send_str(json.dumps({"type": "hello", "token": token(f"idle-{hold_file[-6:]}-{i}")}))
            while json.loads((await ws.receive()).data)["type"] != "welcome":
                pass
            sockets.append(ws)
        Path(hold_file).write_text("ready")
        await asyncio.Event().wait()


def wait_file(path: Path, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("idle sockets did not open")
        time.sleep(0.1)  # noqa: TID251


def healthz_times(port: int, requests: int) -> list[float]:
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            answer.read()
        times.append(time.perf_counter() - started)
    return times


def measure_sockets(kind: str, count: int, holders: int) -> tuple[float, float, float]:
    if kind == "bare":
        server, port = start_server("serve-bare")
    else:
        server, port = start_server("serve-gateway", "memory://", "none", "0")
    tag = f"/tmp/agora-scale-{os.getpid()}-{kind}"
    files = [Path(f"{tag}-warm")] + [Path(f"{tag}-{n:06d}") for n in range(holders)]
    for path in files:
        path.unlink(missing_ok=True)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        # A few sockets first, so lazily-built state (imports, caches) is not counted per socket.
        processes.append(spawn("client-idle", str(port), "10", kind, str(files[0])))
        wait_file(files[0], processes[0], 60)
        healthz_times(port, 20)
        time.sleep(0.5)  # noqa: TID251
        before = proc_kb(server.pid, "VmRSS")
        quiet = healthz_times(port, 200)
        for n in range(holders):
            share = count // holders + (1 if n < count % holders else 0)
            processes.append(spawn("client-idle", str(port), str(share), kind, str(files[n + 1])))
        for path, process in zip(files[1:], processes[1:], strict=True):
            wait_file(path, process, 600)
        time.sleep(2.0)  # noqa: TID251 - let the server settle
        after = proc_kb(server.pid, "VmRSS")
        held = healthz_times(port, 200)
        return (after - before) / count, quantile(quiet, 0.99) * 1000, quantile(held, 0.99) * 1000
    finally:
        stop(*processes, server)
        for path in files:
            path.unlink(missing_ok=True)


def section_sockets(count: int) -> None:
    soft, hard = raise_open_files()
    print(f"\n== sockets: {count:,} idle web sockets on one server process (after hello for the gateway)")
    print(f"   open files: soft limit raised from {soft:,} to the hard limit {hard:,} (resource.setrlimit)")
    print("   in the server and in each of the 3 client processes")
    bare, bare_quiet, bare_held = measure_sockets("bare", count, 3)
    ours, quiet, held = measure_sockets("gateway", count, 3)
    row("figure", "bare aiohttp", "gateway", "ratio", "target")
    row("RSS KB per socket", f"{bare:.1f}", f"{ours:.1f}", f"{ours / bare:.2f}x", "<= 1.5x")
    row("/healthz p99 ms, none", f"{bare_quiet:.1f}", f"{quiet:.1f}", "", "")
    row("/healthz p99 ms, held", f"{bare_held:.1f}", f"{held:.1f}", "", "< 50")


# -- history ---------------------------------------------------------------------------------------


def section_history(kinds: list[str], quick: bool) -> None:
    from _scale_history import history_section  # type: ignore[import-not-found]

    sizes = [10, 100] if quick else [10, 1000, 10000]
    asyncio.run(history_section(kinds, sizes, quick))


# -- main ------------------------------------------------------------------------------------------


def child(command: str, rest: list[str]) -> None:
    if command == "serve-gateway":
        serve_gateway(int(rest[0]), rest[1], rest[2], int(rest[3]))
    elif command == "seed":
        asyncio.run(seed_url(rest[0], rest[1], int(rest[2])))
    elif command == "serve-bare":
        serve_bare(int(rest[0]))
    elif command == "client-idle":
        asyncio.run(client_idle(int(rest[0]), int(rest[1]), rest[2], rest[3]))
    else:
        raise SystemExit(f"unknown command {command}")


def main() -> None:
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        child(sys.argv[1], sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--stores", default=",".join(KINDS), help="stores of the per-store sections")
    parser.add_argument("--sockets", type=int, default=None, help="idle sockets (default 18,000; 600 quick)")
    args = parser.parse_args()
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    kinds = [kind.strip() for kind in args.stores.split(",") if kind.strip()]
    quick = args.quick
    print(f"bench/scale.py{' --quick' if quick else ''}: {', '.join(only)}")
    with tempfile.TemporaryDirectory(prefix="agora-scale-") as folder:
        for name in only:
            started = time.perf_counter()
            if name == "history":
                section_history(kinds, quick)
            elif name == "replay":
                section_replay(kinds, 2_000 if quick else 100_000, args.redis, folder)
            elif name == "threads":
                section_threads(200 if quick else 10_000, args.redis)
            elif name == "approvals":
                section_approvals(kinds, 100 if quick else 1_000, 50 if quick else 500, args.redis, folder)
            elif name == "renders":
                section_renders(10 if quick else 50)
            elif name == "sockets":
                section_sockets(args.sockets or (600 if quick else 18_000))
            print(f"   ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
