"""A master of a Redis Cluster killed mid-run and its replica promoted: nothing lost, nothing doubled.

A private cluster of 3 masters with a replica each (``ClusterServers(replicas=1)``). Runs on
threads of every node wait inside a tool; the master of one node is SIGKILLed (once its replica
has every write, ``WAIT``), the tools of the other nodes finish at once, those of the dead
node's threads once the replica serves its slots; the old master comes back as a replica.
"""

from __future__ import annotations

import asyncio
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

from ..conftest import drop_cluster_prefix
from ._backends import masters_of
from ._cluster import ClusterServers

pytestmark = pytest.mark.redis
RUNS_PER_NODE = 2


class KeyInput(BaseModel):
    key: str


async def _synced(port: int, key: str) -> None:
    """Write through the master at ``port`` and wait until its replica has it (and so everything before)."""
    client = redis.Redis(port=port)
    try:
        await client.set(key, "1")
        assert await client.execute_command("WAIT", 1, 5000) == 1, "the replica is in sync"
    finally:
        await client.aclose()


async def test_a_master_killed_mid_run_fails_over_and_every_run_finishes_once(tmp_path: Path) -> None:
    cluster = ClusterServers(tmp_path, masters=3, replicas=1)
    await cluster.start()
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    store = RedisStore(cluster.url, prefix=prefix, timeout=2.0)
    threads = await cluster.threads_on_every_node(stem=f"fo-{uuid.uuid4().hex[:6]}")
    doomed = next(iter(threads))
    gates = {port: asyncio.Event() for port in threads}
    attempts: list[str] = []
    in_tool: dict[str, asyncio.Event] = {}

    @define_tool(name="charge", description="Charges once per idempotency key.", input=KeyInput)
    async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, Any]:
        attempts.append(ctx.idempotency_key)
        in_tool[input.key].set()
        await gates[int(input.key.split(":")[0])].wait()
        return {"charged": input.key}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            key = str(request.messages[-1].content).split()[-1]  # the turn: "charge <port>:<n>"
            return ScriptStep(tool_calls=[ToolCallRequest(name="charge", args={"key": key})])
        return ScriptStep(text="Charged.")

    runtime = Runtime(
        tools=[charge], model=ScriptedModel(plan), store=store, lease_ttl=1.0, maintenance_interval=0.1, store_retry=60
    )
    runs: dict[str, tuple[int, str]] = {}
    try:
        for port, base in threads.items():
            for n in range(RUNS_PER_NODE):
                key = f"{port}:{n}"
                in_tool[key] = asyncio.Event()
                thread_id = f"{base}" if n == 0 else await cluster.thread_on(port, stem=f"{base}-{n}")
                run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text=f"charge {key}"))
                runs[run_id] = (port, thread_id)
        async with asyncio.timeout(10):
            for event in in_tool.values():
                await event.wait()

        await _synced(doomed, f"{prefix}:{{{threads[doomed]}}}:sync")
        cluster.kill(doomed)
        for port in threads:
            if port != doomed:
                gates[port].set()  # the other nodes' runs go on during the failover
        others = [run_id for run_id, (port, _) in runs.items() if port != doomed]
        for run_id in others:
            assert await runtime.wait(run_id, timeout=20) == "completed"
        promoted = await cluster.failed_over(doomed)
        gates[doomed].set()
        for run_id, (port, _) in runs.items():
            if port == doomed:
                assert await runtime.wait(run_id, timeout=30) == "completed"
        await cluster.restart(doomed)  # back, as the replica of its former replica
        await cluster.wait_ok()
        assert promoted in await cluster.master_ports() and doomed not in await cluster.master_ports()

        for run_id, (_, thread_id) in runs.items():
            events = await store.read_events(thread_id)
            seqs = [e.seq for e in events]
            assert seqs == list(range(1, len(seqs) + 1)), f"every seq once, no gap: {seqs}"
            kinds = [e.type for e in events]
            assert kinds.count("run-finished") == 1 and kinds.count("tool-completed") == 1, kinds
            stored = await store.get_run(run_id)
            assert stored is not None and stored.status == "completed"
    finally:
        for gate in gates.values():
            gate.set()
        await runtime.aclose()
        await store.aclose()
        try:
            await drop_cluster_prefix(await masters_of(cluster.url), prefix)  # the masters that run now
        finally:
            cluster.stop()
    assert len(attempts) == len(runs) == len(set(attempts)), f"each tool ran once: {attempts}"
