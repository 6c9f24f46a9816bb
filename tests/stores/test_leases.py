"""Contract: who drives a running run (claims, leases, expiry), both stores."""

from __future__ import annotations

import asyncio

import pytest

from gateway import ThreadBusyError
from gateway.stores import Batch, RunRecord, Store

from ._helpers import begin, eventually, finish

RUNNING = frozenset({"running"})
PARKED = frozenset({"awaiting-approval"})


async def park(store: Store, run: RunRecord) -> RunRecord:
    parked = run.model_copy(update={"status": "awaiting-approval"})
    await store.write(run.thread_id, Batch(run=parked, release=True))
    return parked


async def until_expired(store: Store, thread_id: str, run_id: str) -> list[tuple[str, str]]:
    """Poll ``expired_leases`` until it reports the run; return that answer."""
    answer: list[tuple[str, str]] = []

    async def reported() -> bool:
        nonlocal answer
        answer = await store.expired_leases()
        return (thread_id, run_id) in answer

    await eventually(reported)
    return answer


async def test_a_live_foreign_lease_refuses_a_claim(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id, lease_owner="p1")
    assert await store.claim_run(run.run_id, owner="p2", ttl=30, expect=RUNNING) is None
    again = await store.claim_run(run.run_id, owner="p1", ttl=30, expect=RUNNING)  # its own lease
    assert again is not None and again.status == "running"


async def test_a_claim_needs_the_status_in_expect(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    await park(store, run)
    assert await store.claim_run(run.run_id, owner="p2", ttl=30, expect=RUNNING) is None
    assert await store.claim_run(run.run_id, owner="p2", ttl=30, expect=frozenset()) is None

    claimed = await store.claim_run(run.run_id, owner="p2", ttl=30, expect=PARKED)
    assert claimed is not None
    assert claimed.status == "running" and claimed.run_id == run.run_id and claimed.turn == run.turn
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.status == "running" and stored.first_seq == run.first_seq
    with pytest.raises(ThreadBusyError):  # the claim took the running slot
        await begin(store, thread_id)


async def test_a_claim_needs_the_running_slot(store: Store, thread_id: str) -> None:
    parked = await park(store, (await begin(store, thread_id))[0])
    await begin(store, thread_id)  # a new turn took the slot
    assert await store.claim_run(parked.run_id, owner="p2", ttl=30, expect=PARKED) is None


async def test_claiming_an_unknown_run_fails(store: Store) -> None:
    assert await store.claim_run("run_unknown", owner="p1", ttl=30, expect=RUNNING) is None


async def test_concurrent_claims_of_a_parked_run_admit_one(store: Store, thread_id: str) -> None:
    parked = await park(store, (await begin(store, thread_id))[0])
    claims = await asyncio.gather(
        *(store.claim_run(parked.run_id, owner=f"p{i}", ttl=30, expect=PARKED) for i in range(8))
    )
    assert sum(claim is not None for claim in claims) == 1


async def test_an_expired_lease_is_reported_and_claimed_by_another_owner(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id, lease_owner="p1", ttl=0.05)
    await until_expired(store, thread_id, run.run_id)

    claimed = await store.claim_run(run.run_id, owner="p2", ttl=30, expect=RUNNING)
    assert claimed is not None and claimed.status == "running"
    assert await store.renew_lease(thread_id, run.run_id, owner="p1", ttl=30) is False
    assert await store.renew_lease(thread_id, run.run_id, owner="p2", ttl=30) is True
    assert (thread_id, run.run_id) not in await store.expired_leases()


async def test_renewing_keeps_a_lease_alive(store: Store, thread_id: str) -> None:
    renewed, _ = await begin(store, thread_id, lease_owner="p1", ttl=0.05)
    assert await store.renew_lease(thread_id, renewed.run_id, owner="p1", ttl=30) is True
    assert await store.renew_lease(thread_id, renewed.run_id, owner="p2", ttl=30) is False
    # A run begun later with the same short lease is the clock: once it lapses, so would have the first.
    marker, _ = await begin(store, f"{thread_id}-marker", ttl=0.05)
    answer = await until_expired(store, marker.thread_id, marker.run_id)
    assert (thread_id, renewed.run_id) not in answer


async def test_a_released_run_holds_no_lease(store: Store, thread_id: str) -> None:
    ended, _ = await begin(store, thread_id, lease_owner="p1", ttl=0.05)
    await finish(store, ended)
    parked = await park(store, (await begin(store, f"{thread_id}-2", ttl=0.05))[0])
    marker, _ = await begin(store, f"{thread_id}-marker", ttl=0.05)
    answer = await until_expired(store, marker.thread_id, marker.run_id)
    assert (thread_id, ended.run_id) not in answer
    assert (parked.thread_id, parked.run_id) not in answer
    assert await store.renew_lease(thread_id, ended.run_id, owner="p1", ttl=30) is False


async def test_renewing_a_lapsed_lease_fails(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id, lease_owner="p1", ttl=0.05)
    await until_expired(store, thread_id, run.run_id)
    assert await store.renew_lease(thread_id, run.run_id, owner="p1", ttl=30) is False


async def test_expired_leases_honours_its_limit(store: Store, thread_id: str) -> None:
    runs = [(await begin(store, f"{thread_id}-{i}", ttl=0.05))[0] for i in range(3)]
    await until_expired(store, runs[-1].thread_id, runs[-1].run_id)
    assert len(await store.expired_leases(limit=2)) == 2
