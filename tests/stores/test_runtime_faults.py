"""Faults at the runtime level, with real processes and a real Redis: a gateway process killed
mid-run, and Redis stopped and started under a running run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore
from tools import Actor, ToolContext, define_tool

from ._crash_tools import quick_lookup, script, slow_lookup
from ._server import RedisServer
from .conftest import drop_prefix

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


async def effects(url: str, prefix: str, kind: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return list(await client.lrange(f"{prefix}:effects:{kind}", 0, -1))
    finally:
        await client.aclose()


async def test_a_killed_process_run_is_resumed_elsewhere_without_rerunning_settled_tools(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "AGORA_TEST_REDIS_URL": redis_url, "AGORA_TEST_PREFIX": prefix, "AGORA_TEST_HANG": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.stores._crash_child", thread_id], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    store = RedisStore(redis_url, prefix=prefix)
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
    check = RedisStore(redis_url, prefix=prefix)
    try:
        kinds = [e.type for e in await check.read_events(thread_id)]
    finally:
        await check.aclose()
        await drop_prefix(redis_url, prefix)
    assert kinds.count("tool-completed") == 2 and kinds[-1] == "run-finished"


class KeyInput(BaseModel):
    key: str


@pytest.mark.parametrize("store_retry", [60.0, 0.0], ids=["held", "dropped"])
async def test_redis_stopped_and_started_mid_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, store_retry: float
) -> None:
    """A tool finishes while Redis is away, for longer than the run's lease.

    With ``store_retry`` the driver holds the result, takes its lapsed lease back when Redis
    returns, and writes it: the tool ran once. Without, the run stops and resumes from its
    journal: the unsettled call runs again, with the same idempotency key.
    """
    server = RedisServer(tmp_path)
    await server.start()
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

    store = RedisStore(server.url, prefix="faults")
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
        server.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]  # a clean stop: the AOF is complete
        await asyncio.to_thread(server.process.wait, 10)  # type: ignore[union-attr]
        server.process = None
        release.set()  # the tool finishes while Redis is away: its result cannot be written
        async with asyncio.timeout(10):
            if store_retry:
                while "holding a step" not in caplog.text:
                    await asyncio.sleep(0.02)
            else:
                while run_id in runtime._tasks:
                    await asyncio.sleep(0.02)
        await asyncio.sleep(lease_ttl * 2)  # the outage outlasts the lease: it lapses
        await server.start()  # same port, same data
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
        server.kill()
    looks = [a for a in attempts if a.startswith("look:")]
    charges = [a for a in attempts if not a.startswith("look:")]
    assert len(looks) == 1, "the call settled before the outage did not run again"
    if store_retry:
        assert len(charges) == 1, "the result was held and written when Redis came back"
    else:
        assert len(charges) == 2 and charges[0] == charges[1], "the unsettled call ran again with the same key"
    assert len(effects_by_key) == 1, "so an idempotent tool charged once"
    assert kinds.count("tool-completed") == 2 and kinds[-2:] == ["text-end", "run-finished"]


@pytest.mark.slow
async def test_an_outage_longer_than_the_lease_runs_no_tool_twice_across_two_processes(
    tmp_path: Path, server: RedisServer
) -> None:
    """Two gateway processes, 48 runs inside a tool, Redis SIGKILLed for longer than the lease.

    Every tool finishes while Redis is away, so each holder keeps an unwritten result while its
    lease lapses. When Redis is back, the other process's sweep sees lapsed leases; it must not
    take a run whose holder is alive and holding (before: 9 of 48 ran twice, on two processes).
    """
    await server.start()
    attempts = tmp_path / "attempts.txt"
    attempts.touch()
    env = {
        **os.environ,
        "AGORA_TEST_REDIS_URL": server.url,
        "AGORA_TEST_ATTEMPTS": str(attempts),
        "AGORA_TEST_TOOL_SECONDS": "1.0",
        "AGORA_TEST_LEASE": "3.0",
    }
    per_process, lease, outage = 24, 3.0, 5.0
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
    store: RedisStore | None = None
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
        server.kill()  # SIGKILL: the AOF (appendfsync always) has every write so far
        await asyncio.sleep(outage)  # the fault itself: an outage longer than the lease
        assert outage > lease
        await server.start()
        store = RedisStore(server.url, prefix="outage")
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
