"""A gateway process that starts one run on the test's store and hangs in its second tool (then gets killed).

python -m tests.stores._crash_child THREAD_ID
"""

from __future__ import annotations

import asyncio
import sys

from gateway import Runtime, Turn
from gateway.models import ScriptedModel
from tools import Actor

from ._backends import store_from_env
from ._crash_tools import quick_lookup, script, slow_lookup


async def main(thread_id: str) -> None:
    store = store_from_env()
    runtime = Runtime(
        tools=[quick_lookup, slow_lookup], model=ScriptedModel(script), store=store, lease_ttl=0.5, instance_id="doomed"
    )
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="Look both up"))
    print(run_id, flush=True)
    await asyncio.Event().wait()  # the parent kills us while slow_lookup hangs


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
