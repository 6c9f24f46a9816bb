"""``RunRecord.trace_context`` survives every store: begun, written with a batch, parked, claimed, listed."""

from __future__ import annotations

from gateway.events import RunStartedEvent
from gateway.stores import Batch, Store

from ._helpers import new_run, thread_of

STARTED = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "vendor=a,b=c"}
FIRST_DRIVE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"}


async def test_the_trace_context_round_trips(store: Store, thread_id: str) -> None:
    run = new_run(thread_id).model_copy(update={"trace_context": STARTED})
    batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.trace_context == STARTED

    # A drive that began without one stores its own with its next batch; parking keeps it.
    parked = run.model_copy(update={"status": "awaiting-approval", "trace_context": FIRST_DRIVE})
    await store.write(thread_id, Batch(run=parked, release=True))
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.trace_context == FIRST_DRIVE

    claimed = await store.claim_run(run.run_id, owner="p2", ttl=30, expect=frozenset({"awaiting-approval"}))
    assert claimed is not None and claimed.trace_context == FIRST_DRIVE
    [listed] = await store.thread_runs(thread_id)
    assert listed.trace_context == FIRST_DRIVE


async def test_a_run_without_one_reads_back_none(store: Store, thread_id: str) -> None:
    run = new_run(thread_id)
    batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
    await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.trace_context is None
