"""The usage ledger and the rate-limit buckets, on every store (memory, Redis, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from gateway import StoreUnavailableError
from gateway._usage import UsageMeter, utc_day
from gateway.events import Usage
from gateway.stores import MAX_USAGE_DAYS, ModelStepEntry, PostgresStore, Store, UsageEntry, UsageRow, UsageTotals

from ._helpers import new_run
from ._server import free_port
from ._sql_support import SqlStore, reopen


def step(
    actor: str = "acme/u1",
    day: str = "2026-12-01",
    *,
    agent: str = "helper",
    model: str = "m1",
    tokens: tuple[int, int] = (10, 5),
    cost: float | None = None,
    write_id: str | None = None,
) -> UsageEntry:
    return UsageEntry(
        actor_key=actor,
        day=day,
        agent=agent,
        model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost_usd=cost,
        write_id=write_id,
    )


async def test_totals_add_up_per_day_and_per_month(store: Store) -> None:
    assert await store.add_usage(step(day="2026-11-30", tokens=(100, 20))) == UsageTotals(
        day_tokens=120, month_tokens=120
    )
    assert await store.add_usage(step(day="2026-12-01", tokens=(10, 5))) == UsageTotals(day_tokens=15, month_tokens=15)
    assert await store.add_usage(step(day="2026-12-01", model="m2", tokens=(1, 2))) == UsageTotals(
        day_tokens=18, month_tokens=18
    )
    assert await store.add_usage(step(day="2026-12-02", tokens=(0, 7))) == UsageTotals(day_tokens=7, month_tokens=25)
    await store.add_usage(step("acme/u2", day="2026-12-01", tokens=(1000, 1000)))  # another actor's: apart

    assert await store.usage_totals("acme/u1", "2026-12-01") == UsageTotals(day_tokens=18, month_tokens=25)
    assert await store.usage_totals("acme/u1", "2026-12-03") == UsageTotals(day_tokens=0, month_tokens=25)
    assert await store.usage_totals("acme/u1", "2026-11-15") == UsageTotals(day_tokens=0, month_tokens=120)
    assert await store.usage_totals("acme/u2", "2026-12-01") == UsageTotals(day_tokens=2000, month_tokens=2000)
    assert await store.usage_totals("nobody", "2026-12-01") == UsageTotals()


async def test_concurrent_additions_are_each_counted_once(store: Store) -> None:
    entries = [step(model=f"m{index % 3}", tokens=(index, 1), cost=0.001) for index in range(40)]
    await asyncio.gather(*(store.add_usage(entry) for entry in entries))
    assert await store.usage_totals("acme/u1", "2026-12-01") == UsageTotals(
        day_tokens=sum(range(40)) + 40, month_tokens=sum(range(40)) + 40
    )
    rows = await store.usage_rows(start="2026-12-01", end="2026-12-01")
    assert [row.steps for row in rows] == [14, 13, 13]
    assert sum(row.input_tokens for row in rows) == sum(range(40))
    assert sum(row.cost_usd or 0 for row in rows) == pytest.approx(0.04, abs=1e-9)


async def test_rows_are_filtered_by_range_and_actor_and_ordered(store: Store) -> None:
    for entry in [
        step("acme/u2", "2026-12-02", agent="b", model="m1"),
        step("acme/u1", "2026-12-02", agent="b", model="m2"),
        step("acme/u1", "2026-12-02", agent="a", model="m9"),
        step("acme/u1", "2026-12-02", agent="b", model="m1"),
        step("acme/u1", "2026-11-30"),
        step("acme/u1", "2026-12-05"),
        step("acme/u2", "2026-12-01", agent="z"),
        step("acme/u1", "2026-12-01", agent="z"),
        step("acme/u1", "2026-12-01", agent="z", tokens=(1, 1)),  # the same line again
    ]:
        await store.add_usage(entry)

    rows = await store.usage_rows(start="2026-12-01", end="2026-12-02")
    assert [(r.day, r.actor_key, r.agent, r.model) for r in rows] == [
        ("2026-12-01", "acme/u1", "z", "m1"),
        ("2026-12-01", "acme/u2", "z", "m1"),
        ("2026-12-02", "acme/u1", "a", "m9"),
        ("2026-12-02", "acme/u1", "b", "m1"),
        ("2026-12-02", "acme/u1", "b", "m2"),
        ("2026-12-02", "acme/u2", "b", "m1"),
    ]
    assert rows[0] == UsageRow(
        day="2026-12-01", actor_key="acme/u1", agent="z", model="m1", input_tokens=11, output_tokens=6, steps=2,
        cost_usd=None, unpriced_steps=2,
    )  # fmt: skip
    mine = await store.usage_rows(start="2026-11-01", end="2026-12-31", actor_key="acme/u2")
    assert [(r.day, r.agent) for r in mine] == [("2026-12-01", "z"), ("2026-12-02", "b")]
    everything = await store.usage_rows(start="2026-11-01", end="2026-12-31")
    assert [r.day for r in everything] == sorted(r.day for r in everything) and len(everything) == 8
    assert await store.usage_rows(start="2026-11-01", end="2026-12-31", limit=3) == everything[:3]
    assert await store.usage_rows(start="2026-11-01", end="2026-12-31", limit=0) == []
    assert await store.usage_rows(start="2026-12-03", end="2026-12-04") == []
    assert await store.usage_rows(start="2026-12-02", end="2026-12-01") == []  # an empty range
    assert await store.usage_rows(start="2026-11-01", end="2026-12-31", actor_key="nobody") == []


async def test_cost_is_none_when_unpriced_and_summed_over_priced_steps(store: Store) -> None:
    await store.add_usage(step(model="free"))
    await store.add_usage(step(model="free"))
    await store.add_usage(step(model="mixed", cost=0.000_012_5))
    await store.add_usage(step(model="mixed"))
    await store.add_usage(step(model="mixed", cost=1.25))
    await store.add_usage(step(model="zero", cost=0.0))

    by_model = {row.model: row for row in await store.usage_rows(start="2026-12-01", end="2026-12-01")}
    assert by_model["free"].cost_usd is None and by_model["free"].unpriced_steps == 2
    assert by_model["mixed"].cost_usd == pytest.approx(1.250_012_5, abs=1e-9)
    assert (by_model["mixed"].steps, by_model["mixed"].unpriced_steps) == (3, 1)
    assert by_model["zero"].cost_usd == 0.0 and by_model["zero"].unpriced_steps == 0  # priced at 0: not None


@pytest.mark.parametrize(
    "bad",
    [
        {"day": "2026-02-30"},
        {"day": "2026-12-1"},
        {"day": "２０２６-12-01"},
        {"actor_key": ""},
        {"input_tokens": -1},
        {"output_tokens": 10**12},
        {"cost_usd": -0.01},
        {"cost_usd": float("nan")},
        {"cost_usd": float("inf")},
        {"extra": 1},
        {"write_id": ""},
        {"write_id": "w" * 401},
    ],
)
async def test_an_invalid_entry_is_refused_before_anything_is_written(store: Store, bad: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "actor_key": "acme/u1", "day": "2026-12-01", "agent": "a", "model": "m", "input_tokens": 1, "output_tokens": 1,
    }  # fmt: skip
    with pytest.raises(ValidationError):
        await store.add_usage(UsageEntry(**{**fields, **bad}))
    assert await store.usage_rows(start="2026-01-01", end="2026-12-31") == []
    assert await store.usage_totals("acme/u1", "2026-12-01") == UsageTotals()


async def test_a_write_id_added_again_counts_once_and_answers_the_totals(store: Store) -> None:
    first = await store.add_usage(step(tokens=(10, 5), cost=0.5, write_id="run_a:0"))
    assert first == UsageTotals(day_tokens=15, month_tokens=15)
    again = step(tokens=(10, 5), cost=0.5, write_id="run_a:0")  # the same write, sent again
    assert await store.add_usage(again) == first
    assert await store.add_usage(step(day="2026-12-02", write_id="run_a:0")) == UsageTotals(
        day_tokens=0, month_tokens=15
    )  # its actor added this write id already: nothing, whatever the entry says
    (row,) = await store.usage_rows(start="2026-12-01", end="2026-12-02")
    assert (row.steps, row.input_tokens, row.output_tokens, row.cost_usd) == (1, 10, 5, 0.5)
    # Concurrent resends of one write (two processes retrying) count once too.
    await asyncio.gather(*(store.add_usage(step(tokens=(1, 1), write_id="run_b:3")) for _ in range(10)))
    assert await store.usage_totals("acme/u1", "2026-12-01") == UsageTotals(day_tokens=17, month_tokens=17)


async def test_different_write_ids_and_no_write_id_each_count(store: Store) -> None:
    await store.add_usage(step(write_id="run_a:0"))
    await store.add_usage(step(write_id="run_a:1"))
    await store.add_usage(step(write_id="run_b:0"))
    await store.add_usage(step("acme/u2", write_id="run_a:0"))  # another actor's write id: its own
    await store.add_usage(step())
    await store.add_usage(step())
    assert await store.usage_totals("acme/u1", "2026-12-01") == UsageTotals(day_tokens=75, month_tokens=75)
    assert await store.usage_totals("acme/u2", "2026-12-01") == UsageTotals(day_tokens=15, month_tokens=15)
    rows = await store.usage_rows(start="2026-12-01", end="2026-12-01")
    assert [(row.actor_key, row.steps) for row in rows] == [("acme/u1", 5), ("acme/u2", 1)]


class LostReply:
    """A store whose first ``add_usage`` writes, then loses its reply (``StoreUnavailableError``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls = 0

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        self.calls += 1
        totals = await self.store.add_usage(entry)
        if self.calls == 1:
            raise StoreUnavailableError("the reply was lost")
        return totals

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_charge_retried_after_a_lost_reply_counts_once(store: Store) -> None:
    lossy = LostReply(store)
    meter = UsageMeter(store=lossy, retry=5.0)  # type: ignore[arg-type]
    run = new_run("t1")
    steps = [
        ModelStepEntry(step=0, message_id="m0", usage=Usage(input_tokens=10, output_tokens=5), model="m1"),
        ModelStepEntry(step=1, message_id="m1", usage=Usage(input_tokens=1, output_tokens=1), model="m1"),
    ]
    await meter.charge(run, steps)
    assert lossy.calls == 3  # step 0 twice (its write landed, its reply was lost), step 1 once
    today = utc_day()
    (row,) = await store.usage_rows(start=today, end=today, actor_key="u1")
    assert (row.steps, row.input_tokens, row.output_tokens) == (2, 11, 6)
    await UsageMeter(store=store).charge(run, steps[:1])  # charged again, by another process: nothing
    assert await store.usage_totals("u1", today) == UsageTotals(day_tokens=17, month_tokens=17)


async def test_a_bad_or_too_long_range_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="at most 366 days"):
        await store.usage_rows(start="2025-01-01", end="2026-01-02")
    assert MAX_USAGE_DAYS == 366
    assert await store.usage_rows(start="2025-01-01", end="2026-01-01") == []  # 366 days: fine
    for start, end in [("2026-13-01", "2026-12-31"), ("yesterday", "2026-12-31"), ("2026-12-01", "")]:
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            await store.usage_rows(start=start, end=end)


async def test_a_bucket_gives_its_burst_then_refuses_with_a_wait(store: Store) -> None:
    now = 1_800_000_000.0
    taken = [await store.take_token("actor:u1", rate=0.5, burst=3, now=now) for _ in range(3)]
    assert taken == [0.0, 0.0, 0.0]
    wait = await store.take_token("actor:u1", rate=0.5, burst=3, now=now)
    assert wait == pytest.approx(2.0)  # one token at 0.5 per second
    assert await store.take_token("actor:u1", rate=0.5, burst=3, now=now + 1.0) == pytest.approx(1.0)
    assert await store.take_token("actor:u1", rate=0.5, burst=3, now=now + 2.0) == 0.0  # refilled by now
    assert await store.take_token("actor:u1", rate=0.5, burst=3, now=now + 2.5) == pytest.approx(1.5)
    assert await store.take_token("actor:u2", rate=0.5, burst=3, now=now) == 0.0  # another key's bucket
    # Long idle: full again, never more than the burst.
    later = [await store.take_token("actor:u1", rate=0.5, burst=3, now=now + 3600) for _ in range(4)]
    assert later[:3] == [0.0, 0.0, 0.0] and later[3] > 0


async def test_concurrent_takes_never_grant_more_than_the_burst(store: Store) -> None:
    now = 1_800_000_000.0
    waits = await asyncio.gather(
        *(store.take_token("client:10.0.0.1", rate=0.01, burst=10, now=now) for _ in range(50))
    )
    assert waits.count(0.0) == 10
    assert all(wait > 0 for wait in waits if wait != 0.0)


@pytest.mark.postgres
async def test_usage_and_buckets_raise_store_unavailable_when_postgres_is_unreachable() -> None:
    store = PostgresStore(f"postgresql://agora@127.0.0.1:{free_port()}/agora", connect_timeout=1)
    calls = [
        lambda: store.add_usage(step()),
        lambda: store.usage_totals("acme/u1", "2026-12-01"),
        lambda: store.usage_rows(start="2026-12-01", end="2026-12-02"),
        lambda: store.take_token("actor:u1", rate=1.0, burst=5, now=1_800_000_000.0),
    ]
    try:
        for call in calls:
            with pytest.raises(StoreUnavailableError):
                await call()
    finally:
        await store.aclose()


async def test_two_sql_stores_on_one_database_share_the_buckets_and_the_ledger(sql_store: SqlStore) -> None:
    """As two processes would: concurrent takes through both never grant more than the burst."""
    other = reopen(sql_store)
    try:
        now = 1_800_000_000.0
        waits = await asyncio.gather(
            *(
                store.take_token("turns:actor:u1", rate=0.01, burst=10, now=now)
                for _ in range(25)
                for store in (sql_store, other)
            )
        )
        assert waits.count(0.0) == 10
        await asyncio.gather(*(store.add_usage(step(tokens=(1, 1))) for _ in range(10) for store in (sql_store, other)))
        assert await other.usage_totals("acme/u1", "2026-12-01") == UsageTotals(day_tokens=40, month_tokens=40)
    finally:
        await other.aclose()
