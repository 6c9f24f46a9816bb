"""Contract: threads as data their owner controls (list, names, erasure, retention, export).

On every store of the ``store`` fixture. Times that must tie are made to tie by fixing
``time.time`` for the writes that set them.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from gateway import ThreadNotFoundError
from gateway.events import RunStartedEvent
from gateway.models import AssistantMessage, UserMessage
from gateway.stores import (
    TITLE_CHARS,
    Batch,
    MemoryStore,
    ModelStepEntry,
    RedisStore,
    RunRecord,
    Store,
    ThreadRecord,
    ThreadSummary,
)

from ._helpers import approval, begin, delta, finish, new_run, thread_of


async def turn(store: Store, thread_id: str, text: str = "hello", *, owner: str = "u1") -> RunRecord:
    """A finished turn on the thread: the user's message, a reply and its events."""
    run = new_run(thread_id, owner)
    batch = Batch(
        events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")],
        messages=[UserMessage(content=text)],
    )
    await store.begin_run(run, thread=thread_of(thread_id, owner), batch=batch, lease_owner="p1", lease_ttl=30)
    stored = await store.get_run(run.run_id)
    assert stored is not None
    reply = Batch(run=stored, events=[delta(stored, "hi")], messages=[AssistantMessage(content="hi")])
    await store.write(thread_id, reply)
    return await finish(store, stored)


async def everything(store: Store, owner: str, limit: int) -> list[ThreadSummary]:
    """The owner's whole list, page after page of ``limit``, following each page's last pair."""
    lines: list[ThreadSummary] = []
    before: tuple[float, str] | None = None
    for _ in range(100):
        page = await store.list_threads(owner, before=before, limit=limit)
        assert len(page) <= limit
        lines.extend(page)
        if len(page) < limit:
            return lines
        before = (page[-1].last_activity_ts, page[-1].thread_id)
    raise AssertionError("the pages never ended")


def frozen(monkeypatch: pytest.MonkeyPatch, at: float) -> None:
    monkeypatch.setattr(time, "time", lambda: at)


async def test_the_list_is_the_owners_threads_newest_activity_first(store: Store, thread_id: str) -> None:
    a, b, c = f"{thread_id}-a", f"{thread_id}-b", f"{thread_id}-c"
    for name in (a, b, c):
        await turn(store, name, f"about {name}")
    await turn(store, f"{thread_id}-other", "not yours", owner="u2")
    assert [line.thread_id for line in await store.list_threads("u1")] == [c, b, a]

    run = (await store.thread_runs(a))[-1]
    await store.write(a, Batch(run=run, events=[delta(run, "later")]))  # an event moves it to the top
    lines = await store.list_threads("u1")
    assert [line.thread_id for line in lines] == [a, c, b]
    first = lines[0]
    assert first.title == f"about {a}" and first.channel == "web"
    record = await store.get_thread(a)
    assert record is not None and first.created_at == record.created_at
    assert datetime.fromisoformat(first.last_activity).timestamp() == pytest.approx(first.last_activity_ts, abs=0.001)
    assert lines[0].last_activity_ts >= lines[1].last_activity_ts >= lines[2].last_activity_ts
    assert [line.thread_id for line in await store.list_threads("u2")] == [f"{thread_id}-other"]
    assert await store.list_threads("nobody") == []
    assert await store.list_threads("u1", limit=0) == []


async def test_an_owner_is_an_id_and_a_tenant(store: Store, thread_id: str) -> None:
    mine = ThreadRecord(thread_id=f"{thread_id}-acme", owner_id="u1", tenant_ref="acme", channel="web")
    await store.ensure_thread(mine)
    await turn(store, f"{thread_id}-plain")
    assert [line.thread_id for line in await store.list_threads(mine.owner_key)] == [mine.thread_id]
    assert [line.thread_id for line in await store.list_threads("u1")] == [f"{thread_id}-plain"]
    reserved = (await store.list_threads(mine.owner_key))[0]
    assert reserved.title is None  # reserved, nothing said yet


async def test_pages_neither_overlap_nor_skip_when_times_tie(
    store: Store, thread_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [f"{thread_id}-{n:02d}" for n in range(11)]
    with monkeypatch.context() as patch:
        frozen(patch, 1_800_000_000.25)
        for name in ids[:7]:
            await turn(store, name)
        frozen(patch, 1_800_000_100.5)
        for name in ids[7:]:
            await turn(store, name)

    lines = await store.list_threads("u1", limit=100)
    if isinstance(store, MemoryStore | RedisStore):  # they take the time from the clock the test fixed
        assert {line.last_activity_ts for line in lines} == {1_800_000_000.25, 1_800_000_100.5}
    expected = sorted(((line.last_activity_ts, line.thread_id) for line in lines), reverse=True)
    assert [(line.last_activity_ts, line.thread_id) for line in lines] == expected
    assert sorted(line.thread_id for line in lines) == ids
    for limit in (1, 2, 3, 4, 7):
        paged = await everything(store, "u1", limit)
        assert [line.thread_id for line in paged] == [line.thread_id for line in lines], limit

    # A cursor past everything answers nothing; one between two tied ids answers the ids below it.
    assert await store.list_threads("u1", before=(0.0, ""), limit=5) == []
    tie = lines[5]
    below = await store.list_threads("u1", before=(tie.last_activity_ts, tie.thread_id), limit=100)
    assert [line.thread_id for line in below] == [line.thread_id for line in lines[6:]]


async def test_the_title_is_the_first_message_until_renamed(store: Store, thread_id: str) -> None:
    long = "Where is my order? " * 20
    await turn(store, thread_id, long)
    await turn(store, thread_id, "a second question")
    [line] = await store.list_threads("u1")
    assert line.title == long[:TITLE_CHARS] and len(line.title) == TITLE_CHARS

    assert await store.rename_thread(thread_id, "Order 1042") is True
    [line] = await store.list_threads("u1")
    assert line.title == "Order 1042"
    assert await store.rename_thread(thread_id, None) is True
    [line] = await store.list_threads("u1")
    assert line.title == long[:TITLE_CHARS]
    assert await store.rename_thread(f"{thread_id}-missing", "x") is False
    assert await store.get_thread(f"{thread_id}-missing") is None


async def test_renaming_is_not_activity(store: Store, thread_id: str) -> None:
    await turn(store, f"{thread_id}-old")
    await turn(store, f"{thread_id}-new")
    await store.rename_thread(f"{thread_id}-old", "renamed")
    assert [line.thread_id for line in await store.list_threads("u1")] == [f"{thread_id}-new", f"{thread_id}-old"]


async def test_erasure_leaves_nothing_of_the_thread_and_touches_no_other(store: Store, thread_id: str) -> None:
    other = f"{thread_id}-kept"
    kept_run = await turn(store, other, "keep me")
    kept_before = (await store.get_messages(other), await store.read_events(other), await store.thread_runs(other))

    done = await turn(store, thread_id, "forget me")
    run, _ = await begin(store, thread_id, ttl=0.01)  # running, with a lease that lapses
    entry = ModelStepEntry(step=0, message_id="m1", text="thinking")
    pending, settled = approval(run, expires_in=-1.0), approval(run, tool="other_tool")
    await store.write(thread_id, Batch(run=run, journal=[entry], approvals=[pending, settled], events=[delta(run)]))
    await store.settle_approval(settled.tool_call_id, status="approved", decided_by="u1", via="web", remember=True)
    assert await store.is_remembered(thread_id, "other_tool")
    assert await store.expired_approvals(time.time()) != []

    assert await store.delete_thread(thread_id) is True

    assert await store.get_thread(thread_id) is None
    assert await store.get_messages(thread_id) == []
    assert await store.read_events(thread_id) == []
    assert await store.last_seq(thread_id) == 0
    assert await store.thread_runs(thread_id) == []
    for run_id in (done.run_id, run.run_id):
        assert await store.get_run(run_id) is None
        assert await store.read_journal(thread_id, run_id) == []
        assert await store.claim_run(run_id, owner="p2", ttl=30, expect=frozenset({"running"})) is None
    for record in (pending, settled):
        assert await store.get_approval(record.tool_call_id) is None
        assert await store.settle_approval(record.tool_call_id, status="approved", decided_by="u1", via="web") is None
    assert await store.pending_approvals(thread_id) == []
    assert await store.thread_approvals(thread_id) == []
    assert await store.expired_approvals(time.time()) == []
    assert await store.expired_leases() == []
    assert not await store.is_remembered(thread_id, "other_tool")
    assert [line.thread_id for line in await store.list_threads("u1")] == [other]
    assert thread_id not in await store.idle_threads(time.time() + 60)
    with pytest.raises(ThreadNotFoundError):
        await store.write(thread_id, Batch(run=run, events=[delta(run, "too late")]))
    assert await store.read_events(thread_id) == []
    assert await store.delete_thread(thread_id) is False

    kept_after = (await store.get_messages(other), await store.read_events(other), await store.thread_runs(other))
    assert kept_after == kept_before
    assert await store.get_run(kept_run.run_id) is not None


async def test_an_erased_thread_can_begin_again_fresh_for_anyone(store: Store, thread_id: str) -> None:
    await turn(store, thread_id, "first life")
    await store.rename_thread(thread_id, "old name")
    assert await store.delete_thread(thread_id)

    run, events = await begin(
        store, thread_id, owner="u2", batch=Batch(events=[], messages=[UserMessage(content="second life")])
    )
    await store.write(thread_id, Batch(run=run, events=[delta(run)]))
    thread = await store.get_thread(thread_id)
    assert thread is not None and thread.owner_id == "u2"
    assert [e.seq for e in await store.read_events(thread_id)] == [1]
    assert await store.get_messages(thread_id) == [UserMessage(content="second life")]
    assert [r.run_id for r in await store.thread_runs(thread_id)] == [run.run_id]
    assert await store.list_threads("u1") == []
    [line] = await store.list_threads("u2")
    assert (line.thread_id, line.title) == (thread_id, "second life")


async def test_idle_threads_are_those_quiet_since_before_a_time(store: Store, thread_id: str) -> None:
    """The times are the store's own (as its list gives them): a store may take them from any clock."""
    c, reserved, a, b = (f"{thread_id}-{name}" for name in ("c", "reserved", "a", "b"))
    await turn(store, c)
    await store.ensure_thread(thread_of(reserved))
    await turn(store, a)
    await turn(store, b)
    times = {line.thread_id: line.last_activity_ts for line in await store.list_threads("u1", limit=10)}
    assert times[c] < times[reserved] < times[a] < times[b]
    between = (times[a] + times[b]) / 2

    assert await store.idle_threads(between) == [c, reserved, a]
    assert await store.idle_threads(between, limit=2) == [c, reserved]
    assert await store.idle_threads(times[c]) == []  # strictly before
    assert await store.idle_threads(between, limit=0) == []

    run = (await store.thread_runs(c))[-1]
    await store.write(c, Batch(run=run, events=[delta(run, "now")]))  # awake again
    assert await store.idle_threads(between) == [reserved, a]
    latest = max(line.last_activity_ts for line in await store.list_threads("u1", limit=10))
    assert set(await store.idle_threads(latest + 1)) == {a, b, c, reserved}


async def test_a_threads_approvals_settled_or_pending_oldest_first(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    first, second, third = (approval(run, tool=f"tool_{n}") for n in range(3))
    await store.write(thread_id, Batch(run=run, approvals=[first, second]))
    await store.settle_approval(first.tool_call_id, status="rejected", decided_by="u1", via="web", reason="no")
    await store.write(thread_id, Batch(run=run, approvals=[third]))
    other, _ = await begin(store, f"{thread_id}-other")
    await store.write(other.thread_id, Batch(run=other, approvals=[approval(other)]))

    listed = await store.thread_approvals(thread_id)
    assert [a.tool_call_id for a in listed] == [first.tool_call_id, second.tool_call_id, third.tool_call_id]
    assert [a.status for a in listed] == ["rejected", "pending", "pending"]
    assert listed[0].reason == "no" and listed[0].decided_by == "u1"
    assert listed[1] == second
    assert await store.thread_approvals(f"{thread_id}-missing") == []
