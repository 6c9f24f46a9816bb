"""A conversation with the demo model through a real ``Runtime``: say a line, read what came back."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

from gateway import Agent, Runtime, Turn
from gateway.demo import DemoModel, demo_tools
from gateway.events import (
    ApprovalRequestedEvent,
    RunEvent,
    TextEndEvent,
    ToolStartedEvent,
    UiEvent,
)
from gateway.models import AssistantMessage, ModelChunk, ModelRequest
from gateway.stores import MemoryStore
from tools import Actor, ToolLike

ALICE = Actor(id="alice", roles=["member"])
SECRET = b"demo-model-tests-secret-0123456789"
E = TypeVar("E", bound=RunEvent)


class RecordingModel:
    """The demo model, keeping every request it was asked (to read the offered tools)."""

    name = "demo"

    def __init__(self) -> None:
        self.model = DemoModel()
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        self.requests.append(request)
        return self.model.stream(request)

    def calls_asked(self) -> list[tuple[str, Any]]:
        """The tool calls of the newest step that called tools, with the arguments as the model sent them."""
        for message in reversed(self.requests[-1].messages):
            if isinstance(message, AssistantMessage) and message.tool_calls:
                return [(call.name, json.loads(call.arguments)) for call in message.tool_calls]
        return []

    def schema_of(self, tool: str) -> dict[str, Any]:
        (definition,) = [t for t in self.requests[-1].tools if t.name == tool]
        return definition.parameters


@dataclass
class Said:
    """What one line (or one decision) brought back."""

    status: str
    events: list[RunEvent]

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def text(self) -> str:
        return " ".join(e.text for e in self.of(TextEndEvent))

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        return [(e.tool, e.input) for e in self.of(ToolStartedEvent)]

    @property
    def components(self) -> list[str]:
        return [e.component for e in self.of(UiEvent)]


@dataclass
class Chat:
    """One thread of one actor with a runtime."""

    runtime: Runtime
    recorder: RecordingModel | None = None
    actor: Actor = ALICE
    thread_id: str = field(default_factory=lambda: f"t-{uuid.uuid4().hex[:12]}")
    seen: int = 0
    run_id: str = ""

    @property
    def model(self) -> RecordingModel:
        assert self.recorder is not None, "this chat's model records nothing"
        return self.recorder

    async def _collect(self, status: str) -> Said:
        events = [e async for e in self.runtime.events(self.thread_id, self.seen)]
        if events:
            self.seen = events[-1].seq
        return Said(status=status, events=events)

    async def say(self, text: str) -> Said:
        self.run_id = await self.runtime.start_turn(Turn(thread_id=self.thread_id, actor=self.actor, text=text))
        return await self._collect(await self.runtime.wait(self.run_id, timeout=10))

    async def decide(self, said: Said, *, approve: bool, reason: str | None = None) -> Said:
        (requested,) = said.of(ApprovalRequestedEvent)
        await self.runtime.decide(requested.tool_call_id, self.actor, approve=approve, reason=reason, via="web")
        return await self._collect(await self.runtime.wait(self.run_id, timeout=10))


MakeChat = Callable[..., Chat]


@pytest.fixture
async def make_chat() -> AsyncIterator[MakeChat]:
    """``make_chat(tools=None, agent=None)``: a chat with the demo model over ``tools`` (the demo's by default)."""
    made: list[Runtime] = []

    def make(tools: Sequence[ToolLike] | None = None, agent: Agent | None = None) -> Chat:
        model = RecordingModel()
        runtime = Runtime(
            tools=demo_tools(SECRET) if tools is None else tools,
            agents=[agent or Agent(name="assistant", instructions="Help.")],
            model=model,
            store=MemoryStore(),
        )
        made.append(runtime)
        return Chat(runtime=runtime, recorder=model)

    yield make
    for runtime in made:
        await runtime.aclose()
