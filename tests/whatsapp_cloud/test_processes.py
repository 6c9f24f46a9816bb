"""Two processes sharing one Redis: a replayed message id is ignored by both, a tap on B resumes A's run."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from gateway import Agent, Runtime
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import RedisStore
from tests.conftest import drop_prefix

from . import payloads as p
from .conftest import MakeCloud, thread_of
from .tools_ import refund_tool

pytestmark = pytest.mark.redis
THREAD = thread_of(p.ALICE)


@pytest.fixture
async def stores(redis_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    prefix = f"test-wac-{uuid.uuid4().hex[:10]}"
    a, b = RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)
    yield a, b
    await a.aclose()
    await b.aclose()
    await drop_prefix(redis_url, prefix)


async def test_any_process_dedupes_and_decides(make_cloud: MakeCloud, stores: tuple[RedisStore, RedisStore]) -> None:
    refunded: list[str] = []
    tool = refund_tool(refunded)
    model = ScriptedModel(  # one script for both: the run moves from A to B with its history
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="refund_order", args={"order_id": "1042"})]),
            ScriptStep(text="Done: order 1042 is refunded."),
        ]
    )
    processes = []
    for store, name in zip(stores, "ab", strict=True):
        runtime = Runtime(tools=[tool], agents=[Agent(name="assistant")], model=model, store=store, instance_id=name)
        processes.append(await make_cloud(runtime))
    a, b = processes

    message = p.text("refund order 1042")
    assert (await a.post(message)).status == 200
    assert (await b.post(message)).status == 200  # Meta redelivered it to another process: ignored
    await a.graph.wait_for(lambda g: any(r.json and r.json["type"] == "interactive" for r in g.messages()))
    await a.settle()
    await b.settle()
    assert len(await a.channel.services.runtime.thread_runs(THREAD)) == 1
    (ask,) = a.graph.messages()
    assert ask.json is not None
    approve = ask.json["interactive"]["action"]["buttons"][0]["reply"]["id"]

    assert (await b.post(p.button_reply(approve, "Refund"))).status == 200
    await b.graph.wait_for(lambda g: any(t.startswith("Done:") for t in g.texts()))
    await a.settle()
    await b.settle()
    assert refunded == ["1042"]
    assert a.graph.texts() == ["✓ Refunded order 1042", "Done: order 1042 is refunded."]
