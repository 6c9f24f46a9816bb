"""A gateway process on the redis-py that comes first on ``sys.path``: one turn, its log, a live tail.

AGORA_TEST_REDIS_URL=... AGORA_TEST_PREFIX=... python -m tests.stores._version_child THREAD_ID

Prints one JSON line: redis-py's and hiredis's versions, how the run ended, the event types in
the log, and the seqs a live tail (started before the turn) saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import hiredis
import redis

from gateway import Runtime, Turn
from gateway.events import RunEvent, RunFinishedEvent
from gateway.models import ScriptedModel
from gateway.stores import RedisStore
from tools import Actor

from ._crash_tools import quick_lookup, script, slow_lookup


async def main(thread_id: str) -> None:
    store = RedisStore(os.environ["AGORA_TEST_REDIS_URL"], prefix=os.environ["AGORA_TEST_PREFIX"])
    runtime = Runtime(tools=[quick_lookup, slow_lookup], model=ScriptedModel(script), store=store)

    async def follow() -> list[RunEvent]:
        seen: list[RunEvent] = []
        async for event in store.subscribe(thread_id):
            seen.append(event)
            if isinstance(event, RunFinishedEvent):
                return seen
        return seen

    try:
        tail = asyncio.create_task(follow())
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Look both up"))
        status = await runtime.wait(run_id, timeout=10)
        async with asyncio.timeout(10):
            live = await tail
        logged = await store.read_events(thread_id)
    finally:
        await runtime.aclose()
        await store.aclose()
    report = {
        "redis": redis.__version__,
        "hiredis": hiredis.__version__,
        "status": status,
        "logged": [event.type for event in logged],
        "live": [event.seq for event in live],
    }
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
