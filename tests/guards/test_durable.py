"""What the guards decided is in the store: a refusal and a rewrite survive a resume on any store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway import Agent, GuardVerdict, Runtime
from gateway.models import ScriptedModel, ScriptStep, UserMessage
from gateway.stores import MemoryStore, SqliteStore, Store
from tests.conftest import own_postgres_store, own_redis_store
from tests.engine.conftest import new_thread, turn

from .conftest import Recording


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def every_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "memory":
        store: Store = MemoryStore()
        yield store
        await store.aclose()
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "agora.db")
        yield store
        await store.aclose()
    elif request.param == "redis":
        async with own_redis_store(request.getfixturevalue("redis_url")) as redis:
            yield redis
    else:
        async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


async def test_a_refusal_is_on_the_run_record_and_out_of_the_history(every_store: Store) -> None:
    guard = Recording(GuardVerdict.refuse("no", message="Not that."))
    model = ScriptedModel([ScriptStep(text="never")])
    runtime = Runtime(agents=[Agent(name="a", input_guards=[guard])], model=model, store=every_store)
    thread = new_thread()
    try:
        run_id = await runtime.start_turn(turn(thread, "a blocked message"))
        assert await runtime.wait(run_id) == "failed"
        run = await every_store.get_run(run_id)
        assert run is not None and (run.input_refusal, run.turn.text) == ("Not that.", "")
        assert run.error == {"code": "input_refused", "message": "Not that."}
        assert await every_store.get_messages(thread) == []
        assert model.calls == 0
    finally:
        await runtime.aclose()


async def test_a_resumed_run_reads_the_rewrite_and_is_not_screened_again(every_store: Store) -> None:
    guard = Recording(GuardVerdict.rewrite("[screened]"))
    reached = asyncio.Event()

    async def hang(request: Any, index: int) -> ScriptStep:
        reached.set()
        await asyncio.Event().wait()  # the process dies during its model step
        raise AssertionError("unreachable")

    first = Runtime(
        agents=[Agent(name="a", input_guards=[guard])], model=ScriptedModel(hang), store=every_store, lease_ttl=0.2
    )
    thread = new_thread()
    run_id = await first.start_turn(turn(thread, "my card is 4111 1111 1111 1111"))
    async with asyncio.timeout(5):
        await reached.wait()
    await first.aclose()
    model = ScriptedModel([ScriptStep(text="resumed")])
    second = Runtime(
        agents=[Agent(name="a", input_guards=[guard])], model=model, store=every_store, lease_ttl=0.2, takeover_grace=0
    )
    try:
        async with asyncio.timeout(10):
            while model.calls == 0:
                await second.sweep()
                await asyncio.sleep(0.05)  # until the first process's lease lapses
        assert await second.wait(run_id, timeout=5) == "completed"
    finally:
        await second.aclose()
    assert len(guard.seen) == 1  # screened once, when the run began
    assert model.requests[0].messages[-1] == UserMessage(content="[screened]")
    assert (await every_store.get_messages(thread))[0] == UserMessage(content="[screened]")
