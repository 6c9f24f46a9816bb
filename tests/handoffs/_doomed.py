"""A gateway process that parks a parent and its child on the child's approval, then waits to be killed.

python -m tests.handoffs._doomed THREAD_ID  (the store from ``tests.stores._backends.store_env``)
Prints the parent run id and the approval's tool call id.
"""

from __future__ import annotations

import asyncio
import sys

from gateway import Runtime, Turn
from gateway.events import ApprovalRequestedEvent
from tools import Actor

from ..stores._backends import store_from_env
from ._pair import agents, recorded_purge


async def main(thread_id: str) -> None:
    runtime = Runtime(
        tools=[recorded_purge], agents=agents(), store=store_from_env(), lease_ttl=0.5, instance_id="doomed"
    )
    run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=Actor(id="u1"), text="purge it"))
    assert await runtime.wait(run_id, timeout=10) == "awaiting-approval"
    requested = [e async for e in runtime.events(thread_id) if isinstance(e, ApprovalRequestedEvent)]
    print(run_id, flush=True)
    print(requested[0].tool_call_id, flush=True)
    await asyncio.Event().wait()  # the test kills us here


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
