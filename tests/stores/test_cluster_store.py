"""The store on a real 3-master Redis Cluster: threads on every node, and writes across slots failed on purpose.

The first tests share the session's cluster (``redis_cluster``) and leave it as they found it.
The fault tests kill a master of a cluster of this module's own (no replica: the dead master's
slots are away until it comes back) and start it again before the next test.

A begin's index entries (the run's id, the lease and recent-run buckets) go out before the
thread's script (``send_ordered``), and the buckets sit on the thread's node but where a
range of slots ends inside their sixteenth: the thread ids here are chosen so that the
entries and the script land where each test needs them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as redis
from redis.crc import key_slot

from gateway import StoreUnavailableError, ThreadBusyError
from gateway.events import RunStartedEvent
from gateway.stores import Batch, QueuedMessage, RedisStore
from gateway.stores._redis_layout import index_member

from ..conftest import drop_cluster_prefix
from ._cluster import ClusterServers, node_of_slot
from ._helpers import approval, begin, delta, eventually, finish, new_run, thread_of
from .test_queue import begin_queued, queued

pytestmark = pytest.mark.redis
RUNNING = frozenset({"running"})


@pytest.fixture
async def cluster_store(redis_cluster: ClusterServers, prefix: str) -> AsyncIterator[RedisStore]:
    """A store on the session's cluster under this test's prefix, its keys dropped from every master after."""
    store = RedisStore(redis_cluster.url, prefix=prefix)
    try:
        yield store
    finally:
        await store.aclose()
        await drop_cluster_prefix(await redis_cluster.master_ports(), prefix)


def _start(servers: ClusterServers) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, servers.start()).result()


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterServers]:
    """This module's cluster, for the tests that kill a master (each starts it again)."""
    servers = ClusterServers(tmp_path_factory.mktemp("faults-cluster"), masters=3)
    try:
        _start(servers)
        yield servers
    finally:
        servers.stop()


@pytest.fixture
async def faults(own_cluster: ClusterServers, prefix: str) -> AsyncIterator[ClusterServers]:
    """``own_cluster`` for one test: every master running again after it, the test's keys dropped."""
    try:
        yield own_cluster
    finally:
        for node in own_cluster.nodes:
            if node.process is None:
                await node.start()
        await own_cluster.wait_ok()
        await drop_cluster_prefix(await own_cluster.master_ports(), prefix)


# -- every node ----------------------------------------------------------------------------------


async def test_every_operation_works_on_a_thread_of_every_node(
    redis_cluster: ClusterServers, cluster_store: RedisStore, prefix: str
) -> None:
    store = cluster_store
    threads = await redis_cluster.threads_on_every_node(stem=f"every-{uuid.uuid4().hex[:6]}")
    assert len(threads) == 3
    for port, thread_id in threads.items():
        assert await redis_cluster.port_of(store._keys.thread(thread_id, "thread")) == port

        run, events = await begin(store, thread_id)
        assert [e.seq for e in events] == [1]
        written = await store.write(thread_id, Batch(events=[delta(run, "a"), delta(run, "b")]))
        assert [e.seq for e in written] == [2, 3]
        record = approval(run)
        await store.write(thread_id, Batch(run=run, approvals=[record]))
        assert [a.tool_call_id for a in await store.pending_approvals(thread_id)] == [record.tool_call_id]
        assert record.tool_call_id in [a.tool_call_id for a in await store.open_approvals()]
        settled = await store.settle_approval(record.tool_call_id, status="approved", decided_by="u1", via="web")
        assert settled is not None and settled.status == "approved"
        assert await store.settle_approval(record.tool_call_id, status="rejected", decided_by="u2", via="web") is None
        await finish(store, run)
        assert (await store.get_run(run.run_id)).status == "completed"  # type: ignore[union-attr]

        # A lease that lapses: the sweep finds it (in the thread's bucket), another owner claims the run.
        lapsing, _ = await begin(store, thread_id, ttl=0.05)

        async def lapsed(thread_id: str = thread_id, run_id: str = lapsing.run_id) -> bool:
            return (thread_id, run_id) in await store.expired_leases()

        await eventually(lapsed)
        claimed = await store.claim_run(lapsing.run_id, owner="p2", ttl=30, expect=RUNNING)
        assert claimed is not None and claimed.run_id == lapsing.run_id
        assert (thread_id, lapsing.run_id) not in await store.expired_leases()
        await finish(store, claimed)

        item = queued(thread_id)
        await store.enqueue_message(item, limit=10)
        assert [q.message_id for q in await store.queued_messages(thread_id)] == [item.message_id]
        assert thread_id in await store.queued_threads()
        assert (await store.get_queued(item.message_id)) == item
        dequeued = await begin_queued(store, thread_id, item.message_id)
        assert await store.queued_messages(thread_id) == []
        assert thread_id not in await store.queued_threads()
        await finish(store, (await store.get_run(dequeued)))  # type: ignore[arg-type]

        seqs = [e.seq for e in await store.read_events(thread_id)]
        assert seqs == list(range(1, len(seqs) + 1)) and await store.last_seq(thread_id) == seqs[-1]
        assert [e.seq for e in await store.read_events(thread_id, after_seq=1, limit=2)] == [2, 3]
        assert [r.run_id for r in await store.thread_runs(thread_id)][:2] == [run.run_id, lapsing.run_id]

    recent = {r.run_id for r in await store.recent_runs(limit=50)}
    assert len(recent) == 9, "three runs of each node's thread, from the buckets of every node"
    counts = await redis_cluster.keys_per_node(f"{prefix}:*")
    assert len(counts) == 3 and all(count > 0 for count in counts.values()), counts
    for port, thread_id in threads.items():
        thread_keys = await redis_cluster.keys_per_node(f"{prefix}:{{{thread_id}}}:*")
        assert thread_keys[port] > 0 and sum(thread_keys.values()) == thread_keys[port], thread_keys

        assert await store.delete_thread(thread_id)
        assert await store.get_thread(thread_id) is None
        assert await store.read_events(thread_id) == []
        assert await redis_cluster.keys_per_node(f"{prefix}:{{{thread_id}}}:*") == dict.fromkeys(counts, 0)
    assert await store.recent_runs(limit=50) == []
    assert await store.open_approvals() == []


async def test_one_owners_threads_on_every_node_list_together(
    redis_cluster: ClusterServers, cluster_store: RedisStore
) -> None:
    store = cluster_store
    threads = await redis_cluster.threads_on_every_node(stem=f"owner-{uuid.uuid4().hex[:6]}")
    for thread_id in threads.values():
        run, _ = await begin(store, thread_id, owner="shared")
        await finish(store, run)
    page = await store.list_threads(thread_of("x", "shared").owner_key, limit=10)
    assert sorted(t.thread_id for t in page) == sorted(threads.values())


# -- writes across slots, failed on purpose ---------------------------------------------------------


async def _thread_apart(
    cluster: ClusterServers, store: RedisStore, *, index_on_thread_node: bool
) -> tuple[str, int, int]:
    """A thread id, its node, and the node of its lease bucket: the same node or not, as asked."""
    slots = await cluster.slots()
    for n in range(100_000):
        thread_id = f"apart-{uuid.uuid4().hex[:4]}-{n}"
        node = node_of_slot(slots, key_slot(thread_id.encode()))
        bucket = store._keys.index("leases", thread_id)
        bucket_node = node_of_slot(slots, key_slot(bucket.encode()))
        if (bucket_node == node) == index_on_thread_node:
            return thread_id, node, bucket_node
    raise LookupError("no such thread id")


def _run_on(slots: list[list[object]], store: RedisStore, thread_id: str, port: int, *, on: bool = True) -> object:
    """A new run of ``thread_id`` whose run-id index key is on the master at ``port`` (or not, ``on=False``)."""
    while True:
        run = new_run(thread_id)
        if (node_of_slot(slots, key_slot(store._keys.run_index(run.run_id).encode())) == port) == on:
            return run


async def test_the_threads_node_dead_after_its_index_entries_strands_nothing(
    faults: ClusterServers, prefix: str
) -> None:
    """The entries that find a run are written, then the thread's own node refuses the script."""
    store = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    try:
        thread_id, node, bucket_node = await _thread_apart(faults, store, index_on_thread_node=False)
        slots = await faults.slots()
        run = _run_on(slots, store, thread_id, node, on=False)  # its id index lands on a live node
        await store.ping()  # a running gateway's store: connected to every node, the slot map read
        faults.kill(node)
        batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])  # type: ignore[attr-defined]
        with pytest.raises(StoreUnavailableError):
            await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=0.2)  # type: ignore[arg-type]
        leftover = redis.Redis(port=bucket_node)
        try:
            member = index_member(thread_id, run.run_id)  # type: ignore[attr-defined]
            assert await leftover.zscore(store._keys.index("leases", thread_id), member) is not None, (
                "the lease entry was written before the script (the second write is the one that failed)"
            )
        finally:
            await leftover.aclose()

        await faults.restart(node)
        await faults.wait_ok()
        assert await store.get_run(run.run_id) is None  # type: ignore[attr-defined]
        assert await store.get_thread(thread_id) is None
        again, events = await begin(store, thread_id)  # not busy: nothing marks the thread running
        assert [e.seq for e in events] == [1]
        await finish(store, again)

        async def dropped() -> bool:  # the leftover lease names no run: the check drops it
            await store.expired_leases()
            client = redis.Redis(port=bucket_node)
            try:
                return await client.zscore(store._keys.index("leases", thread_id), member) is None
            finally:
                await client.aclose()

        await asyncio.sleep(0.25)  # the leftover's score (its lease) lapses first
        await eventually(dropped)
        assert [r.run_id for r in await store.thread_runs(thread_id)] == [again.run_id]
    finally:
        await store.aclose()


async def test_the_lease_buckets_node_dead_leaves_the_thread_untouched(faults: ClusterServers, prefix: str) -> None:
    """The first write (the index entries) fails: the script never runs, the thread is not marked running."""
    store = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    try:
        thread_id, node, bucket_node = await _thread_apart(faults, store, index_on_thread_node=False)
        await store.ping()
        faults.kill(bucket_node)
        run = new_run(thread_id)
        batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])
        with pytest.raises(StoreUnavailableError):
            await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)
        # The thread's own node is up: nothing of the begin is on it.
        assert await store.get_thread(thread_id) is None
        assert await store.read_events(thread_id) == []
        assert await store.thread_runs(thread_id) == []
        client = redis.Redis(port=node)
        try:
            assert [k async for k in client.scan_iter(match=f"{prefix}:{{{thread_id}}}:*")] == []
        finally:
            await client.aclose()

        await faults.restart(bucket_node)
        await faults.wait_ok()
        again, events = await begin(store, thread_id)
        assert [e.seq for e in events] == [1]
        await finish(store, again)
    finally:
        await store.aclose()


async def test_a_dead_master_takes_only_its_own_threads_away(faults: ClusterServers, prefix: str) -> None:
    """No replica: the dead master's threads answer unavailable; threads of the other nodes keep working.

    A run's id index (``P:run:<run id>``) is a global key: a begin whose index lands on the dead
    master is refused as unavailable before its thread is touched (the index goes first), and the
    thread begins again at once with another run (the runtime's next try): never stranded.
    """
    store = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    try:
        threads = await faults.threads_on_every_node(stem=f"dead-{uuid.uuid4().hex[:6]}")
        # Not the URL's first node: that one dead is a case of its own (the test after the next).
        dead = next(port for port in threads if port != faults.nodes[0].port)
        alive = [port for port in threads if port != dead]
        faults.kill(dead)
        with pytest.raises(StoreUnavailableError):
            await begin(store, threads[dead])
        with pytest.raises(StoreUnavailableError):
            await store.read_events(threads[dead])
        slots = await faults.slots()
        failures: list[str] = []
        for port in alive:
            thread_id = threads[port]
            for on_dead in (True, False):
                run = _run_on(slots, store, thread_id, dead, on=on_dead)
                batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])  # type: ignore[attr-defined]
                try:
                    await store.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)  # type: ignore[arg-type]
                except StoreUnavailableError:
                    if not on_dead:
                        failures.append(f"thread on {port}, run id index on a live node: refused")
                    assert await store.get_thread(thread_id) is None or not await store.thread_runs(thread_id)
                    continue
                if on_dead:
                    failures.append(f"thread on {port}: a begin whose run id index is on the dead node went through")
                await store.write(thread_id, Batch(events=[delta(run, "x")]))  # type: ignore[arg-type]
                stored = await store.get_run(run.run_id)  # type: ignore[attr-defined]
                assert stored is not None
                await finish(store, stored)
            seqs = [e.seq for e in await store.read_events(thread_id)]
            assert seqs == list(range(1, len(seqs) + 1)) and seqs, seqs
        assert failures == []
    finally:
        await store.aclose()


async def test_a_plain_url_of_one_node_never_leaks_a_raw_redis_error(
    redis_cluster: ClusterServers, prefix: str
) -> None:
    """``redis://<one node>`` of a cluster: each call works or raises ``StoreUnavailableError``."""
    threads = await redis_cluster.threads_on_every_node(stem=f"plain-{uuid.uuid4().hex[:6]}")
    port = next(iter(threads))
    plain = RedisStore(f"redis://127.0.0.1:{port}/0", prefix=prefix, timeout=2.0)
    proper = RedisStore(redis_cluster.url, prefix=prefix)
    outcomes: dict[str, str] = {}
    try:
        for node, thread_id in threads.items():
            begun: list[str] = []

            async def begin_plain(t: str = thread_id, begun: list[str] = begun) -> None:
                run, _ = await begin(plain, t)
                begun.append(run.run_id)

            for name, call in (
                ("begin", begin_plain),
                ("read", lambda t=thread_id: plain.read_events(t)),
                ("sweep", plain.expired_leases),
                ("queued", plain.queued_threads),
            ):
                try:
                    await call()
                    outcomes[f"{name}@{node}"] = "ok"
                except StoreUnavailableError:
                    outcomes[f"{name}@{node}"] = "unavailable"
            for run_id in begun:  # a plain begin that worked: its run ends through the cluster URL
                done = await proper.get_run(run_id)
                assert done is not None
                await finish(proper, done)
            # (Whether a failed plain begin stranded its thread: test_a_plain_url_begin_whose_run_index_is_moved...)
        assert set(outcomes.values()) <= {"ok", "unavailable"}, outcomes
    finally:
        await plain.aclose()
        await proper.aclose()
        await drop_cluster_prefix(await redis_cluster.master_ports(), prefix)


async def test_a_queue_survives_its_threads_node_restarting(faults: ClusterServers, prefix: str) -> None:
    """A message queued on a thread of a node SIGKILLed and started again (AOF, appendfsync always) is still
    there, listed, and starts once."""
    store = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    try:
        threads = await faults.threads_on_every_node(stem=f"q-{uuid.uuid4().hex[:6]}")
        port, thread_id = next(iter(threads.items()))
        run, _ = await begin(store, thread_id)
        await finish(store, run)
        item: QueuedMessage = queued(thread_id)
        await store.enqueue_message(item, limit=10)
        faults.kill(port)
        started = time.monotonic()
        await faults.restart(port)
        await faults.wait_ok()
        assert time.monotonic() - started < 30
        assert thread_id in await store.queued_threads()
        await begin_queued(store, thread_id, item.message_id)
        assert await store.queued_messages(thread_id) == []
    finally:
        await store.aclose()


async def test_the_first_node_of_the_url_dead_takes_only_its_own_threads_away(
    faults: ClusterServers, prefix: str
) -> None:
    """A running store and one (re)started during the outage: threads of the other nodes still read, after a
    call that met the dead node too."""
    threads = await faults.threads_on_every_node(stem=f"cold-{uuid.uuid4().hex[:6]}")
    first = faults.nodes[0].port
    warm = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    await warm.ping()
    faults.kill(first)
    cold = RedisStore(faults.url, prefix=prefix, timeout=2.0)
    failures: list[str] = []
    try:
        for name, store in (("running store", warm), ("store made during the outage", cold)):
            with pytest.raises(StoreUnavailableError):  # the dead node's thread: away (the client meets the dead node)
                await store.read_events(threads[first])
            for port, thread_id in threads.items():
                if port == first:
                    continue
                try:
                    assert await store.get_thread(thread_id) is None
                    assert await store.read_events(thread_id) == []
                except StoreUnavailableError as exc:
                    failures.append(f"{name}, thread on live node {port}: {exc}")
        assert failures == [], failures
    finally:
        await warm.aclose()
        await cold.aclose()


async def test_a_plain_url_begin_whose_run_index_is_moved_strands_nothing(
    redis_cluster: ClusterServers, prefix: str
) -> None:
    """``redis://<node>``, a thread of that node, a run whose id index is on another node: the index write is
    MOVED. On one connection the script beside it still runs; the thread must not be left running with no
    run to find (the issue's stranded thread)."""
    port = (await redis_cluster.master_ports())[0]
    plain = RedisStore(f"redis://127.0.0.1:{port}/0", prefix=prefix, timeout=2.0)
    proper = RedisStore(redis_cluster.url, prefix=prefix)
    try:
        slots = await redis_cluster.slots()
        for n in range(100_000):  # the thread and its lease bucket on the node: only the run's id index is away
            thread_id = f"moved-{uuid.uuid4().hex[:4]}-{n}"
            if (
                node_of_slot(slots, key_slot(thread_id.encode())) == port
                and node_of_slot(slots, key_slot(plain._keys.index("leases", thread_id).encode())) == port
            ):
                break
        run = _run_on(slots, plain, thread_id, port, on=False)
        batch = Batch(events=[RunStartedEvent(thread_id=thread_id, run_id=run.run_id, agent="default")])  # type: ignore[attr-defined]
        with pytest.raises(StoreUnavailableError, match=r"redis\+cluster://"):
            await plain.begin_run(run, thread=thread_of(thread_id), batch=batch, lease_owner="p1", lease_ttl=30)  # type: ignore[arg-type]
        try:
            again, _ = await begin(proper, thread_id)
        except ThreadBusyError:
            stored = await proper.get_run(run.run_id)  # type: ignore[attr-defined]
            raise AssertionError(
                f"stranded: the thread is running, get_run of its run gives {stored!r}, "
                f"thread_runs: {[(r.run_id, r.status) for r in await proper.thread_runs(thread_id)]}"
            ) from None
        await finish(proper, again)
    finally:
        await plain.aclose()
        await proper.aclose()
        await drop_cluster_prefix(await redis_cluster.master_ports(), prefix)
