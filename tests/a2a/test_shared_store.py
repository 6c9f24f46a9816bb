"""Tasks live in the store: a second gateway process sharing it answers for tasks the first started."""

from __future__ import annotations

from typing import Any

from gateway import Agent, Runtime
from gateway.demo import DemoModel, demo_tools
from gateway.stores import MemoryStore

from .conftest import BOB, SECRET


def demo_runtime(store: MemoryStore, name: str) -> Runtime:
    return Runtime(
        tools=demo_tools(SECRET.encode()),
        agents=[Agent(name="assistant")],
        model=DemoModel(),
        store=store,
        instance_id=name,
    )


async def test_another_process_reads_lists_and_resumes_the_task(make_gateway: Any) -> None:
    store = MemoryStore()
    first = await make_gateway(demo_runtime(store, "process-a"))
    second = await make_gateway(demo_runtime(store, "process-b"))
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "refund order 1042"}]}
    task = (await first.rpc("SendMessage", {"message": message}))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

    seen = (await second.rpc("GetTask", {"id": task["id"]}))["result"]
    assert seen == task
    assert [t["id"] for t in (await second.rpc("ListTasks", {}))["result"]["tasks"]] == [task["id"]]
    assert (await second.rpc("GetTask", {"id": task["id"]}, actor=BOB))["error"]["code"] == -32001

    answer = {"messageId": "m-2", "role": "ROLE_USER", "taskId": task["id"], "parts": [{"data": {"approved": True}}]}
    done = (await second.rpc("SendMessage", {"message": answer}))["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert (await first.rpc("GetTask", {"id": task["id"]}))["result"] == done
    again = await first.rpc("SendMessage", {"message": answer})
    assert again["result"]["task"]["id"] == task["id"]
    assert len(await store.thread_runs(task["contextId"])) == 1
