"""What a run costs: per step in the journal, per run on its record and its ``run-finished``, and
what the ledger is charged, once per step (a resumed run replays its journal, never charges it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateway import Agent, Gateway, GuardVerdict, ModelPrice, Runtime, Settings, StoreUnavailableError
from gateway._pricing import parse_pricing, run_cost
from gateway._usage import utc_day
from gateway.events import RunFinishedEvent
from gateway.stores import MemoryStore, ModelStepEntry, Store, UsageEntry, UsageTotals
from tools import UserError

from ..engine.conftest import all_events, purge_tool, until, weather_tool
from .conftest import ALICE, GPT, PRICES, cost, model, new_thread, step, tool_step, turn

DAYS = {"start": utc_day(time.time() - 86400), "end": utc_day(time.time() + 86400)}
"""Today, give or take a day (a run across midnight is still in it)."""


async def finished(runtime: Runtime, thread: str) -> list[RunFinishedEvent]:
    return [e for e in await all_events(runtime, thread) if isinstance(e, RunFinishedEvent)]


async def test_a_priced_run_costs_its_steps_on_the_record_the_event_and_the_journal(ledger_store: Store) -> None:
    scripted = model(tool_step("get_weather", {"city": "Porto"}, tokens=(1200, 30)), step(tokens=(1500, 80)))
    async with Runtime(tools=[weather_tool()], model=scripted, store=ledger_store, pricing=PRICES) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "completed"
        expected = cost((1200, 30)) + cost((1500, 80))
        record = await runtime.get_run(run_id)
        assert record.cost_usd == pytest.approx(expected)
        assert [e.cost_usd for e in await finished(runtime, thread)] == [pytest.approx(expected)]
        journal = [e for e in await ledger_store.read_journal(thread, run_id) if isinstance(e, ModelStepEntry)]
        assert [(e.model, e.cost_usd) for e in journal] == [
            (GPT, pytest.approx(cost((1200, 30)))),
            (GPT, pytest.approx(cost((1500, 80)))),
        ]
        rows = await ledger_store.usage_rows(**DAYS, actor_key=ALICE.key)
        assert [(r.model, r.input_tokens, r.output_tokens, r.steps) for r in rows] == [(GPT, 2700, 110, 2)]
        assert rows[0].cost_usd == pytest.approx(expected)


async def test_an_unpriced_model_costs_null_never_zero(ledger_store: Store) -> None:
    async with Runtime(model=model(step(), name="scripted"), store=ledger_store, pricing=PRICES) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert (await runtime.get_run(run_id)).cost_usd is None
        [event] = await finished(runtime, thread)
        assert event.cost_usd is None
        assert '"cost_usd":null' in event.model_dump_json()  # said, as null
        [row] = await ledger_store.usage_rows(**DAYS, actor_key=ALICE.key)
        assert (row.cost_usd, row.unpriced_steps, row.input_tokens) == (None, 1, 1000)


async def test_no_pricing_at_all_prices_nothing() -> None:
    async with Runtime(model=model(step())) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert (await runtime.get_run(run_id)).cost_usd is None


def test_a_run_with_one_unpriced_step_among_priced_ones_costs_null() -> None:
    priced = ModelStepEntry(step=0, message_id="m0", model=GPT, cost_usd=0.01)
    unpriced = ModelStepEntry(step=1, message_id="m1", model="scripted", cost_usd=None)
    direct = ModelStepEntry(step=0, message_id="m2")  # a direct call: no model, no cost
    assert run_cost([priced, priced]) == pytest.approx(0.02)
    assert run_cost([priced, unpriced]) is None
    assert run_cost([direct]) is None
    assert run_cost([direct, priced]) == pytest.approx(0.01)


async def test_a_run_resumed_after_an_approval_is_charged_each_step_once(ledger_store: Store) -> None:
    executed: list[str] = []
    scripted = model(tool_step("purge_cache", {"key": "k"}, tokens=(1000, 50)), step(tokens=(2000, 70)))
    async with Runtime(tools=[purge_tool(executed)], model=scripted, store=ledger_store, pricing=PRICES) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
        parked = await finished(runtime, thread)
        assert parked[-1].cost_usd == pytest.approx(cost((1000, 50)))  # so far
        [pending] = await runtime.pending_approvals(thread)
        await runtime.decide(pending.tool_call_id, ALICE, approve=True, via="web")
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert len(executed) == 1 and scripted.calls == 2
        total = cost((1000, 50)) + cost((2000, 70))
        events = await finished(runtime, thread)
        assert [e.status for e in events] == ["awaiting-approval", "completed"]
        assert events[-1].cost_usd == pytest.approx(total)  # the replayed step counts, once
        rows = await ledger_store.usage_rows(**DAYS, actor_key=ALICE.key)
        assert [(r.input_tokens, r.output_tokens, r.steps) for r in rows] == [(3000, 120, 2)]
        assert rows[0].cost_usd == pytest.approx(total)
        totals = await ledger_store.usage_totals(ALICE.key, rows[0].day)
        assert totals.day_tokens == totals.month_tokens == 3120


async def test_two_agents_one_priced_one_not_keep_their_own_ledger_lines() -> None:
    priced = Agent(name="sales", model=model(step(tokens=(400, 100))))
    unpriced = Agent(name="notes", model=model(step(tokens=(300, 10)), name="demo"))
    async with Runtime(agents=[priced, unpriced], pricing=PRICES) as runtime:
        for agent in ("sales", "notes"):
            thread = new_thread()
            run_id = await runtime.start_turn(turn(thread, agent=agent))
            assert await runtime.wait(run_id, timeout=5) == "completed"
        rows = await runtime.store.usage_rows(**DAYS)
        assert [(r.agent, r.model, r.cost_usd) for r in rows] == [
            ("notes", "demo", None),
            ("sales", GPT, pytest.approx(cost((400, 100)))),
        ]


def test_pricing_tables_refuse_what_is_no_price() -> None:
    assert parse_pricing('{"openai:gpt-4o": {"input": 2.5, "output": 10}}') == {GPT: ModelPrice(2.5, 10)}
    for bad in (
        '{"m": {"input": -1, "output": 1}}',
        '{"m": {"input": 1}}',
        '{"m": 3}',
        "[1]",
        '{"m": {"input": "x", "output": 1}}',
    ):
        with pytest.raises(ValueError):
            parse_pricing(bad)
    with pytest.raises(ValueError, match="neither JSON nor a readable file"):
        parse_pricing("/nonexistent/prices.json")
    with pytest.raises(UserError):
        ModelPrice(float("nan"), 1)
    with pytest.raises(UserError):
        Runtime(pricing={GPT: {"input": 1, "output": 2}})  # type: ignore[dict-item]


async def test_the_pricing_setting_reads_json_or_a_file(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text('{"openai:gpt-4o": {"input": 2.5, "output": 10}}')
    assert Settings(_env_file=None, pricing=str(table)).pricing == PRICES  # type: ignore[call-arg]
    assert Settings(_env_file=None, pricing=" ").pricing is None  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="is not valid JSON"):
        Settings(_env_file=None, pricing="{bad")  # type: ignore[call-arg]
    runtime = Gateway(pricing=PRICES).runtime(Settings(_env_file=None))  # type: ignore[call-arg]
    assert runtime.usage.pricing.table == PRICES
    await runtime.aclose()


class LedgerAway(MemoryStore):
    """A memory store whose ledger cannot be written (the rest of it works)."""

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        raise StoreUnavailableError("the ledger is away")


async def test_a_ledger_that_cannot_be_written_stops_the_run_before_its_next_step(caplog: Any) -> None:
    scripted = model(tool_step("get_weather", {"city": "Porto"}), step())
    async with Runtime(tools=[weather_tool()], model=scripted, store=LedgerAway(), store_retry=0.05) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        await until(lambda: "it resumes when its lease lapses" in caplog.text)
        assert scripted.calls == 1  # never a second step while the first is not charged
        assert (await runtime.get_run(run_id)).status == "running"  # left to its lease


async def test_a_ledger_away_at_the_runs_last_batch_is_logged_and_the_end_stands(caplog: Any) -> None:
    async with Runtime(model=model(step()), store=LedgerAway(), store_retry=0.05) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "completed"
        assert "1 step(s) journaled but not charged: the store was away" in caplog.text


class _RefuseAll:
    """An output guard that refuses every text."""

    async def check_output(self, text: str, ctx: Any) -> GuardVerdict:
        return GuardVerdict.refuse("not for this person")


async def test_a_step_an_output_guard_refused_is_still_charged_and_costed(ledger_store: Store) -> None:
    # The model was called and its tokens spent: the person saw nothing, but the budget and the
    # bill must count it (else refused answers would be free and quotas would not hold).
    agent = Agent(name="default", output_guards=[_RefuseAll()])
    scripted = model(step("A secret.", tokens=(1000, 200)))
    async with Runtime(agents=[agent], model=scripted, store=ledger_store, pricing=PRICES) as runtime:
        thread = new_thread()
        run_id = await runtime.start_turn(turn(thread))
        assert await runtime.wait(run_id, timeout=5) == "failed"
        record = await runtime.get_run(run_id)
        assert record.error is not None and record.error["code"] == "output_refused"
        assert record.usage.input_tokens == 1000
        assert record.cost_usd == pytest.approx(cost((1000, 200)))
        assert [e.cost_usd for e in await finished(runtime, thread)] == [pytest.approx(cost((1000, 200)))]
        [row] = await ledger_store.usage_rows(**DAYS, actor_key=ALICE.key)
        assert (row.input_tokens, row.output_tokens, row.steps) == (1000, 200, 1)
        journal = [e for e in await ledger_store.read_journal(thread, run_id) if isinstance(e, ModelStepEntry)]
        assert [(e.text, e.calls) for e in journal] == [(None, [])]  # what nobody saw is not kept
        assert "A secret." not in str(await ledger_store.get_messages(thread))


async def test_a_providers_negative_or_absurd_token_count_is_bounded_not_a_failed_run() -> None:
    # A provider's count is data: a negative one must neither fail the run (UsageEntry refuses a
    # negative cost; a Prometheus counter refuses a negative increment) nor be charged below 0.
    from gateway._metrics import Metrics

    scripted = model(step(tokens=(-5000, 10)), step(tokens=(10**12, 10**12)))
    async with Runtime(model=scripted, pricing=PRICES) as runtime:
        metrics = Metrics()
        runtime.observers.append(metrics)
        for _ in range(2):
            run_id = await runtime.start_turn(turn(new_thread()))
            assert await runtime.wait(run_id, timeout=5) == "completed"
        rows = await runtime.store.usage_rows(**DAYS, actor_key=ALICE.key)
        assert [(r.steps, r.input_tokens) for r in rows] == [(2, 10**9)]
        assert rows[0].cost_usd is not None and rows[0].cost_usd >= 0
