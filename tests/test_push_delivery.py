"""``PushDelivery`` on its own: back-off, the lease, and the tasks it owns.

The gateway is a real app (``create_app``) with a channel whose port records what it is asked to
send and answers as the test scripts it (an in-process stand-in for a provider). The delivery is
made by the test and not started, so a drain runs exactly when the test calls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from pydantic import BaseModel

from gateway import (
    Agent,
    ApprovalTokens,
    Channel,
    ChannelServices,
    DeliveredUi,
    PushDelivery,
    PushOptions,
    PushPort,
    PushSendError,
    PushState,
    PushTarget,
    Runtime,
    Settings,
    create_app,
)
from gateway.events import ApprovalRequestedEvent, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore
from tools import Actor, ToolContext, ToolPresentation, define_tool

PREFIX = "kit"
ACTOR = Actor(id="kit:ana", roles=["member"])
TARGET = PushTarget(thread_id="kit-thread-1", address="ana", actor_id=ACTOR.id)


@dataclass(frozen=True)
class Part:
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(kw_only=True)
class ScriptedPort(PushPort[Part]):
    """Sends by appending to ``sent``; ``fail`` makes every send a retryable failure."""

    fail: bool = False
    attempts: list[str] = field(default_factory=list)
    delivered: list[str] = field(default_factory=list)
    on_send: Any = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def text_parts(self, target: PushTarget, markdown: str) -> list[Part]:
        return [Part(markdown)]

    async def media_parts(self, target: PushTarget, delivered: DeliveredUi) -> list[Part]:
        return [Part(delivered.text or "")]

    async def approval_parts(
        self, target: PushTarget, event: ApprovalRequestedEvent, tokens: ApprovalTokens, number: int | None
    ) -> list[Any]:
        return [Part(event.confirmation.title)]

    async def send(self, target: PushTarget, part: Part) -> str | None:
        self.attempts.append(part.text)
        self.changed.set()
        if self.on_send is not None:
            await self.on_send(part)
        if self.fail:
            raise PushSendError("provider down", retryable=True)
        self.delivered.append(part.text)
        return None


class Harness(Channel):
    name = "kit"

    def setup(self, app: web.Application, services: ChannelServices) -> None:
        self.services = services


@dataclass
class Kit:
    runtime: Runtime
    services: ChannelServices

    def delivery(self, port: ScriptedPort, **options: Any) -> PushDelivery[Part]:
        timing = PushOptions(**({"slow_after": 0.0, "lock_retry": 0.01} | options))
        return PushDelivery(self.services, port, prefix=PREFIX, options=timing)

    async def turn(self) -> None:
        run_id = await self.runtime.start_turn(Turn(thread_id=TARGET.thread_id, actor=ACTOR, text="hi"))
        assert await self.runtime.wait(run_id, timeout=10) == "completed"


class LookupInput(BaseModel):
    what: str = "order"


@define_tool(
    name="lookup",
    description="Look up.",
    input=LookupInput,
    kind="read",
    presentation=ToolPresentation(done="Looked up"),
)
async def lookup(input: LookupInput, ctx: ToolContext) -> dict[str, Any]:
    return {}


@pytest.fixture
async def kit(aiohttp_client: Any) -> AsyncIterator[Kit]:
    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="lookup", args={})]), ScriptStep(text="Two.")]
        + [ScriptStep(text=f"Reply {n}.") for n in range(5)]
    )
    runtime = Runtime(tools=[lookup], agents=[Agent(name="assistant")], model=model, store=MemoryStore())
    harness = Harness()
    settings = Settings(_env_file=None, secret="k" * 32, turn_burst=100)  # type: ignore[call-arg]
    await aiohttp_client(create_app(settings, runtime=runtime, channels=[harness]))
    yield Kit(runtime=runtime, services=harness.services)
    await runtime.aclose()


async def test_new_events_do_not_cut_a_failed_send_s_back_off_short(kit: Kit) -> None:
    """During an outage the part waits ``redeliver_after`` between rounds, however busy the thread."""
    port = ScriptedPort(fail=True)
    delivery = kit.delivery(port, redeliver_after=0.3, max_rounds=3)
    await delivery.bind(TARGET)
    await kit.turn()
    delivery.start()
    try:
        delivery.notify(TARGET.thread_id)
        await delivery.idle()
        rounds = len(port.attempts)
        assert rounds >= 1
        events = await kit.runtime.read_events(TARGET.thread_id)
        for _ in range(5):  # the run (or another process) keeps writing while the provider is down
            delivery.events_written(TARGET.thread_id, events[-2:])
            await delivery.idle()
        assert len(port.attempts) == rounds  # nothing tried again before the back-off ends
        assert await PushState(kit.runtime.store, PREFIX).failures(TARGET.thread_id) == []
        port.fail = False
        async with asyncio.timeout(10):
            while len(port.delivered) < 2:  # the timer of the next round drains the thread
                port.changed.clear()
                await port.changed.wait()
                await delivery.idle()
        assert port.delivered == ["✓ Looked up", "Two."]
    finally:
        await delivery.aclose()


async def test_a_drain_stops_when_its_lease_was_taken_over(kit: Kit) -> None:
    """A lease that lapsed mid-drain (and another process took) ends the drain: no doubled sends."""
    port = ScriptedPort()
    delivery = kit.delivery(port)
    state = delivery.state
    lock = state.key("lock", TARGET.thread_id)

    async def lapse(part: Part) -> None:
        if len(port.attempts) == 1:  # our lease ran out while this send took long; another took it
            await state.delete(lock)
            assert await state.claim(lock, ttl=60, value="another-process")

    port.on_send = lapse
    await delivery.bind(TARGET)
    await kit.turn()
    await delivery.drain(TARGET.thread_id)
    assert port.delivered == ["✓ Looked up"]  # the other process delivers "Two." under its lease
    assert await state.get(lock) == "another-process"
    cursor = await state.cursor(TARGET.thread_id)
    assert cursor is not None and cursor.part == 0


async def test_a_task_the_delivery_owns_that_fails_is_logged(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    delivery = kit.delivery(ScriptedPort())
    delivery.start()

    async def broken() -> None:
        raise RuntimeError("the webhook's handler broke")

    with caplog.at_level(logging.ERROR, logger="gateway.push"):
        delivery.spawn(broken(), name="agora-test-broken")
        await delivery.idle()
    await delivery.aclose()
    [record] = [r for r in caplog.records if r.name == "gateway.push"]
    assert "agora-test-broken" in record.getMessage() and record.exc_info is not None


class BrokenHookPort(ScriptedPort):
    """A port whose ``tool-completed`` hook has a bug."""

    async def on_tool_completed(self, event: Any) -> Any:
        raise KeyError("a bug in the port")


async def test_a_port_bug_is_a_round_then_recorded_and_passed(kit: Kit, caplog: pytest.LogCaptureFixture) -> None:
    """A hook that raises is tried ``max_rounds`` times, then recorded; the thread's next events still go."""
    port = BrokenHookPort()
    delivery = kit.delivery(port, redeliver_after=0.05, max_rounds=3)
    await delivery.bind(TARGET)
    await kit.turn()
    delivery.start()
    try:
        with caplog.at_level(logging.ERROR, logger="gateway.push"):
            delivery.notify(TARGET.thread_id)
            async with asyncio.timeout(10):
                while "Two." not in port.delivered:
                    port.changed.clear()
                    await port.changed.wait()
        await delivery.idle()
        assert port.delivered == ["Two."]  # the broken event is passed, the rest is delivered once
        [failure] = await delivery.state.failures(TARGET.thread_id)
        assert (failure["event"], failure["reason"]) == ("tool-completed", "failed")
        assert "a bug in the port" in failure["error"]
        hook_errors = [r for r in caplog.records if "hook failed" in r.getMessage()]
        assert len(hook_errors) == 3  # one line per round, each with its traceback
    finally:
        await delivery.aclose()


async def test_a_send_that_raises_anything_is_retried_in_rounds_then_recorded(kit: Kit) -> None:
    """A send failing with an error the port does not map never loops forever: rounds, then a record."""
    port = ScriptedPort()

    async def explode(part: Part) -> None:
        if part.text == "Two.":
            raise ValueError("unexpected answer")

    port.on_send = explode
    delivery = kit.delivery(port, redeliver_after=0.05, max_rounds=2)
    await delivery.bind(TARGET)
    await kit.turn()
    delivery.start()
    try:
        delivery.notify(TARGET.thread_id)
        async with asyncio.timeout(10):
            while port.attempts.count("Two.") < 2:  # the last round's attempt
                port.changed.clear()
                await port.changed.wait()
        await delivery.idle()  # that round's drain records the part as given up
        assert port.attempts.count("Two.") == 2 and port.delivered == ["✓ Looked up"]
        [failure] = await delivery.state.failures(TARGET.thread_id)
        assert failure["reason"] == "failed" and failure["message"] == {"text": "Two."}
        cursor = await delivery.state.cursor(TARGET.thread_id)
        assert cursor is not None and cursor.seq == await kit.runtime.last_seq(TARGET.thread_id)
    finally:
        await delivery.aclose()
