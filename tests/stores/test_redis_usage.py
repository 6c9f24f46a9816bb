"""What only ``RedisStore``'s usage ledger and buckets promise: one slot per actor, bounded keys, once-only writes."""

from __future__ import annotations

import hashlib
import time

import pytest
import redis.asyncio as redis
from redis.crc import key_slot

from gateway import StoreUnavailableError, ThreadNotFoundError
from gateway.stores import Batch, RedisStore, UsageEntry
from gateway.stores._redis_scripts import run_scripts
from gateway.stores._redis_usage import USAGE_ADD
from gateway.stores._usage import LEDGER_DAYS

from ._helpers import begin, delta
from ._server import free_port
from .test_usage import step

pytestmark = pytest.mark.redis


async def keys_of(url: str, prefix: str) -> dict[str, int]:
    """Every key under ``prefix`` and its TTL (seconds)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return {key: await client.ttl(key) async for key in client.scan_iter(match=f"{prefix}:*")}
    finally:
        await client.aclose()


async def test_an_actors_usage_keys_share_one_slot_and_expire(
    redis_store: RedisStore, redis_url: str, prefix: str
) -> None:
    actor = "odd}{actor"
    await redis_store.add_usage(step(actor, "2026-11-30", cost=0.5))
    await redis_store.add_usage(step(actor, "2026-12-01"))
    keyed = UsageEntry.model_validate(step(actor, "2026-12-01").model_dump() | {"write_id": "run_a:0"})
    await redis_store.add_usage(keyed)
    keys = await keys_of(redis_url, prefix)
    marker = f"{prefix}:{{usage:{hashlib.sha256(actor.encode()).hexdigest()}}}:write:"
    assert keys[marker + hashlib.sha256(b"run_a:0").hexdigest()] == pytest.approx(2 * 86_400, abs=5)
    del keys[marker + hashlib.sha256(b"run_a:0").hexdigest()]
    tag = f"{{usage:{hashlib.sha256(actor.encode()).hexdigest()}}}"
    mine = [key for key in keys if tag in key]
    assert {key.rpartition(":")[0].rpartition(":")[2] for key in mine} == {"day", "month", "write"}
    assert len({key_slot(key.encode()) for key in mine}) == 1
    assert set(keys) - set(mine) == {f"{prefix}:usage-day:2026-11-30", f"{prefix}:usage-day:2026-12-01"}
    now, day = time.time(), 86_400
    for key, ttl in keys.items():
        if ":write:" in key:
            assert 0 < ttl <= 120
        elif key.endswith(":month:2026-12"):  # 400 days after December 2026
            assert ttl == pytest.approx(1_798_761_600 + LEDGER_DAYS * day - now, abs=5)
        elif key.endswith("2026-12-01"):  # 400 days after the day
            assert ttl == pytest.approx(1_796_169_600 + LEDGER_DAYS * day - now, abs=5)
        else:
            assert 300 * day < ttl <= (LEDGER_DAYS + 1) * day, key


async def test_a_write_sent_again_adds_nothing(redis_store: RedisStore, prefix: str) -> None:
    """The script's marker: what a connection's retry sends twice counts once."""
    entry = step(tokens=(7, 3))
    await redis_store.add_usage(entry)
    keys = [
        f"{prefix}:{{usage:{hashlib.sha256(b'acme/u1').hexdigest()}}}:{name}"
        for name in ("day:2026-12-01", "month:2026-12", "write:same-id")
    ]
    args = ['["helper","m1"]', 7, 3, 10, "", 1_900_000_000, 1_900_000_000, "acme/u1", 60_000]
    send = redis_store._batcher.send
    first = await run_scripts(send, [USAGE_ADD.command(keys, args)], [USAGE_ADD])
    again = await run_scripts(send, [USAGE_ADD.command(keys, args)], [USAGE_ADD])
    assert [int(n) for n in first[0]] == [int(n) for n in again[0]] == [20, 20]
    (row,) = await redis_store.usage_rows(start="2026-12-01", end="2026-12-01")
    assert (row.steps, row.input_tokens, row.unpriced_steps) == (2, 14, 2)


async def test_a_batchs_steps_are_charged_in_its_write_only_if_it_applied(
    redis_store: RedisStore, redis_url: str, prefix: str, thread_id: str
) -> None:
    """``Batch.usage`` on one server: charged beside the write, by its write id, once."""
    run, _ = await begin(redis_store, thread_id)
    entry = step("acme/u9", "2026-12-01", cost=0.25, write_id=f"{run.run_id}:0")
    batch = Batch(run=run, events=[delta(run)], usage=[entry])
    await redis_store.write(thread_id, batch)
    assert batch.charged
    totals = await redis_store.usage_totals("acme/u9", "2026-12-01")
    assert (totals.day_tokens, totals.month_tokens) == (15, 15)
    (row,) = await redis_store.usage_rows(start="2026-12-01", end="2026-12-01")  # the day's index lists it
    assert (row.actor_key, row.steps, row.cost_usd) == ("acme/u9", 1, 0.25)

    again = Batch(run=run, events=[delta(run)], usage=[entry], write_id=batch.write_id)
    await redis_store.write(thread_id, again)  # the same write sent again: applied and charged once
    assert again.charged
    await redis_store.add_usage(entry)  # the meter charging it too (another process): nothing
    assert (await redis_store.usage_totals("acme/u9", "2026-12-01")).day_tokens == 15

    # Expiries as ``add_usage`` sets them: the marker for ``USAGE_WRITE_DAYS``, the lines by their day.
    keys = await keys_of(redis_url, prefix)
    tag = f"{prefix}:{{usage:{hashlib.sha256(b'acme/u9').hexdigest()}}}"
    assert keys[f"{tag}:write:{hashlib.sha256(entry.write_id.encode()).hexdigest()}"] == pytest.approx(
        2 * 86_400, abs=5
    )
    assert keys[f"{tag}:day:2026-12-01"] == pytest.approx(1_796_169_600 + LEDGER_DAYS * 86_400 - time.time(), abs=5)

    refused = Batch(run=run, events=[delta(run)], usage=[step("acme/u9", "2026-12-01", write_id="run_gone:0")])
    with pytest.raises(ThreadNotFoundError):
        await redis_store.write("no-such-thread", refused)
    assert not refused.charged
    assert (await redis_store.usage_totals("acme/u9", "2026-12-01")).day_tokens == 15


async def test_an_idle_bucket_expires_when_it_would_be_full(
    redis_store: RedisStore, redis_url: str, prefix: str
) -> None:
    now = time.time()
    for _ in range(3):
        await redis_store.take_token("actor:u1", rate=2.0, burst=5, now=now)  # 3 taken: full in 1.5 s
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"{prefix}:bucket:{hashlib.sha256(b'actor:u1').hexdigest()}"
        assert 1400 <= await client.pttl(key) <= 1501
        await redis_store.take_token("actor:u1", rate=0.0, burst=5, now=now)  # no refill: a day at most
        assert 86_000_000 <= await client.pttl(key) <= 86_400_000
    finally:
        await client.aclose()
    with pytest.raises(ValueError, match="finite rate"):
        await redis_store.take_token("actor:u1", rate=-1.0, burst=5, now=now)
    with pytest.raises(ValueError, match="finite rate"):
        await redis_store.take_token("actor:u1", rate=1.0, burst=float("inf"), now=now)


async def test_usage_and_buckets_raise_store_unavailable_when_redis_is_down() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down")
    calls = [
        lambda: store.add_usage(UsageEntry.model_validate(step().model_dump())),
        lambda: store.usage_totals("acme/u1", "2026-12-01"),
        lambda: store.usage_rows(start="2026-12-01", end="2026-12-02"),
        lambda: store.usage_rows(start="2026-12-01", end="2026-12-02", actor_key="acme/u1"),
        lambda: store.take_token("actor:u1", rate=1.0, burst=5, now=time.time()),
    ]
    try:
        for call in calls:
            with pytest.raises(StoreUnavailableError) as caught:
                await call()
            assert isinstance(caught.value.__cause__, redis.ConnectionError)
    finally:
        await store.aclose()
