"""The turn rate limit's buckets are the store's: apps sharing a store share them; a store down refuses (503)."""

from __future__ import annotations

import time

import pytest

from gateway import SERVICES, RateLimitedError, Runtime, StoreUnavailableError, create_app
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore, RedisStore
from tests.stores._server import free_port
from tools import Actor

from .conftest import ALICE, settings


def never(request: ModelRequest, index: int) -> ScriptStep:
    raise AssertionError("no turn runs here: only the buckets are charged")


async def test_two_apps_on_one_store_take_from_one_bucket() -> None:
    store = MemoryStore()
    runtime = Runtime(tools=[], store=store, model=ScriptedModel(never))
    try:
        first, second = (create_app(settings(turn_burst=2, turn_rate_per_minute=1), runtime=runtime) for _ in range(2))
        await first[SERVICES].limit(ALICE)
        await second[SERVICES].limit(ALICE)
        with pytest.raises(RateLimitedError) as refused:
            await first[SERVICES].limit(ALICE)
        assert 0 < refused.value.retry_after <= 60
        assert first[SERVICES].metrics.rate_limited._value.get() == 1
        # The bucket is in the store, under the turns' own namespace.
        wait = await store.take_token(f"turns:actor:{ALICE.key}", rate=1 / 60, burst=2, now=time.time())
        assert wait > 0
        # An anonymous actor also draws from its address's bucket: a new visitor there is refused too.
        visitor, another = Actor(id="anon:v1"), Actor(id="anon:v2")
        await first[SERVICES].limit(visitor, "203.0.113.9")
        await second[SERVICES].limit(another, "203.0.113.9")
        with pytest.raises(RateLimitedError):
            await second[SERVICES].limit(Actor(id="anon:v3"), "203.0.113.9")
        await second[SERVICES].limit(Actor(id="anon:v3"), "203.0.113.10")
    finally:
        await runtime.aclose()


async def test_an_ipv6_visitor_draws_from_its_64s_bucket_not_one_per_address() -> None:
    runtime = Runtime(tools=[], store=MemoryStore(), model=ScriptedModel(never))
    try:
        services = create_app(settings(turn_burst=2, turn_rate_per_minute=1), runtime=runtime)[SERVICES]
        await services.limit(Actor(id="anon:a"), "2001:db8:1:2::1")
        await services.limit(Actor(id="anon:b"), "2001:db8:1:2:ffff::9")
        with pytest.raises(RateLimitedError):  # another address of the same /64, a new cookie
            await services.limit(Actor(id="anon:c"), "2001:db8:1:2:dead:beef:0:1")
        await services.limit(Actor(id="anon:d"), "2001:db8:1:3::1")  # another /64
        await services.limit(Actor(id="anon:e"), "::ffff:198.51.100.7")  # IPv4-mapped: its IPv4 bucket
        await services.limit(Actor(id="anon:f"), "198.51.100.7")
        with pytest.raises(RateLimitedError):
            await services.limit(Actor(id="anon:g"), "198.51.100.7")
    finally:
        await runtime.aclose()


async def test_a_store_that_is_down_refuses_the_message_rather_than_let_it_through() -> None:
    store = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="down", timeout=2)
    runtime = Runtime(tools=[], store=store, model=ScriptedModel(never))
    try:
        services = create_app(settings(turn_burst=2), runtime=runtime)[SERVICES]
        with pytest.raises(StoreUnavailableError) as refused:
            await services.limit(ALICE)
        assert refused.value.status == 503
        assert services.metrics.rate_limited._value.get() == 0  # not a rate limit: an outage
    finally:
        await runtime.aclose()
