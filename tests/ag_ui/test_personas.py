"""``forwardedProps.agent`` and ``forwardedProps.persona`` choose who answers, as on every channel."""

from __future__ import annotations

from typing import Any

from gateway import SERVICES, Agent, Gateway, Persona
from gateway.models import ModelRequest, ScriptedModel, ScriptStep

from .conftest import BOB, MakeClient, RefusalLog, new_id, of_type, post, run, run_input


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent}: {request.instructions}")


def app() -> Gateway:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[Persona(id="formal", label="Formal", instructions="Be formal.", aliases=["posh"])],
    )
    staff = Agent(name="ops", instructions="You operate.", roles=["staff"])
    return Gateway(agents=[Agent(name="front"), billing, staff], model=ScriptedModel(answer))


def said(frames: list[Any]) -> str:
    return "".join(f.data["delta"] for f in of_type(frames, "TEXT_MESSAGE_CONTENT"))


async def test_forwarded_persona_chooses_the_voice_and_pins_it(make_client: MakeClient) -> None:
    client = await make_client(gateway=app())
    thread_id = new_id("t")
    frames = await run(client, run_input(thread_id, "hi", forwarded_props={"agent": "billing", "persona": "posh"}))
    assert said(frames) == "billing: Be formal."
    frames = await run(client, run_input(thread_id, "again", forwarded_props={"agent": "billing"}))
    assert said(frames) == "billing: Be formal."  # the thread's pin
    runtime = client.app[SERVICES].runtime
    assert [r.persona for r in await runtime.thread_runs(thread_id)] == ["formal", "formal"]


async def test_unknown_persona_or_restricted_agent_refused_with_nothing_kept(
    make_client: MakeClient, refusal_log: RefusalLog
) -> None:
    client = await make_client(gateway=app())
    runtime = client.app[SERVICES].runtime
    for props, status, code in (
        ({"agent": "billing", "persona": "pirate"}, 400, "persona_not_found"),
        ({"persona": "formal"}, 400, "persona_not_found"),  # the default agent has none
        ({"agent": "ops"}, 404, "unknown_agent"),  # BOB is no staff: as unknown as "nobody"
        ({"agent": "billing", "persona": 7}, 400, "invalid_forwarded_props"),
    ):
        thread_id = new_id("t")
        response = await post(client, run_input(thread_id, "hi", forwarded_props=props), actor=BOB)
        assert response.status == status, props
        assert (await response.json())["code"] == code
        refusal_log.one(status, code, route="/agent/ag-ui")
        assert await runtime.get_thread(thread_id) is None
