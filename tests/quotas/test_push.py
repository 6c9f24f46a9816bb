"""The push channels (WhatsApp, Telegram) word the warning and the refusal in the person's language."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway import Agent, PushDelivery, PushOptions, PushTarget, Quota, Runtime, Settings, Turn, create_app
from gateway.stores import MemoryStore

from ..engine.conftest import weather_tool
from ..test_push_delivery import ACTOR, PREFIX, Harness, ScriptedPort
from ..usage.conftest import model, step, tool_step
from .test_quotas import spend


@pytest.fixture
async def kit(aiohttp_client: Any) -> AsyncIterator[tuple[Runtime, Any]]:
    scripted = model(tool_step("get_weather", {"city": "Faro"}, tokens=(400, 100)), step())
    runtime = Runtime(
        tools=[weather_tool()],
        agents=[Agent(name="assistant", quota=Quota(day=1000, warn_at=0.5))],
        model=scripted,
        store=MemoryStore(),
    )
    harness = Harness()
    settings = Settings(_env_file=None, secret="k" * 32, turn_burst=100)  # type: ignore[call-arg]
    await aiohttp_client(create_app(settings, runtime=runtime, channels=[harness]))
    yield runtime, harness.services
    await runtime.aclose()


@pytest.mark.parametrize(
    ("language", "warning", "refusal"),
    [
        ("en", "Heads-up: you have used 60% of your daily allowance of the assistant.", "today's allowance"),
        ("pt-BR", "Atenção: você já usou 60% da sua cota diária do assistente.", "cota de hoje"),
    ],
)
async def test_the_warning_and_the_refusal_in_the_persons_words(
    kit: tuple[Runtime, Any], language: str, warning: str, refusal: str
) -> None:
    runtime, services = kit
    await spend(runtime.store, 600, actor=ACTOR.key)
    target = PushTarget(thread_id=f"kit-{language}", address="ana", actor_id=ACTOR.id, language=language)
    port = ScriptedPort()
    delivery = PushDelivery(services, port, prefix=PREFIX, options=PushOptions(slow_after=0.0, lock_retry=0.01))
    await delivery.bind(target)
    delivery.start()
    try:
        run_id = await runtime.start_turn(Turn(thread_id=target.thread_id, actor=ACTOR, text="weather?"))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        delivery.notify(target.thread_id)
        async with asyncio.timeout(5):
            while not any(refusal in text for text in port.delivered):
                await delivery.idle()
                port.changed.clear()
                if not any(refusal in text for text in port.delivered):
                    await port.changed.wait()
        assert port.delivered[0] == warning
        assert refusal in port.delivered[-1]
    finally:
        await delivery.aclose()
