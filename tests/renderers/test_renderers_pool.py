"""RenderPool on its own: plain functions, no weasyprint (workers start in a fraction of a second)."""

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from renderers import RemoteError, RenderFailedError, RenderPool, RenderTimeoutError


async def test_runs_functions_in_other_processes() -> None:
    async with RenderPool(2) as pool:
        assert await pool.run(pow, 2, 10) == 1024
        pids = {await pool.run(os.getpid) for _ in range(6)}
        assert os.getpid() not in pids and pids <= set(pool.worker_pids())
        assert pool.size == 2


async def test_exceptions_cross_back() -> None:
    async with RenderPool(1) as pool:
        with pytest.raises(ValueError, match="invalid literal"):
            await pool.run(int, "x")
        with pytest.raises(RemoteError, match="json.decoder.JSONDecodeError") as raised:
            await pool.run(json.loads, "{")
        assert raised.value.type_name == "json.decoder.JSONDecodeError"
        assert "Traceback" in raised.value.remote_traceback
        assert await pool.run(abs, -3) == 3  # the worker survived both


async def test_a_call_past_its_time_limit_kills_only_its_worker() -> None:
    async with RenderPool(2) as pool:
        await pool.run(abs, 1)
        with pytest.raises(RenderTimeoutError, match="longer than 0.2 s"):
            await pool.run(signal.pause, timeout=0.2)
        assert await pool.run(abs, -5) == 5
        assert pool.workers_started >= 2


async def test_a_worker_that_dies_fails_its_call_and_is_replaced() -> None:
    async with RenderPool(1) as pool:
        first = await pool.run(os.getpid)
        with pytest.raises(RenderFailedError, match=f"Render worker {first} died"):
            await pool.run(signal.raise_signal, signal.SIGKILL)
        second = await pool.run(os.getpid)
        assert second != first and pool.worker_pids() == [second]


async def test_workers_that_cannot_start_are_an_error_not_a_hang() -> None:
    async with RenderPool(1, initializer=functools.partial(int, "not a number"), start_timeout=30) as pool:
        with pytest.raises(RenderFailedError, match="cannot start: invalid literal"):
            await pool.run(abs, 1)


async def test_a_worker_that_never_becomes_ready_is_named_in_the_error() -> None:
    async with RenderPool(1, initializer=signal.pause, start_timeout=0.5) as pool:
        with pytest.raises(RenderFailedError, match=r"cannot start: render worker \d+ was not ready within 0.5 s"):
            await pool.run(abs, 1)


UNGUARDED = """
import asyncio

from renderers import Renderer

renderer = Renderer(workers=1)


async def main() -> None:
    await renderer.render("Callout", {"text": "Hello"}, "png")


asyncio.run(main())
"""


def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path: Path) -> None:
    """Spawned workers re-import the main module: one that renders at import time cannot start them."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    raised = result.stderr.strip().splitlines()[-1]  # the parent's exception (workers print their own above)
    assert raised.startswith("renderers._errors.RenderFailedError: Render workers cannot start: ")
    assert f"re-imports the main module ({script})" in raised
    assert 'if __name__ == "__main__":' in raised


async def test_workers_run_at_a_lower_priority() -> None:
    async with RenderPool(1, nice=5) as pool:
        assert await pool.run(os.nice, 0) == os.nice(0) + 5


async def test_a_closed_pool_stops_its_workers_and_refuses_calls() -> None:
    pool = RenderPool(2)
    await pool.run(abs, 1)
    pids = pool.worker_pids()
    await pool.aclose()
    await pool.aclose()
    assert pool.closed
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # exited and reaped
    with pytest.raises(RuntimeError, match="closed RenderPool"):
        await pool.run(abs, 1)


async def test_workers_are_recycled_after_max_calls() -> None:
    async with RenderPool(1, max_calls=3) as pool:
        pids = [await pool.run(os.getpid) for _ in range(6)]
        assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4] == pids[5]
        assert pool.workers_started >= 2


async def test_health_says_idle_starting_ready_and_closed_without_asking_a_worker() -> None:
    pool = RenderPool(1)
    assert pool.health() == {"status": "idle", "size": 1, "ready": 0, "busy": 0, "starting": 0, "started": 0}
    pool.start()
    assert pool.health() == {"status": "starting", "size": 1, "ready": 0, "busy": 0, "starting": 1, "started": 0}
    assert await pool.run(abs, -1) == 1
    assert pool.health() == {"status": "ready", "size": 1, "ready": 1, "busy": 0, "starting": 0, "started": 1}
    await pool.aclose()
    assert pool.health()["status"] == "closed"


async def test_health_says_failing_when_no_worker_can_start() -> None:
    async with RenderPool(1, initializer=functools.partial(int, "not a number"), start_timeout=30) as pool:
        with pytest.raises(RenderFailedError):
            await pool.run(abs, 1)
        assert pool.health() == {"status": "failing", "size": 1, "ready": 0, "busy": 0, "starting": 0, "started": 0}
