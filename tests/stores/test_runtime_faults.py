"""Faults at the runtime level, with real processes and real servers, on Redis and on PostgreSQL:
a gateway process killed mid-run, and the store going away and coming back under running runs.

Each test runs once per shared store (``backend``). Redis goes away by stopping a private
``redis-server``, a Redis Cluster by stopping every node of a private one; PostgreSQL by
cutting the network to the machine's server (``_backends.Outage``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import Actor, ToolContext, define_tool

from ._backends import Outage, drop_store, make_store, store_env
from ._crash_tools import quick_lookup, script, slow_lookup

pytestmark = pytest.mark.redis  # the tools of the SIGKILL test record their effects in Redis
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["redis", "redis-cluster", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """The shared store a test runs on."""
    return str(request.param)


@pytest.fixture
def shared_url(backend: str, request: pytest.FixtureRequest) -> str:
    """The shared Redis, the session's Redis Cluster, or the session's PostgreSQL database."""
    if backend == "redis-cluster":
        return str(request.getfixturevalue("redis_cluster").url)
    return str(request.getfixturevalue("redis_url" if backend == "redis" else "postgres_dsn"))


@pytest.fixture
async def outage(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Outage]:
    """A store the test takes away and brings back (not started yet)."""
    dsn = str(request.getfixturevalue("postgres_dsn")) if backend == "postgres" else None
    own = Outage(backend, tmp_path, dsn)  # type: ignore[arg-type]
    try:
        yield own
    finally:
        await own.aclose()


async def effects(url: str, prefix: str, kind: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return list(await client.lrange(f"{prefix}:effects:{kind}", 0, -1))
    finally:
        await client.aclose()


async def test_a_queue_outlives_the_process_killed_while_its_run_worked(
    backend: str, shared_url: str, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL with a run in a tool and two messages queued: another process resumes the run, then
    runs the queued messages in order, each once."""
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        **store_env(backend, shared_url, prefix),
        "AGORA_TEST_REDIS_URL": redis_url,
        "AGORA_TEST_HANG": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.stores._queue_child", thread_id], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    store = make_store(backend, shared_url, prefix)
    monkeypatch.setenv("AGORA_TEST_REDIS_URL", redis_url)
    monkeypatch.setenv("AGORA_TEST_PREFIX", prefix)
    survivor = Runtime(
        tools=[quick_lookup, slow_lookup],
        model=ScriptedModel(script),
        store=store,
        lease_ttl=0.5,
        instance_id="survivor",
    )
    try:
        assert child.stdout is not None
        lines = [(await asyncio.to_thread(child.stdout.readline)).decode().strip() for _ in range(3)]
        run_id, queued_ids = lines[0], lines[1:]
        async with asyncio.timeout(20):
            while not await effects(redis_url, prefix, "slow"):  # the child is inside slow_lookup now
                await asyncio.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        await asyncio.to_thread(child.wait, 10)
        assert [q.message_id for q in await store.queued_messages(thread_id)] == queued_ids

        async with asyncio.timeout(30):
            while True:  # the survivor's passes take the run over, then start what waits behind it
                await survivor.sweep()
                runs = await store.thread_runs(thread_id)
                if len(runs) == 3 and all(r.status == "completed" for r in runs):
                    break
                await asyncio.sleep(0.05)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
        await survivor.aclose()
    try:
        runs = await store.thread_runs(thread_id)
        assert [(r.run_id == run_id, r.turn.text) for r in runs] == [(True, "m1"), (False, "m2"), (False, "m3")]
        assert await store.queued_messages(thread_id) == []
        events = await store.read_events(thread_id)
        started = [e.message_id for e in events if e.type == "message-dequeued" and e.reason == "started"]
        assert started == queued_ids, "each queued message started once, in order"
    finally:
        await store.aclose()
        if backend == "redis-cluster":  # the session's cluster: leave it as found
            await drop_store(backend, shared_url, prefix)
    quick = await effects(redis_url, prefix, "quick")
    assert len(quick) == len(set(quick)) == 3, "one quick lookup per run: the first run's was not run again"


async def test_a_killed_process_run_is_resumed_elsewhere_without_rerunning_settled_tools(
    backend: str, shared_url: str, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        **store_env(backend, shared_url, prefix),
        "AGORA_TEST_REDIS_URL": redis_url,  # where the tools record their effects
        "AGORA_TEST_HANG": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.stores._crash_child", thread_id], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    store = make_store(backend, shared_url, prefix)
    monkeypatch.setenv("AGORA_TEST_REDIS_URL", redis_url)
    monkeypatch.setenv("AGORA_TEST_PREFIX", prefix)
    survivor = Runtime(
        tools=[quick_lookup, slow_lookup],
        model=ScriptedModel(script),
        store=store,
        lease_ttl=0.5,
        instance_id="survivor",
    )
    try:
        assert child.stdout is not None
        run_id = (await asyncio.to_thread(child.stdout.readline)).decode().strip()
        async with asyncio.timeout(20):
            while not await effects(redis_url, prefix, "slow"):  # the child is inside slow_lookup now
                await asyncio.sleep(0.02)
        child.send_signal(signal.SIGKILL)  # no cleanup at all: only its lease, lapsing, tells
        await asyncio.to_thread(child.wait, 10)
        run = await store.get_run(run_id)
        assert run is not None and run.status == "running"

        async with asyncio.timeout(20):
            while True:  # the survivor's maintenance pass finds the lapsed lease and takes the run over
                await survivor.sweep()
                run = await store.get_run(run_id)
                if run_id in survivor._tasks or (run is not None and run.status != "running"):
                    break
                await asyncio.sleep(0.05)
        assert await survivor.wait(run_id, timeout=20) == "completed"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stdout is not None:
            child.stdout.close()
        await survivor.aclose()
        await store.aclose()
    quick, slow = await effects(redis_url, prefix, "quick"), await effects(redis_url, prefix, "slow")
    assert len(quick) == 1, "a settled tool never runs twice"
    assert len(slow) == 2 and slow[0] == slow[1] == f"{run_id}:{slow[0].split(':', 1)[1]}", "same idempotency key"
    check = make_store(backend, shared_url, prefix)
    try:
        kinds = [e.type for e in await check.read_events(thread_id)]
    finally:
        await check.aclose()
        await drop_store(backend, shared_url, prefix)
        await drop_store("redis", redis_url, prefix)  # the effects
    assert kinds.count("tool-completed") == 2 and kinds[-1] == "run-finished"


class KeyInput(BaseModel):
    key: str


@pytest.mark.parametrize(
    ("backend", "store_retry"),
    [
        pytest.param("redis", 60.0, id="redis-held"),
        pytest.param("redis", 0.0, id="redis-dropped"),
        pytest.param("redis-cluster", 60.0, id="redis-cluster-held"),
        pytest.param("redis-cluster", 0.0, id="redis-cluster-dropped"),
        pytest.param("postgres", 60.0, id="postgres-held", marks=pytest.mark.postgres),
        pytest.param("postgres", 0.0, id="postgres-dropped", marks=pytest.mark.postgres),
    ],
)
async def test_the_store_stopped_and_started_mid_run(
    outage: Outage, caplog: pytest.LogCaptureFixture, store_retry: float
) -> None:
    """A tool finishes while the store is away, for longer than the run's lease.

    With ``store_retry`` the driver holds the result, takes its lapsed lease back when the store
    returns, and writes it: the tool ran once. Without, the run stops and resumes from its
    journal: the unsettled call runs again, with the same idempotency key.
    """
    await outage.start()
    attempts: list[str] = []
    effects_by_key: dict[str, int] = {}
    started, release = asyncio.Event(), asyncio.Event()

    @define_tool(name="charge", description="Charges once per idempotency key.", input=KeyInput)
    async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, Any]:
        attempts.append(ctx.idempotency_key)
        started.set()
        await release.wait()
        effects_by_key[ctx.idempotency_key] = 1  # idempotent: a retry with the same key adds nothing
        return {"charged": input.key}

    @define_tool(name="look", description="Settles before the outage.", input=KeyInput)
    async def look(input: KeyInput, ctx: ToolContext) -> dict[str, Any]:
        attempts.append(f"look:{ctx.idempotency_key}")
        return {"seen": input.key}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="look", args={"key": "a"})])
        if request.step == 1:
            return ScriptStep(tool_calls=[ToolCallRequest(name="charge", args={"key": "a"})])
        return ScriptStep(text="Charged.")

    name = f"faults_{uuid.uuid4().hex[:8]}"
    store = make_store(outage.kind, outage.url, name)
    lease_ttl = 0.5
    runtime = Runtime(
        tools=[charge, look],
        model=ScriptedModel(plan),
        store=store,
        lease_ttl=lease_ttl,
        maintenance_interval=0.1,
        store_retry=store_retry,
    )
    try:
        run_id = await runtime.start_turn(Turn(thread_id="t-outage", actor=Actor(id="u1"), text="charge"))
        async with asyncio.timeout(10):
            await started.wait()
        await outage.stop()
        release.set()  # the tool finishes while the store is away: its result cannot be written
        async with asyncio.timeout(10):
            if store_retry:
                while "holding a step" not in caplog.text:
                    await asyncio.sleep(0.02)
            else:
                while run_id in runtime._tasks:
                    await asyncio.sleep(0.02)
        await asyncio.sleep(lease_ttl * 2)  # the outage outlasts the lease: it lapses
        await outage.start()  # same port, same data
        async with asyncio.timeout(20):
            while True:
                run = await store.get_run(run_id)
                if run is not None and run.status == "completed":
                    break
                await asyncio.sleep(0.05)
        kinds = [e.type for e in await store.read_events("t-outage")]
    finally:
        release.set()
        await runtime.aclose()
        await store.aclose()
        if outage.dsn is not None:
            await drop_store("postgres", outage.dsn, name)
        if outage.cluster is not None:
            await drop_store("redis-cluster", outage.url, name)
    looks = [a for a in attempts if a.startswith("look:")]
    charges = [a for a in attempts if not a.startswith("look:")]
    assert len(looks) == 1, "the call settled before the outage did not run again"
    if store_retry:
        assert len(charges) == 1, "the result was held and written when the store came back"
    else:
        assert len(charges) == 2 and charges[0] == charges[1], "the unsettled call ran again with the same key"
    assert len(effects_by_key) == 1, "so an idempotent tool charged once"
    assert kinds.count("tool-completed") == 2 and kinds[-2:] == ["text-end", "run-finished"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["redis", "redis-cluster", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_an_outage_longer_than_the_lease_runs_no_tool_twice_across_two_processes(
    tmp_path: Path, outage: Outage
) -> None:
    """Two gateway processes, 48 runs inside a tool, the store gone for longer than the lease.

    Every tool finishes while the store is away, so each holder keeps an unwritten result while
    its lease lapses. When the store is back, the other process's sweep sees lapsed leases; it must
    not take a run whose holder is alive and holding (before: 9 of 48 ran twice, on two processes).
    """
    await outage.start()
    name = f"outage_{uuid.uuid4().hex[:8]}"
    attempts = tmp_path / "attempts.txt"
    attempts.touch()
    env = {
        **os.environ,
        **store_env(outage.kind, outage.url, name),
        "AGORA_TEST_ATTEMPTS": str(attempts),
        "AGORA_TEST_TOOL_SECONDS": "1.0",
        "AGORA_TEST_LEASE": "3.0",
    }
    per_process, lease, away = 24, 3.0, 5.0
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.stores._outage_child", name, str(per_process)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for name in ("alpha", "beta")
    ]
    store: Store | None = None
    try:
        run_ids: list[str] = []
        for child in children:
            assert child.stdout is not None
            for _ in range(per_process):
                line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 30)
                run_ids.append(line.decode().strip())
        async with asyncio.timeout(30):
            while len(attempts.read_text().splitlines()) < 2 * per_process:  # every tool is in flight
                await asyncio.sleep(0.02)
        await outage.kill()
        await asyncio.sleep(away)  # the fault itself: an outage longer than the lease
        assert away > lease
        await outage.start()
        store = make_store(outage.kind, outage.url, name)
        async with asyncio.timeout(60):
            while True:
                runs = [await store.get_run(run_id) for run_id in run_ids]
                if all(run is not None and run.status != "running" for run in runs):
                    break
                await asyncio.sleep(0.1)
        statuses = [run.status for run in runs if run is not None]
        completed = [
            [e.type for e in await store.read_events(f"t-{name}-{i}")].count("tool-completed")
            for name in ("alpha", "beta")
            for i in range(per_process)
        ]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait(10)
            if child.stdout is not None:
                child.stdout.close()
        if store is not None:
            await store.aclose()
        if outage.dsn is not None:
            await drop_store("postgres", outage.dsn, name)
        if outage.cluster is not None:
            await drop_store("redis-cluster", outage.url, name)
    lines = attempts.read_text().splitlines()
    by_key: dict[str, list[str]] = {}
    for line in lines:
        process, key = line.split(" ", 1)
        by_key.setdefault(key, []).append(process)
    doubled = {key: where for key, where in by_key.items() if len(where) > 1}
    assert statuses == ["completed"] * len(run_ids)
    assert len(by_key) == len(run_ids) and not doubled, (
        f"{len(doubled)} of {len(run_ids)} ran twice, e.g. {next(iter(doubled.items()), None)}"
    )
    assert completed == [1] * len(run_ids)
