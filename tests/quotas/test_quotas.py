"""Token budgets: checked before each model step against the store's totals, refused at send time,
a warning once per run near the limit, and never skipped when the store cannot be read."""

from __future__ import annotations

from typing import Any

import pytest

from gateway import Agent, Gateway, ModelPrice, Quota, QuotaExceededError, Runtime, Settings, StoreUnavailableError
from gateway._push._texts import texts_for
from gateway._usage import utc_day
from gateway.events import QuotaWarningEvent, RunErrorEvent, RunFinishedEvent
from gateway.stores import MemoryStore, Store, UsageEntry, UsageTotals
from tools import UserError

from ..engine.conftest import all_events, purge_tool, types, until, weather_tool
from ..usage.conftest import ALICE, BOB, GPT, model, new_thread, step, tool_step, turn


async def spend(store: Store, tokens: int, actor: str = "alice", agent: str = "other") -> None:
    """``tokens`` already used today by ``actor`` (with another agent: budgets span agents)."""
    entry = UsageEntry(actor_key=actor, day=utc_day(), agent=agent, model=GPT, input_tokens=tokens, output_tokens=0)
    await store.add_usage(entry)


async def test_a_budget_used_up_mid_run_ends_it_before_the_next_model_call() -> None:
    scripted = model(tool_step("get_weather", {"city": "Faro"}, tokens=(900, 200)), step())
    async with Runtime(tools=[weather_tool()], model=scripted, quota=Quota(day=1000)) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        assert scripted.calls == 1  # the second step was never asked for
        events = await all_events(runtime, thread)
        [error] = [e for e in events if isinstance(e, RunErrorEvent)]
        assert (error.code, error.period) == ("quota_exceeded", "day")
        assert '"period":"day"' in error.model_dump_json()
        assert "today" in error.message
        assert types(events)[-2:] == ["run-error", "run-finished"]
        assert (await runtime.get_run(run_id)).error == {"code": "quota_exceeded", "message": error.message}

        with pytest.raises(QuotaExceededError) as refused:  # refused at once: not even queued
            await runtime.send(turn(thread))
        assert (refused.value.period, refused.value.used, refused.value.limit) == ("day", 1100, 1000)
        assert refused.value.status == 429 and refused.value.code == "quota_exceeded"
        with pytest.raises(QuotaExceededError):
            await runtime.start_turn(turn(new_thread()))
        assert scripted.calls == 1
        assert len(await runtime.thread_runs(thread)) == 1
        bob = await runtime.start_turn(turn(new_thread(), actor=BOB))  # someone else's budget is theirs
        assert await runtime.wait(bob, timeout=5) == "completed"


async def test_other_errors_carry_no_period() -> None:
    async with Runtime(model=model()) as runtime:  # a script out of steps: a model error
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        [error] = [e for e in await all_events(runtime, thread) if isinstance(e, RunErrorEvent)]
        assert error.period is None and "period" not in error.model_dump_json()


async def test_the_month_budget_counts_across_agents_and_the_agent_in_use_decides() -> None:
    store = MemoryStore()
    await spend(store, 5000)
    strict = Agent(name="strict", model=model(step()), quota=Quota(month=5000))
    loose = Agent(name="loose", model=model(step()))
    async with Runtime(agents=[loose, strict], store=store, quota=Quota(month=100_000)) as runtime:
        with pytest.raises(QuotaExceededError) as refused:
            await runtime.send(turn(new_thread(), agent="strict"))
        assert refused.value.period == "month"
        assert "this month" in str(refused.value)
        run_id = await runtime.start_turn(turn(new_thread(), agent="loose"))  # the default quota: room left
        assert await runtime.wait(run_id, timeout=5) == "completed"


async def test_near_the_limit_a_run_warns_once_and_the_metric_counts_it(make_client: Any) -> None:
    scripted = model(tool_step("get_weather", {"city": "Faro"}, tokens=(100, 10)), step(tokens=(100, 10)))
    runtime = Runtime(tools=[weather_tool()], model=scripted, quota=Quota(day=10_000, warn_at=0.5))
    await spend(runtime.store, 6000)
    client = await make_client(runtime)
    thread = new_thread()
    run_id = await runtime.start_turn(turn(thread))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    events = await all_events(runtime, thread)
    warnings = [e for e in events if isinstance(e, QuotaWarningEvent)]
    assert [(w.period, w.used, w.limit) for w in warnings] == [("day", 6000, 10_000)]  # once, before step 0
    assert types(events).index("quota-warning") < types(events).index("tool-started")
    assert (await runtime.get_run(run_id)).quota_warned is True
    text = await (await client.get("/metrics")).text()
    assert 'agora_quota_events_total{agent="default",outcome="warning",period="day"} 1.0' in text
    second = await runtime.start_turn(turn(thread))  # a new run warns again (once)
    assert await runtime.wait(second, timeout=5) == "failed"  # the script ran out: no more steps
    assert len([e for e in await all_events(runtime, thread) if isinstance(e, QuotaWarningEvent)]) == 2


async def test_a_run_resumed_after_an_approval_does_not_warn_again() -> None:
    scripted = model(tool_step("purge_cache", {"key": "k"}, tokens=(10, 1)), step(tokens=(10, 1)))
    async with Runtime(tools=[purge_tool([])], model=scripted, quota=Quota(day=1000, warn_at=0.5)) as runtime:
        await spend(runtime.store, 600)
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
        [pending] = await runtime.pending_approvals(thread)
        await runtime.decide(pending.tool_call_id, ALICE, approve=True, via="web")
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert types(await all_events(runtime, thread)).count("quota-warning") == 1


class TotalsAway(MemoryStore):
    """A memory store whose usage totals cannot be read from the ``away_from``-th read until ``back``."""

    def __init__(self, away_from: int) -> None:
        super().__init__()
        self.reads = 0
        self.refusals = 0
        self.away_from = away_from
        self.back = False

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        self.reads += 1
        if self.reads >= self.away_from and not self.back:
            self.refusals += 1
            raise StoreUnavailableError("the store is away")
        return await super().usage_totals(actor_key, day)


async def test_a_send_whose_quota_cannot_be_read_is_refused_not_run_unmetered() -> None:
    store = TotalsAway(away_from=1)
    scripted = model(step())
    async with Runtime(model=scripted, store=store, quota=Quota(day=1000)) as runtime:
        thread = new_thread()
        with pytest.raises(StoreUnavailableError):
            await runtime.send(turn(thread))
        assert scripted.calls == 0 and await runtime.thread_runs(thread) == []


async def test_a_step_whose_quota_cannot_be_read_waits_for_the_store_then_runs() -> None:
    store = TotalsAway(away_from=2)  # the send's read passes; the step's check finds the store away
    scripted = model(step())
    async with Runtime(model=scripted, store=store, quota=Quota(day=1000)) as runtime:
        run_id = await runtime.start_turn(turn(new_thread()))
        await until(lambda: store.refusals >= 3)  # tried again and again
        assert scripted.calls == 0  # never asked unmetered
        store.back = True
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert scripted.calls == 1


async def test_a_step_whose_quota_stays_unreadable_is_left_to_its_lease_and_resumed(caplog: Any) -> None:
    store = TotalsAway(away_from=2)
    scripted = model(step())
    async with Runtime(
        model=scripted, store=store, quota=Quota(day=1000), store_retry=0.1, lease_ttl=0.3, takeover_grace=0.05
    ) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        await until(lambda: "it resumes when its lease lapses" in caplog.text)
        assert scripted.calls == 0
        assert (await runtime.get_run(run_id)).status == "running"
        assert "run-finished" not in types(await all_events(runtime, thread))
        store.back = True  # a sweep takes the lapsed run over and checks again
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert scripted.calls == 1


def test_quota_and_agent_validation() -> None:
    for bad in (
        {"day": 0},
        {"month": -1},
        {"day": 1.5},
        {"day": True},
        {"warn_at": 0},
        {"warn_at": 1.5},
        {"warn_at": float("nan")},
    ):
        with pytest.raises(UserError):
            Quota(**bad)
    with pytest.raises(UserError, match="quota must be a Quota"):
        Agent(name="a", quota={"day": 10})  # type: ignore[arg-type]
    assert Quota(day=10).limits == [("day", 10)]
    with pytest.raises(UserError, match="quota must be a Quota"):
        Runtime(model=model(), quota={"day": 10})  # type: ignore[arg-type]


async def test_the_default_quota_is_a_setting() -> None:
    settings = Settings(_env_file=None, quota_day=500, quota_warn_at=0.9)  # type: ignore[call-arg]
    assert settings.default_quota() == Quota(day=500, warn_at=0.9)
    assert Settings(_env_file=None).default_quota() is None  # type: ignore[call-arg]
    runtime = Gateway(agents=[Agent(name="a", model=model())]).runtime(settings)
    assert runtime.usage.quota == Quota(day=500, warn_at=0.9)
    await runtime.aclose()


def test_the_push_channels_word_it_in_each_language() -> None:
    en, pt = texts_for("en"), texts_for("pt-BR")
    assert "today" in en.quota_exceeded("day") and "month" in en.quota_exceeded("month")
    assert "hoje" in pt.quota_exceeded("day") and "mês" in pt.quota_exceeded("month")
    assert en.quota_near("day", 850, 1000) == "Heads-up: you have used 85% of your daily allowance of the assistant."
    assert pt.quota_near("month", 900, 1000) == "Atenção: você já usou 90% da sua cota mensal do assistente."


async def test_run_finished_of_a_quota_stop_costs_what_ran() -> None:
    scripted = model(tool_step("get_weather", {"city": "Faro"}, tokens=(900, 200)), step())
    prices = {GPT: ModelPrice(1.0, 1.0)}
    async with Runtime(tools=[weather_tool()], model=scripted, quota=Quota(day=1000), pricing=prices) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        [done] = [e for e in await all_events(runtime, thread) if isinstance(e, RunFinishedEvent)]
        assert done.cost_usd == pytest.approx(1100 / 1e6)
