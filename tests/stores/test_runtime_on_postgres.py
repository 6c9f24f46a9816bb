"""Faults at the runtime level on PostgreSQL: a gateway process SIGKILLed mid-run, and the database
away (longer than the lease) under a running run, with real processes and the real server."""

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
from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import PostgresStore
from tools import Actor, ToolContext, define_tool

from ..conftest import own_postgres_store
from ._crash_tools import quick_lookup, script, slow_lookup
from ._pg_proxy import PgProxy
from .conftest import drop_prefix
from .test_runtime_faults import effects

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[2]


class KeyInput(BaseModel):
    key: str


async def test_a_killed_process_run_is_resumed_elsewhere_without_rerunning_settled_tools(
    postgres_dsn: str, redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    async with own_postgres_store(postgres_dsn) as store:
        await store.ping()
        env = {
            **os.environ,
            "AGORA_TEST_POSTGRES_DSN": postgres_dsn,
            "AGORA_TEST_SCHEMA": store.schema,
            "AGORA_TEST_REDIS_URL": redis_url,
            "AGORA_TEST_PREFIX": prefix,
            "AGORA_TEST_HANG": "1",
        }
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.stores._crash_child", thread_id], cwd=ROOT, env=env, stdout=subprocess.PIPE
        )
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
            kinds = [e.type for e in await store.read_events(thread_id)]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
            if child.stdout is not None:
                child.stdout.close()
            await survivor.aclose()
    quick, slow = await effects(redis_url, prefix, "quick"), await effects(redis_url, prefix, "slow")
    await drop_prefix(redis_url, prefix)
    assert len(quick) == 1, "a settled tool never runs twice"
    assert len(slow) == 2 and slow[0] == slow[1], "the unsettled call ran again with the same idempotency key"
    assert kinds.count("tool-completed") == 2 and kinds[-1] == "run-finished"


@pytest.mark.parametrize("store_retry", [60.0, 0.0], ids=["held", "dropped"])
async def test_postgres_away_mid_run_for_longer_than_the_lease(
    postgres_dsn: str, caplog: pytest.LogCaptureFixture, store_retry: float
) -> None:
    """A tool finishes while PostgreSQL cannot be reached, for longer than the run's lease.

    With ``store_retry`` the driver holds the result and writes it once the database answers:
    the tool ran once. Without, the run stops and resumes from its journal: the unsettled call
    runs again, with the same idempotency key.
    """
    attempts: list[str] = []
    started, release = asyncio.Event(), asyncio.Event()

    @define_tool(name="charge", description="Charges once per idempotency key.", input=KeyInput)
    async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, Any]:
        attempts.append(ctx.idempotency_key)
        started.set()
        await release.wait()
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

    lease_ttl = 0.5
    async with own_postgres_store(postgres_dsn) as direct, PgProxy(postgres_dsn) as proxy:
        await direct.ping()
        store = PostgresStore(proxy.dsn, schema=direct.schema, timeout=2, connect_timeout=1)
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
            await proxy.down()  # the database cannot be reached any more
            release.set()  # the tool finishes while it is away: its result cannot be written
            async with asyncio.timeout(10):
                if store_retry:
                    while "holding a step" not in caplog.text:
                        await asyncio.sleep(0.02)
                else:
                    while run_id in runtime._tasks:
                        await asyncio.sleep(0.02)
            await asyncio.sleep(lease_ttl * 2)  # the fault itself: the outage outlasts the lease
            await proxy.up()
            async with asyncio.timeout(30):
                while True:
                    run = await direct.get_run(run_id)
                    if run is not None and run.status == "completed":
                        break
                    await asyncio.sleep(0.05)
            kinds = [e.type for e in await direct.read_events("t-outage")]
        finally:
            release.set()
            await runtime.aclose()
            await store.aclose()
    looks = [a for a in attempts if a.startswith("look:")]
    charges = [a for a in attempts if not a.startswith("look:")]
    assert len(looks) == 1, "the call settled before the outage did not run again"
    if store_retry:
        assert len(charges) == 1, "the result was held and written when the database came back"
    else:
        assert len(charges) == 2 and charges[0] == charges[1], "the unsettled call ran again with the same key"
    assert kinds.count("tool-completed") == 2 and kinds[-2:] == ["text-end", "run-finished"]
