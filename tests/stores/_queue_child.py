"""A gateway process with a run hanging in its second tool and two messages queued behind it (then killed).

python -m tests.stores._queue_child THREAD_ID

Prints the run's id, then each queued message's id, one per line.
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
    first = await runtime.send(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="m1"))
    print(first.run_id, flush=True)
    for text in ("m2", "m3"):
        accepted = await runtime.send(Turn(thread_id=thread_id, actor=Actor(id="u1"), text=text))
        assert accepted.queued is not None, accepted
        print(accepted.queued.message_id, flush=True)
    await asyncio.Event().wait()  # the parent kills us while slow_lookup hangs


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
