"""Choosing the agent and persona on the web socket, and ``GET /agent/agents``."""

from __future__ import annotations

from typing import Any

from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import Actor

from .conftest import ALICE, connect, token_for

SAM = Actor(id="sam", roles=["staff"])


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent}: {request.instructions}")


def agents_runtime() -> Runtime:
    billing = Agent(
        name="billing",
        description="Invoices and refunds.",
        instructions="You bill.",
        personas=[
            Persona(id="formal", label="Formal", description="Dear customer", instructions="Be formal."),
            Persona(id="casual", label="Casual", instructions="Be casual.", aliases=["chill"]),
        ],
        default_persona="chill",
    )
    return Runtime(
        agents=[
            Agent(name="front", description="The front desk.", instructions="You greet."),
            billing,
            Agent(name="ops", description="Operations.", instructions="You operate.", roles=["staff"]),
        ],
        model=ScriptedModel(answer),
        store=MemoryStore(),
    )


def final_text(frames: list[dict[str, Any]]) -> str:
    return next(f["text"] for f in frames if f["type"] == "text-end")


async def test_hello_and_send_choose_the_agent_and_persona(make_client: Any) -> None:
    runtime = agents_runtime()
    client = await make_client(runtime)
    ws = await connect(client, token=token_for(ALICE))
    welcome = await ws.hello(agent="billing")
    assert welcome["agent"] == "billing"
    frames = await ws.turn("hi")  # the hello's agent, its default persona
    started = next(f for f in frames if f["type"] == "run-started")
    assert started["agent"] == "billing" and started["persona"] == "casual"
    assert final_text(frames) == "billing: Be casual."
    frames = await ws.turn("hi", persona="formal")  # the send's persona, pinned from now on
    assert final_text(frames) == "billing: Be formal."
    frames = await ws.turn("hi")
    assert final_text(frames) == "billing: Be formal."
    frames = await ws.turn("hi", agent="front")  # the send's agent wins over the hello's
    started = next(f for f in frames if f["type"] == "run-started")
    assert started["agent"] == "front" and started["persona"] is None
    assert final_text(frames) == "front: You greet."
    thread_id = welcome["thread_id"]
    runs = await runtime.thread_runs(thread_id)
    assert [(r.agent, r.persona) for r in runs] == [
        ("billing", "casual"),
        ("billing", "formal"),
        ("billing", "formal"),
        ("front", None),
    ]


async def test_unknown_agent_or_persona_is_an_error_frame_and_writes_nothing(make_client: Any) -> None:
    runtime = agents_runtime()
    client = await make_client(runtime)
    ws = await connect(client, token=token_for(ALICE))
    await ws.send({"type": "hello", "id": "h1", "agent": "nobody"})
    error = (await ws.until_type("error"))[-1]
    assert error["code"] == "unknown_agent" and error["id"] == "h1"
    await ws.send({"type": "hello", "id": "h2", "agent": "ops"})  # restricted: the same answer
    error = (await ws.until_type("error"))[-1]
    assert error["code"] == "unknown_agent" and error["id"] == "h2"
    welcome = await ws.hello(thread_id="alice-thread-1")  # the socket is still usable
    thread_id = welcome["thread_id"]
    before = await runtime.last_seq(thread_id)
    for frame, code in (
        ({"agent": "nobody"}, "unknown_agent"),
        ({"agent": "ops"}, "unknown_agent"),
        ({"agent": "billing", "persona": "pirate"}, "persona_not_found"),
        ({"persona": "formal"}, "persona_not_found"),  # the default agent has no personas
    ):
        await ws.send({"type": "send", "id": "s", "text": "hi", **frame})
        error = (await ws.until_type("error"))[-1]
        assert error["code"] == code, frame
    assert await runtime.last_seq(thread_id) == before
    assert await runtime.thread_runs(thread_id) == []
    assert await runtime.persona_pins.get(thread_id, "billing") is None


async def test_staff_may_choose_a_restricted_agent(make_client: Any) -> None:
    client = await make_client(agents_runtime())
    ws = await connect(client, token=token_for(SAM))
    assert (await ws.hello(agent="ops"))["agent"] == "ops"
    assert final_text(await ws.turn("hi")) == "ops: You operate."


async def test_agents_route_lists_what_the_caller_may_use(make_client: Any) -> None:
    client = await make_client(agents_runtime())
    answered = await client.get("/agent/agents", headers={"Authorization": f"Bearer {token_for(ALICE)}"})
    assert answered.status == 200
    assert answered.headers["Cache-Control"] == "no-store"
    assert await answered.json() == {
        "agents": [
            {
                "name": "front",
                "description": "The front desk.",
                "default": True,
                "default_persona": None,
                "personas": [],
            },
            {
                "name": "billing",
                "description": "Invoices and refunds.",
                "default": False,
                "default_persona": "casual",
                "personas": [
                    {"id": "formal", "label": "Formal", "description": "Dear customer", "aliases": []},
                    {"id": "casual", "label": "Casual", "description": None, "aliases": ["chill"]},
                ],
            },
        ]
    }
    staff = await client.get("/agent/agents", headers={"Authorization": f"Bearer {token_for(SAM)}"})
    assert [a["name"] for a in (await staff.json())["agents"]] == ["front", "billing", "ops"]


async def test_agents_route_is_authenticated_like_the_others(make_client: Any) -> None:
    client = await make_client(agents_runtime(), anonymous=False)
    refused = await client.get("/agent/agents")
    assert refused.status == 401
    assert (await refused.json())["code"] == "unauthenticated"
    forged = await client.get("/agent/agents", headers={"Authorization": "Bearer not-a-token"})
    assert forged.status == 401


async def test_tools_catalog_of_a_restricted_agent_is_unknown(make_client: Any) -> None:
    client = await make_client(agents_runtime())
    headers = {"Authorization": f"Bearer {token_for(ALICE)}"}
    refused = await client.get("/agent/tools?agent=ops", headers=headers)
    assert refused.status == 404 and (await refused.json())["code"] == "unknown_agent"
    staff = await client.get("/agent/tools?agent=ops", headers={"Authorization": f"Bearer {token_for(SAM)}"})
    assert staff.status == 200
