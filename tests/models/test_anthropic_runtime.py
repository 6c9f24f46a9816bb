"""End to end: a ``Runtime`` driving ``AnthropicModel`` against the fake Messages API, with a read tool."""

from __future__ import annotations

import asyncio
import re

from pydantic import BaseModel

import tools
from gateway import Agent, Runtime, Turn
from gateway.events import RunFinishedEvent, TextDeltaEvent, Usage
from tests.models.conftest import MakeAnthropic
from tests.models.fake_anthropic import FakeAnthropic, delta, end, json_delta, message, start, stop, tool_start

SCHEMA = {
    "properties": {"city": {"title": "City", "type": "string"}},
    "required": ["city"],
    "title": "CityInput",
    "type": "object",
}
"""``CityInput``'s JSON schema, as the tool's ``input_schema``."""


class CityInput(BaseModel):
    city: str


@tools.ai_tool(description="The weather in a city.", input=CityInput, kind="read")
class GetWeatherTool:
    async def execute(self, input: CityInput, ctx: tools.ToolContext) -> dict[str, str]:
        return {"city": input.city, "sky": "sunny"}


async def test_a_run_calls_a_tool_sends_its_result_back_then_answers(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(
            start(20),
            tool_start(0, "toolu_01A", "get_weather"),
            json_delta(0, '{"city":'),
            json_delta(0, ' "Lisbon"}'),
            stop(0),
            delta("tool_use", 8),
            end(),
        ),
        fake_anthropic.sse(*message("It is sunny ", "in Lisbon.", input_tokens=40, output_tokens=6)),
    )
    agent = Agent(name="default", instructions="You help with the weather.")
    async with Runtime(tools=[GetWeatherTool], agents=[agent], model=make_anthropic(max_tokens=1024)) as rt:
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

    first, second = fake_anthropic.requests
    tools_sent = [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": SCHEMA,
        }
    ]
    question = {"role": "user", "content": [{"type": "text", "text": "Weather in Lisbon?"}]}
    assert first.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You help with the weather.",
        "messages": [question],
        "tools": tools_sent,
        "stream": True,
    }
    # The second request carries the call (under the runtime's id) and its result as tool_result.
    [use] = second.body["messages"][1]["content"]
    assert re.fullmatch(r"[A-Za-z0-9_-]+", use["id"])  # the runtime's own id, as the API accepts ids
    assert second.body == {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You help with the weather.",
        "messages": [
            question,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": use["id"], "name": "get_weather", "input": {"city": "Lisbon"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use["id"], "content": '{"city": "Lisbon", "sky": "sunny"}'}
                ],
            },
        ],
        "tools": tools_sent,
        "stream": True,
    }
