"""A model step whose text an output guard refused is paid for: it is charged like any other."""

from __future__ import annotations

import pytest

from gateway import Agent, BlockedPatterns, ModelPrice, Quota, QuotaExceededError, Runtime
from gateway._usage import utc_day
from gateway.events import RunFinishedEvent
from gateway.models import ToolCallRequest

from ..engine.conftest import all_events, weather_tool
from ..usage.conftest import ALICE, GPT, model, new_thread, step, turn


async def test_a_refused_step_is_charged_and_counts_against_the_budget() -> None:
    scripted = model(step("my password is hunter2", tokens=(1000, 200)))
    agent = Agent(name="a", model=scripted, output_guards=[BlockedPatterns([r"\bpassword\b"])])
    prices = {GPT: ModelPrice(input_per_million=2.0, output_per_million=10.0)}
    async with Runtime(agents=[agent], pricing=prices, quota=Quota(day=1000)) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        assert (await runtime.get_run(run_id)).error["code"] == "output_refused"
        totals = await runtime.store.usage_totals(ALICE.key, utc_day())
        assert (totals.day_tokens, totals.month_tokens) == (1200, 1200)
        [finished] = [e for e in await all_events(runtime, thread) if isinstance(e, RunFinishedEvent)]
        assert finished.cost_usd == pytest.approx(0.004)  # 1000 * 2 / 1e6 + 200 * 10 / 1e6
        with pytest.raises(QuotaExceededError):  # the budget is used up: refused at send
            await runtime.send(turn(new_thread()))


async def test_a_refused_step_with_calls_runs_none_of_them_and_keeps_nothing_in_the_history() -> None:
    ran: list[str] = []
    tool = weather_tool(ran)
    call = ToolCallRequest(name="get_weather", args={"city": "Faro"})
    scripted = model(step("the password is x", calls=[call]), step("never asked"))
    agent = Agent(name="a", model=scripted, output_guards=[BlockedPatterns([r"\bpassword\b"])])
    async with Runtime(agents=[agent], tools=[tool]) as runtime:
        thread = new_thread()
        assert await runtime.wait(await runtime.start_turn(turn(thread)), timeout=5) == "failed"
        assert ran == [] and scripted.calls == 1
        assert [m.role for m in await runtime.store.get_messages(thread)] == ["user"]
        totals = await runtime.store.usage_totals(ALICE.key, utc_day())
        assert totals.day_tokens == 1200
