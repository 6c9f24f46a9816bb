"""Contract: threads, runs, the journal, history and the event log (both stores)."""

from __future__ import annotations

import asyncio

import pytest

from gateway import ThreadBusyError, ThreadForbiddenError, ThreadNotFoundError, ThreadParkedError
from gateway.events import (
    RunFinishedEvent,
    RunStartedEvent,
    ToolCompletedEvent,
    ToolStartedEvent,
    Usage,
)
from gateway.models import AssistantMessage, ToolCall, ToolMessage, UserMessage
from gateway.stores import (
    Batch,
    ModelStepEntry,
    PlannedCall,
    PreflightEntry,
    RunRecord,
    Store,
    ToolSettledEntry,
)

from ._helpers import approval, begin, delta, finish, new_run, thread_of


def test_both_stores_satisfy_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)


async def test_begin_run_creates_the_thread_and_numbers_events_from_one(store: Store, thread_id: str) -> None:
    assert await store.get_thread(thread_id) is None
    run = new_run(thread_id)
    batch = Batch(
        events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default"), delta(run, "a")],
        messages=[UserMessage(content="hello")],
    )
    begun = await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)
    events = begun.events

    assert [e.seq for e in events] == [1, 2]
    assert begun.history == [UserMessage(content="hello")]
    assert [e.type for e in events] == ["run-started", "text-delta"]
    thread = await store.get_thread(thread_id)
    assert thread is not None and thread.owner_id == "u1" and thread.channel == "web"
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.status == "running" and stored.first_seq == 1
    assert stored.turn == run.turn
    assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id]
    assert await store.get_messages(thread_id) == [UserMessage(content="hello")]
    assert await store.last_seq(thread_id) == 2


async def test_begin_run_answers_only_the_newest_messages_when_limited(store: Store, thread_id: str) -> None:
    for n in range(3):
        run = new_run(thread_id)
        batch = Batch(messages=[UserMessage(content=f"q{n}"), AssistantMessage(content=f"a{n}")])
        await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)
        await finish(store, run)
    run = new_run(thread_id)
    batch = Batch(messages=[UserMessage(content="q3")])
    begun = await store.begin_run(
        run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30, history_limit=3
    )
    assert begun.history == [UserMessage(content="q2"), AssistantMessage(content="a2"), UserMessage(content="q3")]
    assert len(await store.get_messages(thread_id)) == 7  # the thread keeps everything


async def test_begin_run_on_someone_elses_thread_is_forbidden(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id, owner="alice")
    await finish(store, run)
    with pytest.raises(ThreadForbiddenError):
        await begin(store, thread_id, owner="mallory")
    assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id]
    assert await store.last_seq(thread_id) == 1


async def test_the_running_slot_admits_one_run_at_a_time(store: Store, thread_id: str) -> None:
    first, _ = await begin(store, thread_id)
    with pytest.raises(ThreadBusyError):
        await begin(store, thread_id)
    await finish(store, first)
    second, events = await begin(store, thread_id)

    assert second.first_seq == events[0].seq == 2
    runs = await store.thread_runs(thread_id)
    assert [r.run_id for r in runs] == [first.run_id, second.run_id]
    assert [r.status for r in runs] == ["completed", "running"]


async def test_concurrent_begin_runs_on_a_new_thread_admit_exactly_one(store: Store, thread_id: str) -> None:
    results = await asyncio.gather(*(begin(store, thread_id) for _ in range(8)), return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, ThreadBusyError) for r in results if isinstance(r, BaseException))


async def test_write_returns_events_with_strictly_increasing_seq(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    seqs = [1]
    for size in (1, 3, 0, 2):
        written = await store.write(thread_id, Batch(events=[delta(run, str(i)) for i in range(size)]))
        assert [e.delta for e in written] == [str(i) for i in range(size)]  # type: ignore[union-attr]
        seqs.extend(e.seq for e in written)
    assert seqs == list(range(1, 8))
    assert await store.last_seq(thread_id) == 7
    assert [e.seq for e in await store.read_events(thread_id)] == seqs


async def test_concurrent_writers_never_share_a_seq(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)

    async def writer(n: int) -> list[int]:
        seqs: list[int] = []
        for i in range(10):
            written = await store.write(thread_id, Batch(events=[delta(run, f"{n}.{i}"), delta(run)]))
            seqs.extend(e.seq for e in written)
        return seqs

    results = await asyncio.gather(*(writer(n) for n in range(5)))
    everything = sorted(s for seqs in results for s in seqs)
    assert everything == list(range(2, 102))
    assert all(seqs == sorted(seqs) for seqs in results)


async def test_write_to_an_unknown_thread_raises_thread_not_found(store: Store, thread_id: str) -> None:
    with pytest.raises(ThreadNotFoundError):
        await store.write(thread_id, Batch(events=[delta(new_run(thread_id))]))


async def test_read_events_pages_by_after_seq_and_limit(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    await store.write(thread_id, Batch(events=[delta(run, str(i)) for i in range(24)]))

    assert [e.seq for e in await store.read_events(thread_id)] == list(range(1, 26))
    assert [e.seq for e in await store.read_events(thread_id, 10, limit=5)] == [11, 12, 13, 14, 15]
    assert [e.seq for e in await store.read_events(thread_id, 23)] == [24, 25]
    assert await store.read_events(thread_id, 25) == []
    assert await store.read_events(thread_id, 0, limit=0) == []
    pages, after = [], 0
    while page := await store.read_events(thread_id, after, limit=7):
        pages.append([e.seq for e in page])
        after = page[-1].seq
    assert [len(p) for p in pages] == [7, 7, 7, 4]


async def test_an_unknown_thread_is_empty(store: Store, thread_id: str) -> None:
    assert await store.last_seq(thread_id) == 0
    assert await store.read_events(thread_id) == []
    assert await store.get_messages(thread_id) == []
    assert await store.thread_runs(thread_id) == []
    assert await store.get_run("run_nope") is None


async def test_events_round_trip_with_every_field(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    originals = [
        ToolStartedEvent(
            thread_id=thread_id,
            run_id=run.run_id,
            tool_call_id="tc1",
            tool="get_weather",
            kind="read",
            input={"city": 'Lisbon "old" town', "emoji": "☀️", "empty": {}},
            running="Checking Lisbon",
        ),
        ToolCompletedEvent(
            thread_id=thread_id,
            run_id=run.run_id,
            tool_call_id="tc1",
            tool="get_weather",
            output={"temp": 21.5, "list": [], "big": 2**60, "none": None},
            done="Checked",
            result={"kind": "metrics", "fields": []},
        ),
        RunFinishedEvent(thread_id=thread_id, run_id=run.run_id, status="completed", usage=Usage(input_tokens=3)),
    ]
    written = await store.write(thread_id, Batch(events=originals))
    read = await store.read_events(thread_id, 1)
    assert read == written
    # A store may set seq on the batch's own event objects: compare everything but seq.
    assert [e.model_copy(update={"seq": 0}) for e in read] == [e.model_copy(update={"seq": 0}) for e in originals]


async def test_write_saves_the_run_record_and_its_journal(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    other, _ = await begin(store, f"{thread_id}-other")
    step = ModelStepEntry(
        step=0,
        message_id="m1",
        text=None,
        calls=[PlannedCall(id="tc1", name="get_weather", arguments='{"city":"Lisbon"}', args={"city": "Lisbon"})],
        usage=Usage(input_tokens=10, output_tokens=2, model_calls=1),
    )
    settled = ToolSettledEntry(tool_call_id="tc1", name="get_weather", status="completed", output={"temp": 21})
    preflight = PreflightEntry(tool_call_id="tc2", phase="prepare", result={"kind": "ready", "data": {}})
    updated = run.model_copy(update={"usage": Usage(input_tokens=10), "updated_at": "2030-01-01T00:00:00.000+00:00"})

    await store.write(thread_id, Batch(run=updated, journal=[step]))
    await store.write(thread_id, Batch(run=updated, journal=[settled, preflight]))

    assert await store.read_journal(thread_id, run.run_id) == [step, settled, preflight]
    assert await store.read_journal(other.thread_id, other.run_id) == []
    stored = await store.get_run(run.run_id)
    assert stored == updated
    assert stored is not None and stored.first_seq == 1


async def test_messages_round_trip_in_order(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id, batch=Batch(messages=[UserMessage(content="Weather?")]))
    history = [
        AssistantMessage(content=None, tool_calls=[ToolCall(id="tc1", name="get_weather", arguments="{}")]),
        ToolMessage(tool_call_id="tc1", name="get_weather", content='{"temp": 21}'),
        AssistantMessage(content="Sunny."),
    ]
    await store.write(thread_id, Batch(run=run, messages=history))
    assert await store.get_messages(thread_id) == [UserMessage(content="Weather?"), *history]


async def test_releasing_frees_the_slot_only_for_its_own_run(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    stranger = RunRecord.model_validate(run.model_dump() | {"run_id": "run_stranger"})
    await store.write(thread_id, Batch(run=stranger.model_copy(update={"status": "failed"}), release=True))
    with pytest.raises(ThreadBusyError):
        await begin(store, thread_id)
    await finish(store, run)
    await begin(store, thread_id)


async def test_begin_run_refuses_a_thread_whose_run_waits_for_an_approval(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    await store.write(
        thread_id,
        Batch(run=run.model_copy(update={"status": "awaiting-approval"}), approvals=[approval(run)], release=True),
    )
    second = new_run(thread_id)
    with pytest.raises(ThreadParkedError):
        await store.begin_run(second, thread=thread_of(thread_id), batch=Batch(), lease_owner="p1", lease_ttl=30)
    assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id], "nothing was written"
    (pending,) = await store.pending_approvals(thread_id)
    await store.settle_approval(pending.tool_call_id, status="rejected", decided_by=None, via="superseded")
    begun = await store.begin_run(second, thread=thread_of(thread_id), batch=Batch(), lease_owner="p1", lease_ttl=30)
    assert begun.history == [] and [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id, second.run_id]


async def test_a_memory_store_forgets_its_least_recent_idle_threads_beyond_its_bound() -> None:
    from gateway.stores import MemoryStore

    store = MemoryStore(max_threads=3)
    busy, _ = await begin(store, "t-busy")  # still running: never forgotten
    done = []
    for name in ("t-1", "t-2", "t-3"):
        run, _ = await begin(store, name)
        done.append(await finish(store, run))
    assert await store.get_thread("t-1") is None and await store.get_run(done[0].run_id) is None
    assert await store.get_thread("t-busy") is not None and await store.get_thread("t-3") is not None
    await begin(store, "t-4")
    assert await store.get_thread("t-2") is None and await store.get_thread("t-busy") is not None


async def test_ensure_thread_reserves_an_id_for_its_first_owner(store: Store, thread_id: str) -> None:
    first = await store.ensure_thread(thread_of(thread_id, "u1"))
    again = await store.ensure_thread(thread_of(thread_id, "u2"))
    assert first.owner_id == again.owner_id == "u1"
    with pytest.raises(ThreadForbiddenError):
        await begin(store, thread_id, owner="u2")
    run, _ = await begin(store, thread_id, owner="u1")
    assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id]
