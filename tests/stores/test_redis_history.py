"""``RedisStore``'s history window: a process reads only what is new, and still answers what the list holds."""

from __future__ import annotations

import pytest

from gateway.models import AssistantMessage, UserMessage
from gateway.stores import Batch, RedisStore

from ..conftest import own_redis_store
from ._helpers import new_run, thread_of

pytestmark = pytest.mark.redis


async def turn(
    store: RedisStore, thread_id: str, said: str, *, limit: int | None, answer: str | None = None
) -> list[str]:
    """Begin a run saying ``said`` (and end it, answering ``answer``): the history it began with, as text."""
    run = new_run(thread_id)
    begun = await store.begin_run(
        run,
        thread=thread_of(thread_id),
        batch=Batch(messages=[UserMessage(content=said)]),
        lease_owner="p1",
        lease_ttl=30.0,
        history_limit=limit,
    )
    stored = await store.get_run(run.run_id)
    assert stored is not None
    said_back = [AssistantMessage(content=answer)] if answer is not None else []
    done = stored.model_copy(update={"status": "completed"})
    await store.write(thread_id, Batch(run=done, messages=said_back, release=True))
    return [str(message.content) for message in begun.history]


async def test_the_window_holds_what_other_processes_wrote_and_what_a_new_thread_of_the_same_id_holds(
    redis_url: str, prefix: str, thread_id: str
) -> None:
    async with own_redis_store(redis_url, prefix) as one, own_redis_store(redis_url, prefix) as other:
        assert await turn(one, thread_id, "u1", limit=3, answer="a1") == ["u1"]
        assert await turn(one, thread_id, "u2", limit=3) == ["u1", "a1", "u2"]
        assert await turn(other, thread_id, "u3", limit=3, answer="a3") == ["a1", "u2", "u3"]
        # ``one`` held [u1, a1, u2]: the others' messages are read, the window slides.
        assert await turn(one, thread_id, "u4", limit=3) == ["u3", "a3", "u4"]
        assert await turn(one, thread_id, "u5", limit=None) == ["u1", "a1", "u2", "u3", "a3", "u4", "u5"]
        assert await turn(one, thread_id, "u6", limit=2) == ["u5", "u6"]
        assert await turn(one, thread_id, "u7", limit=5) == ["a3", "u4", "u5", "u6", "u7"]
        messages = [str(message.content) for message in await one.get_messages(thread_id)]
        assert await turn(other, thread_id, "u8", limit=None) == [*messages, "u8"]

        # Erased by another process and begun again with as many messages: a new list, not the old one.
        assert await other.delete_thread(thread_id)
        for said in ("x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8"):
            await turn(other, thread_id, said, limit=3)
        assert await turn(one, thread_id, "x9", limit=3) == ["x7", "x8", "x9"]
        restarted = RedisStore(redis_url, prefix=prefix)  # a new process: the whole window
        try:
            assert await turn(restarted, thread_id, "x10", limit=2) == ["x9", "x10"]
        finally:
            await restarted.aclose()
