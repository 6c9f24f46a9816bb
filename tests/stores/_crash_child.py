"""A gateway process that starts one run and hangs in its second tool (then gets killed).

python -m tests.stores._crash_child THREAD_ID

The run is on Redis (``AGORA_TEST_REDIS_URL``, ``AGORA_TEST_PREFIX``), or on PostgreSQL when
``AGORA_TEST_POSTGRES_DSN`` and ``AGORA_TEST_SCHEMA`` are set; the tools record their effects in
Redis either way.
"""

from __future__ import annotations

import asyncio
import os
import sys

from gateway import Runtime, Turn
from gateway.models import ScriptedModel
from gateway.stores import PostgresStore, RedisStore, Store
from tools import Actor

from ._crash_tools import quick_lookup, script, slow_lookup


async def main(thread_id: str) -> None:
    store: Store
    if "AGORA_TEST_POSTGRES_DSN" in os.environ:
        store = PostgresStore(os.environ["AGORA_TEST_POSTGRES_DSN"], schema=os.environ["AGORA_TEST_SCHEMA"])
    else:
        store = RedisStore(os.environ["AGORA_TEST_REDIS_URL"], prefix=os.environ["AGORA_TEST_PREFIX"])
    runtime = Runtime(
        tools=[quick_lookup, slow_lookup], model=ScriptedModel(script), store=store, lease_ttl=0.5, instance_id="doomed"
    )
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Look both up"))
    print(run_id, flush=True)
    await asyncio.Event().wait()  # the parent kills us while slow_lookup hangs


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
