"""A2A ``metadata.agent`` and ``metadata.persona``: who answers, in which voice; unknown ones change nothing."""

from __future__ import annotations

from typing import Any

from gateway import Agent, Persona, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore

from .conftest import ALICE


def answer(request: ModelRequest, index: int) -> ScriptStep:
    return ScriptStep(text=f"{request.agent}: {request.instructions}")


def runtime() -> Runtime:
    billing = Agent(
        name="billing",
        instructions="You bill.",
        personas=[
            Persona(id="formal", label="Formal", instructions="Be formal."),
            Persona(id="casual", label="Casual", instructions="Be casual."),
        ],
        default_persona="casual",
    )
    staff = Agent(name="ops", instructions="You operate.", roles=["staff"])
    return Runtime(agents=[Agent(name="front"), billing, staff], model=ScriptedModel(answer), store=MemoryStore())


def message(text: str, message_id: str, context_id: str, **metadata: Any) -> dict[str, Any]:
    return {
        "messageId": message_id,
        "role": "ROLE_USER",
        "contextId": context_id,
        "parts": [{"text": text}],
        "metadata": metadata,
    }


def reply(sent: dict[str, Any]) -> str:
    assert "result" in sent, sent
    return str(sent["result"]["task"]["status"]["message"]["parts"][0]["text"])


async def test_metadata_persona_chooses_the_voice_and_the_context_keeps_it(make_gateway: Any) -> None:
    served = runtime()
    gw = await make_gateway(served)
    sent = await gw.rpc("SendMessage", {"message": message("hi", "m-1", "ctx-p1", agent="billing")})
    assert reply(sent) == "billing: Be casual."  # the agent's default
    sent = await gw.rpc("SendMessage", {"message": message("hi", "m-2", "ctx-p1", agent="billing", persona="formal")})
    assert reply(sent) == "billing: Be formal."
    request = {"message": message("hi", "m-3", "ctx-p1"), "metadata": {"agent": "billing"}}
    assert reply(await gw.rpc("SendMessage", request)) == "billing: Be formal."  # the pin
    assert [r.persona for r in await served.thread_runs("ctx-p1")] == ["casual", "formal", "formal"]


async def test_unknown_persona_or_restricted_agent_is_invalid_params_and_changes_nothing(make_gateway: Any) -> None:
    served = runtime()
    gw = await make_gateway(served)
    for index, metadata in enumerate(
        ({"agent": "billing", "persona": "pirate"}, {"persona": "formal"}, {"agent": "ops"}, {"persona": "x" * 65})
    ):
        context_id = f"ctx-bad-{index}"
        sent = await gw.rpc("SendMessage", {"message": message("hi", f"m-{index}", context_id, **metadata)})
        assert sent["error"]["code"] == -32602, sent
        assert await served.get_thread(context_id) is None
    # The messageId of a refused send is free for a retry that names a persona the agent has.
    retry = message("hi", "m-0", "ctx-bad-0", agent="billing", persona="formal")
    assert reply(await gw.rpc("SendMessage", {"message": retry}, actor=ALICE)) == "billing: Be formal."


async def test_the_public_card_leaves_out_agents_kept_for_some_roles(make_gateway: Any) -> None:
    gw = await make_gateway(runtime())
    card = (await gw.http(None).get(f"{gw.base_url}/.well-known/agent-card.json")).json()
    assert sorted(skill["id"] for skill in card["skills"]) == ["billing", "front"]
