"""A child run parked on an approval, its process SIGKILLed, the approval decided on another process:
parent and child complete, each once, and the action runs once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis.asyncio as redis

from gateway import Runtime
from gateway.events import RunFinishedEvent, ToolCompletedEvent
from tools import Actor

from ..conftest import drop_prefix
from ..stores._backends import make_store, store_env
from ._pair import agents, recorded_purge

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


async def purges(url: str, prefix: str) -> list[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return list(await client.lrange(f"{prefix}:effects:purge", 0, -1))
    finally:
        await client.aclose()


async def test_a_parked_child_survives_a_killed_process_and_both_complete_once(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, **store_env("redis", redis_url, prefix), "AGORA_TEST_REDIS_URL": redis_url}
    doomed = subprocess.Popen(
        [sys.executable, "-m", "tests.handoffs._doomed", thread_id], cwd=ROOT, env=env, stdout=subprocess.PIPE
    )
    monkeypatch.setenv("AGORA_TEST_REDIS_URL", redis_url)
    monkeypatch.setenv("AGORA_TEST_PREFIX", prefix)
    store = make_store("redis", redis_url, prefix)
    survivor = Runtime(tools=[recorded_purge], agents=agents(), store=store, lease_ttl=0.5, instance_id="survivor")
    try:
        assert doomed.stdout is not None
        lines = [(await asyncio.to_thread(doomed.stdout.readline)).decode().strip() for _ in range(2)]
        run_id, tool_call_id = lines
        doomed.send_signal(signal.SIGKILL)
        await asyncio.to_thread(doomed.wait, 10)
        assert (await store.get_run(run_id)).status == "awaiting-approval"
        approval = await store.get_approval(tool_call_id)
        assert approval is not None and approval.status == "pending"
        child = await store.get_run(approval.run_id)
        assert child is not None and child.status == "awaiting-approval" and child.parent_run_id == run_id
        assert await purges(redis_url, prefix) == []

        await survivor.decide(tool_call_id, Actor(id="u1"), approve=True, via="web")
        async with asyncio.timeout(20):
            while (await store.get_run(run_id)).status != "completed":
                await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # anything that would run twice has had its chance
        await survivor.sweep()
        assert (await store.get_run(child.run_id)).status == "completed"
        assert len(await purges(redis_url, prefix)) == 1
        parent_events = await store.read_events(thread_id)
        ends = [e.status for e in parent_events if isinstance(e, RunFinishedEvent) and e.run_id == run_id]
        assert ends == ["awaiting-approval", "completed"]
        asked = [e for e in parent_events if isinstance(e, ToolCompletedEvent) and e.tool == "ask_ops"]
        assert [e.output for e in asked] == ["Purged it."]
        nested = [e for e in parent_events if isinstance(e, ToolCompletedEvent) and e.parent_tool_call_id]
        assert [e.tool for e in nested] == ["purge_cache"]
        child_ends = [e.status for e in await store.read_events(child.thread_id) if isinstance(e, RunFinishedEvent)]
        assert child_ends == ["awaiting-approval", "completed"]
        assert (await store.get_messages(thread_id))[-1].content == "All done."
    finally:
        if doomed.poll() is None:
            doomed.kill()
            doomed.wait(10)
        if doomed.stdout is not None:
            doomed.stdout.close()
        await survivor.aclose()
        await store.aclose()
        await drop_prefix(redis_url, prefix)
