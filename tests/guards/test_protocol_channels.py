"""A refusal on A2A (a failed task's message) and AG-UI (``RUN_ERROR`` with the code); a flag adds nothing."""

from __future__ import annotations

from typing import Any

from a2a.helpers import get_message_text
from a2a.types import TaskState

from gateway import Agent, Gateway, GuardContext, GuardVerdict, Runtime
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tests.a2a.conftest import collect, make_gateway, send_request
from tests.ag_ui.conftest import make_client, run, run_input, shop, types

__all__ = ["make_client", "make_gateway", "shop"]


class Moderator:
    name = "moderator"

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict | None:
        if "darn" in text:
            return GuardVerdict.refuse("cursing", message="Let's keep it polite.")
        return GuardVerdict.flag("checked")


def app() -> Gateway:
    return Gateway(
        agents=[Agent(name="a", input_guards=[Moderator()])], model=ScriptedModel(lambda r, i: ScriptStep(text="Hi!"))
    )


async def test_a2a_fails_the_task_with_the_refusal(make_gateway: Any) -> None:
    runtime = Runtime(
        agents=[Agent(name="a", input_guards=[Moderator()])],
        model=ScriptedModel(lambda r, i: ScriptStep(text="Hi!")),
        store=MemoryStore(),
    )
    gw = await make_gateway(runtime)
    client = await gw.sdk(streaming=True)
    events = await collect(client.send_message(send_request("darn it")))
    last = events[-1].status_update.status
    assert last.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(last.message) == "Let's keep it polite."
    events = await collect(client.send_message(send_request("hello")))  # flagged: the task completes as usual
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    await client.close()


async def test_ag_ui_ends_the_run_with_a_run_error(make_client: Any) -> None:
    client = await make_client(gateway=app())
    frames = await run(client, run_input("t-guard-1", "darn it"))
    assert types(frames) == ["RUN_STARTED", "RUN_ERROR"]
    error = frames[-1].data
    assert (error["code"], error["message"]) == ("input_refused", "Let's keep it polite.")
    frames = await run(client, run_input("t-guard-2", "hello"))
    assert "RUN_ERROR" not in types(frames) and types(frames)[-1] == "RUN_FINISHED"
