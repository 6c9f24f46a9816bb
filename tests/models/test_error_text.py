"""A provider's error text with a lone surrogate is made valid: the run fails as ``model_error``."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from gateway import Runtime, Turn
from gateway.events import RunErrorEvent
from gateway.stores import RedisStore
from tests.models.conftest import MakeModel
from tests.models.fake_openai import FakeOpenAI, error
from tests.stores.conftest import drop_prefix
from tools import Actor


async def test_a_provider_error_message_is_made_valid_on_memory(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(error(400, "bad input \ud83d here"))  # json.dumps sends it as the escape \ud83d
    async with Runtime(model=make_model(max_retries=0)) as rt:
        run_id = await rt.start_turn(Turn(thread_id="t1", actor=Actor(id="u1"), text="hi"))
        async with asyncio.timeout(10):
            assert await rt.wait(run_id) == "failed"
        events = [e async for e in rt.events("t1")]
    [err] = [e for e in events if isinstance(e, RunErrorEvent)]
    json.dumps(err.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")


@pytest.mark.redis
async def test_a_provider_error_message_fails_the_run_as_model_error_on_redis(
    fake: FakeOpenAI, make_model: MakeModel, redis_url: str
) -> None:
    fake.script(error(400, "bad input \ud83d here"))
    prefix = f"test-{uuid.uuid4().hex[:10]}"
    store = RedisStore(redis_url, prefix=prefix)
    try:
        async with Runtime(model=make_model(max_retries=0), store=store) as rt:
            run_id = await rt.start_turn(Turn(thread_id="t1", actor=Actor(id="u1"), text="hi"))
            async with asyncio.timeout(10):
                assert await rt.wait(run_id) == "failed"
            run = await rt.get_run(run_id)
        assert run.error is not None and run.error["code"] == "model_error", run.error
    finally:
        await store.aclose()
        await drop_prefix(redis_url, prefix)
