"""A gateway process for the long-outage test: starts runs whose tool is in flight when the store goes away.

python -m tests.stores._outage_child NAME COUNT

It starts COUNT runs on its own threads and prints their ids, one line each. Their tool records
each attempt (``NAME key``) in the file ``AGORA_TEST_ATTEMPTS`` (a file: the store is away while
the tools finish), waits ``AGORA_TEST_TOOL_SECONDS`` and returns. The parent stops the process.
"""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel

from gateway import Runtime, Turn
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from tools import Actor, ToolContext, define_tool

from ._backends import store_from_env


class KeyInput(BaseModel):
    key: str


def _record(line: str) -> None:
    with open(os.environ["AGORA_TEST_ATTEMPTS"], "a", encoding="utf-8") as attempts:
        attempts.write(line + "\n")


@define_tool(name="charge", description="Charges once per idempotency key.", input=KeyInput)
async def charge(input: KeyInput, ctx: ToolContext) -> dict[str, str]:
    await asyncio.to_thread(_record, f"{sys.argv[1]} {ctx.idempotency_key}")
    await asyncio.sleep(float(os.environ["AGORA_TEST_TOOL_SECONDS"]))  # the store goes away meanwhile
    return {"charged": input.key}


def plan(request: ModelRequest, index: int) -> ScriptStep:
    if request.step == 0:
        return ScriptStep(tool_calls=[ToolCallRequest(name="charge", args={"key": "k"})])
    return ScriptStep(text="Charged.")


async def main(name: str, count: int) -> None:
    store = store_from_env(timeout=1.0)
    runtime = Runtime(
        tools=[charge],
        model=ScriptedModel(plan),
        store=store,
        lease_ttl=float(os.environ["AGORA_TEST_LEASE"]),
        instance_id=name,
    )
    await runtime.start()
    for index in range(count):
        run_id = await runtime.start_turn(Turn(thread_id=f"t-{name}-{index}", actor=Actor(id="u1"), text="charge"))
        print(run_id, flush=True)
    await asyncio.Event().wait()  # runs and sweeps go on until the parent stops us


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
