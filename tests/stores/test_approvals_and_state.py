"""Contract: approvals, confirm tokens and channel state (both stores)."""

from __future__ import annotations

import asyncio
import time
import uuid

from gateway.stores import Batch, Store

from ._helpers import approval, begin, eventually


async def test_an_approval_put_by_a_batch_reads_back_whole(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    record = approval(run)
    await store.write(thread_id, Batch(run=run, approvals=[record]))
    assert await store.get_approval(record.tool_call_id) == record
    assert await store.get_approval("tc_unknown") is None


async def test_pending_approvals_are_listed_oldest_first(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    first, second, third = approval(run), approval(run), approval(run)
    await store.write(thread_id, Batch(run=run, approvals=[first, second]))
    await store.write(thread_id, Batch(run=run, approvals=[third]))
    assert [a.tool_call_id for a in await store.pending_approvals(thread_id)] == [
        first.tool_call_id,
        second.tool_call_id,
        third.tool_call_id,
    ]
    await store.settle_approval(second.tool_call_id, status="rejected", decided_by="u1", via="web")
    assert [a.tool_call_id for a in await store.pending_approvals(thread_id)] == [
        first.tool_call_id,
        third.tool_call_id,
    ]
    assert await store.pending_approvals(f"{thread_id}-other") == []


async def test_an_approval_settles_once(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    record = approval(run)
    await store.write(thread_id, Batch(run=run, approvals=[record]))

    settled = await store.settle_approval(
        record.tool_call_id, status="approved", decided_by="u1", via="whatsapp", reason="fine"
    )
    assert settled is not None
    assert (settled.status, settled.decided_by, settled.via, settled.reason) == ("approved", "u1", "whatsapp", "fine")
    assert settled.decided_at is not None
    assert settled.model_copy(update={"status": "pending", "decided_by": None, "via": None, "reason": None,
                                      "decided_at": None}) == record  # fmt: skip
    assert await store.get_approval(record.tool_call_id) == settled
    assert await store.settle_approval(record.tool_call_id, status="rejected", decided_by="u2", via="web") is None
    assert await store.settle_approval("tc_unknown", status="approved", decided_by="u1", via="web") is None
    stored = await store.get_approval(record.tool_call_id)
    assert stored is not None and stored.status == "approved"


async def test_concurrent_settles_have_exactly_one_winner(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    record = approval(run)
    await store.write(thread_id, Batch(run=run, approvals=[record]))
    outcomes = await asyncio.gather(
        *(
            store.settle_approval(
                record.tool_call_id, status="approved" if i % 2 else "rejected", decided_by=f"u{i}", via="web"
            )
            for i in range(10)
        )
    )
    winners = [o for o in outcomes if o is not None]
    assert len(winners) == 1
    assert await store.get_approval(record.tool_call_id) == winners[0]


async def test_expired_approvals_lists_pending_ones_past_expiry(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    lapsed, decided, fresh = approval(run, expires_in=-5), approval(run, expires_in=-5), approval(run)
    await store.write(thread_id, Batch(run=run, approvals=[lapsed, decided, fresh]))
    await store.settle_approval(decided.tool_call_id, status="rejected", decided_by="u1", via="web")

    expired = await store.expired_approvals(time.time())
    mine = [a.tool_call_id for a in expired if a.thread_id == thread_id]
    assert mine == [lapsed.tool_call_id]
    assert await store.expired_approvals(time.time() - 3600) == []
    later = await store.expired_approvals(time.time() + 7200)
    assert {a.tool_call_id for a in later} == {lapsed.tool_call_id, fresh.tool_call_id}
    assert len(await store.expired_approvals(time.time() + 7200, limit=1)) == 1

    await store.settle_approval(lapsed.tool_call_id, status="expired", decided_by=None, via="expiry")
    assert await store.expired_approvals(time.time()) == []


async def test_remembered_tools_skip_asking(store: Store, thread_id: str) -> None:
    run, _ = await begin(store, thread_id)
    remembered, rejected = approval(run, tool="purge_cache"), approval(run, tool="refund")
    await store.write(thread_id, Batch(run=run, approvals=[remembered, rejected]))
    assert await store.is_remembered(thread_id, "purge_cache") is False

    settled = await store.settle_approval(
        remembered.tool_call_id, status="approved", decided_by="u1", via="web", remember=True
    )
    await store.settle_approval(rejected.tool_call_id, status="rejected", decided_by="u1", via="web", remember=True)
    assert settled is not None and settled.remember is True
    assert await store.is_remembered(thread_id, "purge_cache") is True
    assert await store.is_remembered(thread_id, "refund") is False
    assert await store.is_remembered(f"{thread_id}-other", "purge_cache") is False


async def test_a_confirm_token_is_claimed_once_until_released(store: Store) -> None:
    token = uuid.uuid4().hex
    expires = time.time() + 60
    assert await store.claim_confirm_token(token, expires) is True
    assert await store.claim_confirm_token(token, expires) is False
    await store.release_confirm_token(token)
    assert await store.claim_confirm_token(token, expires) is True
    await store.release_confirm_token(uuid.uuid4().hex)  # releasing an unknown token is harmless


async def test_concurrent_confirm_token_claims_have_one_winner(store: Store) -> None:
    token = uuid.uuid4().hex
    claims = await asyncio.gather(*(store.claim_confirm_token(token, time.time() + 60) for _ in range(10)))
    assert claims.count(True) == 1


async def test_channel_state_round_trips_json(store: Store) -> None:
    key = f"whatsapp:{uuid.uuid4().hex}"
    assert await store.channel_get(key) is None
    value = {"to": "whatsapp:+351900000000", "n": 3, "ok": True, "items": [1.5, None, "x"], "empty": {}}
    await store.channel_set(key, value)
    assert await store.channel_get(key) == value
    await store.channel_set(key, ["replaced"])
    assert await store.channel_get(key) == ["replaced"]
    await store.channel_delete(key)
    assert await store.channel_get(key) is None
    await store.channel_delete(key)


async def test_channel_state_expires(store: Store) -> None:
    key = f"ttl:{uuid.uuid4().hex}"
    await store.channel_set(key, "soon gone", ttl=0.05)
    await store.channel_set(f"{key}:kept", "kept", ttl=60)
    await eventually(lambda: _is_none(store, key))
    assert await store.channel_get(f"{key}:kept") == "kept"


async def test_channel_claim_is_once_until_expiry_or_delete(store: Store) -> None:
    key = f"sid:{uuid.uuid4().hex}"
    assert await store.channel_claim(key, ttl=60) is True
    assert await store.channel_claim(key, ttl=60, value="other") is False
    assert await store.channel_get(key) is True
    await store.channel_delete(key)
    assert await store.channel_claim(key, ttl=0.05, value={"by": "p1"}) is True
    assert await store.channel_get(key) == {"by": "p1"}

    async def claimable() -> bool:
        return await store.channel_claim(key, ttl=60)

    await eventually(claimable)


async def test_concurrent_channel_claims_have_one_winner(store: Store) -> None:
    key = f"sid:{uuid.uuid4().hex}"
    claims = await asyncio.gather(*(store.channel_claim(key, ttl=60) for _ in range(10)))
    assert claims.count(True) == 1


async def test_ping_answers(store: Store) -> None:
    await store.ping()


async def _is_none(store: Store, key: str) -> bool:
    return await store.channel_get(key) is None


async def test_memory_channel_state_forgets_expired_keys_nobody_reads() -> None:
    from gateway.stores import MemoryStore

    store = MemoryStore()
    for index in range(1024):
        await store.channel_set(f"once:{index}", index, ttl=-1)  # already expired, never read
    await store.channel_set("alive", 1, ttl=60)
    assert len(store._channel) == 1 and await store.channel_get("alive") == 1


async def test_channel_delete_if_drops_only_the_expected_holder(store: Store) -> None:
    key = f"lock:{uuid.uuid4().hex}"
    assert await store.channel_claim(key, ttl=60, value="p1:abc") is True
    assert await store.channel_delete_if(key, "p2:def") is False  # someone else's lease stays
    assert await store.channel_get(key) == "p1:abc"
    assert await store.channel_delete_if(key, "p1:abc") is True
    assert await store.channel_get(key) is None
    assert await store.channel_delete_if(key, "p1:abc") is False  # gone: nothing to give back
    assert await store.channel_claim(key, ttl=60, value="p2:def") is True


async def test_channel_renew_if_extends_only_the_expected_holder(store: Store) -> None:
    key = f"lock:{uuid.uuid4().hex}"
    assert await store.channel_claim(key, ttl=0.3, value={"owner": "p1"}) is True
    assert await store.channel_renew_if(key, {"owner": "p2"}, ttl=60) is False
    assert await store.channel_renew_if(key, {"owner": "p1"}, ttl=60) is True
    await asyncio.sleep(0.5)  # past the first ttl: the renewal holds it
    assert await store.channel_get(key) == {"owner": "p1"}
    assert await store.channel_delete_if(key, {"owner": "p1"}) is True
    assert await store.channel_renew_if(key, {"owner": "p1"}, ttl=60) is False  # an absent key is not made


async def test_concurrent_compare_and_delete_has_one_winner(store: Store) -> None:
    key = f"lock:{uuid.uuid4().hex}"
    await store.channel_claim(key, ttl=60, value="p1")
    results = await asyncio.gather(*(store.channel_delete_if(key, "p1") for _ in range(10)))
    assert results.count(True) == 1
