"""End to end: a ``Runtime`` driving ``OpenAIModel`` against the fake server, with a read tool."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

import tools
from gateway import Agent, Runtime, Turn
from gateway.events import RunFinishedEvent, TextDeltaEvent, Usage
from tests.models.conftest import MakeModel
from tests.models.fake_openai import FakeOpenAI, finish, role, text, tool, usage


class CityInput(BaseModel):
    city: str


@tools.ai_tool(description="The weather in a city.", input=CityInput, kind="read")
class GetWeatherTool:
    async def execute(self, input: CityInput, ctx: tools.ToolContext) -> dict[str, str]:
        return {"city": input.city, "sky": "sunny"}


async def test_a_run_calls_a_tool_then_answers(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(
        fake.sse(
            role(),
            tool(0, id="call_w", name="get_weather"),
            tool(0, args='{"city":'),
            tool(0, args=' "Lisbon"}'),
            finish("tool_calls"),
            usage(20, 8),
        ),
        fake.sse(role(), text("It is sunny "), text("in Lisbon."), finish(), usage(40, 6)),
    )
    agent = Agent(name="default", instructions="You help with the weather.")
    async with Runtime(tools=[GetWeatherTool], agents=[agent], model=make_model()) as rt:
        run_id = await rt.start_turn(
            Turn(thread_id="t1", actor=tools.Actor(id="u1"), text="Weather in Lisbon?", channel="web")
        )
        async with asyncio.timeout(10):
            assert await rt.wait(run_id) == "completed"
        events = [event async for event in rt.events("t1")]

    kinds = [event.type for event in events]
    for kind in ("run-started", "tool-started", "tool-completed", "text-delta", "text-end", "run-finished"):
        assert kind in kinds
    assert kinds.index("tool-completed") < kinds.index("text-delta")
    assert "".join(e.delta for e in events if isinstance(e, TextDeltaEvent)) == "It is sunny in Lisbon."
    [finished] = [e for e in events if isinstance(e, RunFinishedEvent)]
    assert finished.usage == Usage(input_tokens=60, output_tokens=14, model_calls=2)

    first, second = fake.requests
    assert [t["function"]["name"] for t in first.body["tools"]] == ["get_weather"]
    assert first.body["messages"] == [
        {"role": "system", "content": "You help with the weather."},
        {"role": "user", "content": "Weather in Lisbon?"},
    ]
    # The second request carries the call (under the runtime's id) and its result.
    system, user, call, result = second.body["messages"]
    assert (system, user) == tuple(first.body["messages"])
    [requested] = call["tool_calls"]
    assert call["role"] == "assistant"
    assert requested["type"] == "function"
    assert requested["function"] == {"name": "get_weather", "arguments": '{"city":"Lisbon"}'}
    assert result["role"] == "tool"
    assert result["tool_call_id"] == requested["id"]
    assert "sunny" in result["content"]
