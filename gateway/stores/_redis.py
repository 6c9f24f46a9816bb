"""``RedisStore``: the store that many gateway processes share, on one Redis, a Sentinel-managed one or a Cluster.

The key layout and record encodings are in ``_redis_layout``; the Lua scripts in
``_redis_scripts``; the pub/sub hub of live tails in ``_redis_hub``; the batching of concurrent
commands into pipelines in ``_redis_batch``; URLs, Sentinel and error mapping in ``_redis_client``.

redis-py sends a command again when a connection drops before its reply arrives, though Redis may
have run it. Writes carry an id the thread remembers (a resent write answers as the first did),
a resent decision finds itself already made, and a resent token claim finds its own nonce.

Sentinel: a ``redis+sentinel://`` URL (see ``_redis_client.connect``) gives a client that follows
the master across failovers (redis-py asks the sentinels again when a connection fails or meets a
demoted master); the call that meets the failover raises ``StoreUnavailableError``.

Cluster: a ``redis+cluster://`` URL or a ``RedisCluster`` client. Every script touches the keys
of one thread, which share the ``{thread_id}`` hash tag (or of one actor's usage, under
``{usage:<sha256>}``), so the layout shards by thread; ``_redis_cluster_batch`` sends each
command to its slot's master. What crosses slots is only the global index entries beside a
script (one key each): the run, approval and queued message ids, the bucketed lease, expiry,
activity, queue, open-approval and recent-run indexes (``_redis_layout``), an owner's list
of threads and the day's index of usage. They cannot be one atomic step with the script, so
the entries that FIND a record are written before the script that makes it (``send_ordered``):
a failure between them leaves an entry naming nothing, which its reader drops, never a thread
marked running (or holding a queued message) that no sweep can find. Entries that may lag
(activity moves, the removal of settled approvals) ride beside the script. Erasing a thread
is one script on its slot, then its index entries (``_redis_threads``). Live events are
``SPUBLISH``ed from the thread's script to its ``{thread}`` channel (sharded pub/sub: only the
thread's node carries them) and the hub subscribes per node (``_redis_cluster_hub``); on one
server they use classic ``PUBLISH``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from .._errors import (
    QueuedMessageNotFoundError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    ThreadParkedError,
)
from ..events import RunEvent, Turn, now_iso
from ..models import MESSAGE_ADAPTER, AssistantMessage, ToolMessage, UserMessage
from ._records import (
    ApprovalRecord,
    ApprovalState,
    Batch,
    Begun,
    ModelStepEntry,
    PreflightEntry,
    QueuedMessage,
    RunRecord,
    ThreadRecord,
    ThreadSummary,
    ToolSettledEntry,
    UsageEntry,
    UsageRow,
    UsageTotals,
)
from ._redis_batch import Command, CommandBatcher
from ._redis_client import AnyRedis, connect, describe, guarded, is_cluster, node_client, redact
from ._redis_cluster_batch import ClusterBatcher
from ._redis_cluster_hub import ClusterHub
from ._redis_history import HistoryCache
from ._redis_hub import PubSubHub
from ._redis_layout import (
    EVENTS,
    JOURNAL,
    NO_SEQ,
    PENDING_HEAD,
    IndexName,
    RedisKeys,
    approval_head,
    approval_json,
    as_text,
    index_member,
    json_array,
    millis,
    parse_events,
    run_parts,
    score_pairs,
    score_text,
)
from ._redis_queue import RedisQueues
from ._redis_scripts import (
    APPLY,
    APPROVALS,
    CHANNEL_IF,
    CLAIM,
    ENSURE,
    LEASE_STATE,
    RECONCILE,
    RENEW,
    SETTLE,
    run_scripts,
)
from ._redis_threads import RedisThreads
from ._redis_usage import RedisUsage
from ._tail import Subscriber, follow

_MAX_SEQ = 2**53
"""No thread gets this far: a larger ``after_seq`` reads nothing (and is no stream id)."""

__all__ = ["RedisStore"]

_RUNS_KEPT = 16_384
"""Runs whose thread a store remembers (``_run_thread``)."""
_KEYS_KEPT = 1_024
"""Runs whose ``APPLY`` keys a store keeps built (the newest)."""

logger = logging.getLogger("gateway.stores.redis")

Entry = ModelStepEntry | ToolSettledEntry | PreflightEntry
Message = UserMessage | AssistantMessage | ToolMessage


def _epoch(iso: str) -> float:
    """An ISO-8601 time (``now_iso``) as UNIX seconds: a sorted set's score."""
    return datetime.fromisoformat(iso).timestamp()


def _name_write(batch: Batch) -> str:
    """Give ``batch`` its write id for good: the same batch written again is the same write."""
    batch.write_id = os.urandom(16).hex()
    return batch.write_id


class RedisStore:
    """The store of many processes: everything in one Redis (a Sentinel-managed one, or a Cluster).

    Writes are one round trip each (a Lua script over the thread's keys, with global index updates
    pipelined beside it). Live tails share one pub/sub connection per store. Redis failures raise
    ``StoreUnavailableError``.
    """

    def __init__(
        self,
        url_or_client: str | AnyRedis,
        *,
        prefix: str = "agora",
        max_connections: int = 128,
        timeout: float | None = 10.0,
        heartbeat: float = 15.0,
        subscribe_timeout: float = 5.0,
        **client_options: Any,
    ) -> None:
        """Connect lazily to Redis.

        Args:
            url_or_client: A ``redis://``, ``rediss://`` or ``unix://`` URL, a Sentinel URL
                (``redis+sentinel://host:26379,host2:26379/service[/db]``), a Cluster URL
                (``redis+cluster://host:6379,host2:6379``), or a ready ``redis.asyncio.Redis``
                or ``redis.asyncio.cluster.RedisCluster`` client (the caller keeps closing it).
            prefix: The namespace of every key (no braces: they delimit the hash tag).
            max_connections: Connections in the pool of a URL-built client. Commands share
                connections through batching, at most the pool's size less 16 sends in flight
                (the rest of the pool serves pub/sub and the rarer calls), for a caller's
                client too.
            timeout: Seconds one store call may take before it raises ``StoreUnavailableError``
                (``None``: no deadline).
            heartbeat: Seconds of pub/sub silence after which the store pings Redis.
            subscribe_timeout: Seconds a new live tail waits for the pub/sub connection.
            **client_options: Passed to the client built from the URL (``socket_timeout``,
                ``retry``, ``ssl_ca_certs``...).
        """
        if not prefix or "{" in prefix or "}" in prefix:
            raise ValueError(f"prefix must be non-empty and contain no braces: {prefix!r}")
        self.prefix = prefix
        self._keys = RedisKeys(prefix)
        self._closed = False
        self._timeout = timeout
        self._extra_clients: list[Redis] = []
        if isinstance(url_or_client, str):
            self._where = redact(url_or_client)
            self._client, self._extra_clients = connect(
                url_or_client, max_connections=max_connections, options=client_options
            )
            self._owns_client = True
        else:
            self._where = describe(url_or_client)
            self._client = url_or_client
            self._owns_client = False
        self._cluster = is_cluster(self._client)
        self._batcher: CommandBatcher | ClusterBatcher
        if isinstance(self._client, RedisCluster):
            cluster = self._client
            self._batcher = ClusterBatcher(
                cluster,
                node_client=functools.partial(node_client, cluster, max_connections=max_connections),
                max_in_flight=max(1, max_connections - 16),
            )
        else:
            pool_size = getattr(self._client.connection_pool, "max_connections", max_connections)
            self._batcher = CommandBatcher(
                self._client, max_in_flight=max(1, pool_size - 16), refuse_cluster=self._where
            )
        self._call = self._batcher.call
        self._publish = "SPUBLISH" if self._cluster else "PUBLISH"
        """How a script publishes a thread's events: sharded on a Cluster (to the thread's node)."""
        self._migrated = False
        self._history = HistoryCache()
        """The history window each thread had when this process last began a run on it."""
        self._empty_queues: dict[str, asyncio.Task[Any] | None] = {}
        """Thread id -> the task whose release write found the thread's queue empty, for the
        drain that follows it in that task (one answer: the next read of another task asks)."""
        self._apply_key_cache: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}
        """(thread id, run id) -> ``APPLY``'s keys and the thread's live channel (``_apply_keys``)."""
        self._run_threads: dict[str, str] = {}
        """Run id -> thread id for runs this process began, claimed or looked up (oldest first)."""
        self._hub: PubSubHub | ClusterHub
        if isinstance(self._client, RedisCluster):
            self._hub = ClusterHub(
                self._client,
                node_client=functools.partial(node_client, self._client, max_connections=4),
                where=self._where,
                parse=parse_events,
                heartbeat=heartbeat,
                subscribe_timeout=subscribe_timeout,
            )
        else:
            self._hub = PubSubHub(
                self._client,
                where=self._where,
                parse=parse_events,
                heartbeat=heartbeat,
                subscribe_timeout=subscribe_timeout,
            )
        parts = (self._client, self._batcher.send, self._keys, self._guard, self._batcher.send_ordered)
        self._threads = RedisThreads(*parts)
        self._queues = RedisQueues(*parts)
        self._usage = RedisUsage(*parts)

    def __repr__(self) -> str:
        return f"RedisStore({self._where!r}, prefix={self.prefix!r})"

    @property
    def client(self) -> AnyRedis:
        """The redis-py client the store uses."""
        return self._client

    @property
    def hub(self) -> PubSubHub | ClusterHub:
        """The pub/sub hub that feeds live tails."""
        return self._hub

    # -- keys ---------------------------------------------------------------------------------------

    def _guard(self) -> guarded:
        return guarded(self._where, self._timeout)

    def channel(self, thread_id: str) -> bytes:
        """The pub/sub channel of a thread's live events."""
        return self._keys.thread(thread_id, "live").encode()

    # -- threads, runs, journal, history ----------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or ``None``."""
        async with self._guard():
            raw = await self._call("HGET", self._keys.thread(thread_id, "thread"), "record")
        return ThreadRecord.model_validate_json(raw) if raw is not None else None

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord:
        """Create ``thread`` unless it exists (one script: two HSETNX); answer the stored one."""
        key = self._keys.thread(thread.thread_id, "thread")
        async with self._guard():
            raw = await ENSURE(self._call, [key], [thread.owner_key, thread.model_dump_json()])
            stored = ThreadRecord.model_validate_json(raw)
            await self._threads.index_ensured(thread, stored)
        return stored

    async def begin_run(
        self,
        run: RunRecord,
        *,
        thread: ThreadRecord,
        batch: Batch,
        lease_owner: str,
        lease_ttl: float,
        history_limit: int | None = None,
        dequeue: str | None = None,
    ) -> Begun:
        """Start ``run`` atomically and apply ``batch``, and read the history, in one round trip.

        The script checks the thread's queue too: a queue that holds a message makes the thread
        busy, and ``dequeue`` (its head) leaves it in the same script. A dequeued message's id
        index goes after, in a second round trip (only then).

        The global entries that find the run (its id, its lease, the staff's recent runs, the
        thread's activity) go first, the script after (in one pipeline on one server, in two
        round trips on a Cluster, where they live on other nodes): a failure between them
        leaves entries that name a run that does not exist, which their readers drop, never a
        thread marked running that no sweep can find. A refused begin takes its entries back.

        Raises:
            ThreadForbiddenError: The thread exists and belongs to someone else.
            ThreadBusyError: Another run is running on the thread, or (without ``dequeue``)
                messages wait in its queue.
            ThreadParkedError: A run on the thread waits for an approval.
            QueuedMessageNotFoundError: ``dequeue`` is not the head of the queue (nothing was written).
        """
        run = run.model_copy(update={"status": "running", "thread_id": thread.thread_id})
        lease_ms = millis(lease_ttl)
        member = index_member(run.thread_id, run.run_id)
        run_index = self._keys.run_index(run.run_id)
        recent = index_member(run.run_id, run.thread_id)

        leases = self._keys.index("leases", thread.thread_id)
        recent_runs = self._keys.index("recent-runs", thread.thread_id)
        before = [
            ("SET", run_index, run.thread_id),
            ("ZADD", leases, time.time() * 1000 + lease_ms, member),
            ("ZADD", recent_runs, _epoch(run.created_at), recent),
        ]
        # After the script in the same pipeline (its slot): the history with the new message in it,
        # only what is new since this process last read it (``HistoryCache``).
        read_history = self._history.command(
            self._keys.thread(thread.thread_id, "thread"),
            self._keys.thread(thread.thread_id, "messages"),
            thread.thread_id,
            history_limit,
        )

        first, results = await self._apply_with(
            thread.thread_id,
            batch,
            run=run,
            begin=(thread.owner_key, thread.model_dump_json(), lease_owner, lease_ms),
            before=before,
            after=[read_history],
            dequeue=dequeue or "",
        )
        if first < 0:
            undo = [("ZREM", leases, member), ("DEL", run_index), ("ZREM", recent_runs, recent)]
            if first == -2:  # someone else's thread: it does not go in this owner's list
                undo.append(self._threads.refused_begin(thread.thread_id, thread.owner_key))
            async with self._guard():
                await run_scripts(self._batcher.send, undo, [])
            if first == -2:
                raise ThreadForbiddenError(f"Thread {thread.thread_id!r} belongs to another actor")
            if first == -4:
                raise ThreadParkedError(f"A run on thread {thread.thread_id!r} waits for an approval")
            if first == -5:
                raise ThreadBusyError(f"Messages wait in the queue of thread {thread.thread_id!r}")
            if first == -6:
                raise QueuedMessageNotFoundError(f"{dequeue!r} is not the first queued message any more")
            raise ThreadBusyError(f"A run is already running on thread {thread.thread_id!r}")
        self._threads.remember_owner(thread.thread_id, thread.owner_key)
        self._know_run(run.run_id, thread.thread_id)
        if dequeue is not None:
            async with self._guard():
                await self._call("DEL", self._keys.queued_index(dequeue))
        history = self._history.answer(thread.thread_id, results[-1], history_limit)
        return Begun(events=self._written(batch.events, first), history=history)

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Apply ``batch`` atomically, in one round trip, and return its events with their ``seq``.

        Raises:
            ThreadNotFoundError: The thread does not exist.
        """
        # A release reads the queue's length after the script: a drain by this task that
        # follows finds an empty queue without asking (``queued_messages``).
        after: list[Command] = [("LLEN", self._keys.thread(thread_id, "queue"))] if batch.release else []
        first, results = await self._apply_with(thread_id, batch, run=batch.run, after=after)
        if after and first >= 0:
            self._note_queue(thread_id, results[1])
        if first == -1:
            if batch.approvals:  # their index entries went out before the script: take them back
                async with self._guard():
                    await run_scripts(
                        self._batcher.send,
                        [
                            command
                            for approval in batch.approvals
                            for command in (
                                ("DEL", self._keys.approval_index(approval.tool_call_id)),
                                (
                                    "ZREM",
                                    self._keys.index("approval-expiry", thread_id),
                                    index_member(thread_id, approval.tool_call_id),
                                ),
                                (
                                    "ZREM",
                                    self._keys.index("open-approvals", thread_id),
                                    index_member(approval.tool_call_id, thread_id),
                                ),
                            )
                        ],
                        [],
                    )
            raise ThreadNotFoundError(f"no thread {thread_id!r}")
        return self._written(batch.events, first)

    def _note_queue(self, thread_id: str, length: Any) -> None:
        """Remember that ``thread_id``'s queue was empty when this task's release wrote (or forget it)."""
        if int(length) != 0:
            self._empty_queues.pop(thread_id, None)
            return
        self._empty_queues[thread_id] = asyncio.current_task()
        if len(self._empty_queues) > _RUNS_KEPT:
            self._empty_queues.pop(next(iter(self._empty_queues)))

    @staticmethod
    def _written(events: list[RunEvent], first: int) -> list[RunEvent]:
        for index, event in enumerate(events):
            event.seq = first + index  # events are the writer's own, fresh objects (as in MemoryStore)
        return events

    async def _apply(self, thread_id: str, batch: Batch, *, run: RunRecord | None) -> int:
        """Run ``APPLY``; returns the first event's seq or a negative refusal code."""
        first, _ = await self._apply_with(thread_id, batch, run=run)
        return first

    def _apply_keys(self, thread_id: str, run_id: str) -> tuple[tuple[str, ...], str]:
        """``APPLY``'s keys for a write of ``run_id`` on ``thread_id`` and the thread's live channel (kept per run)."""
        cached = self._apply_key_cache.get((thread_id, run_id))
        if cached is not None:
            return cached
        keys = self._keys
        names: tuple[str, ...] = ("thread", "events", "messages", "runs", "run-order", f"journal:{run_id}")
        names += (f"lease:{run_id}", "approvals", "pending", "approval-order", "queue", "queued")
        cached = tuple([keys.thread(thread_id, name) for name in names]), keys.thread(thread_id, "live")
        self._apply_key_cache[(thread_id, run_id)] = cached
        if len(self._apply_key_cache) > _KEYS_KEPT:
            self._apply_key_cache.pop(next(iter(self._apply_key_cache)))
        return cached

    async def _apply_with(
        self,
        thread_id: str,
        batch: Batch,
        *,
        run: RunRecord | None,
        begin: tuple[str, str, str, int] | None = None,
        before: Sequence[Command] = (),
        after: Sequence[Command] = (),
        dequeue: str = "",
    ) -> tuple[int, list[Any]]:
        """Run ``APPLY``, with index entries that find what it writes ``before`` it and ``after`` it.

        ``before`` (with the entries of the batch's approvals) goes first, and the script only
        once they are written (``send_ordered``); ``after`` rides beside the script (entries
        that may lag: the activity indexes' moves; reads of the thread's slot).

        Returns the first event's seq (or a negative refusal code) and the results of the
        script and of ``after``, in order.
        """
        run_id = run.run_id if run is not None else ""
        head, rest = run_parts(run, begin=begin is not None) if run is not None else ("", "")
        owner, thread_json, lease_owner, lease_ms = begin or ("", "", "", 0)
        now = repr(time.time())
        keys, live = self._apply_keys(thread_id, run_id)
        args: list[Any] = [
            live,
            "begin" if begin is not None else "write",
            run_id,
            head,
            rest,
            "1" if batch.release else "0",
            owner,
            thread_json,
            lease_owner,
            lease_ms,
            "\n".join([event.model_dump_json(exclude=NO_SEQ) for event in batch.events]),
            "\n".join([entry.model_dump_json() for entry in batch.journal]),
            "\n".join([message.model_dump_json() for message in batch.messages]),
            "\n".join([approval_json(approval) for approval in batch.approvals]),
            json.dumps([approval.tool_call_id for approval in batch.approvals]) if batch.approvals else "",
            batch.write_id or _name_write(batch),
            now,
            dequeue,
            self._publish,
        ]
        if begin is not None:
            index = self._threads.index_begin(thread_id, owner, now)
        elif batch.events:
            index = self._threads.index_write(thread_id, run.actor.key if run is not None else None, now)
        else:
            index = []
        first: list[Command] = list(before)
        for approval in batch.approvals:
            first.append(("SET", self._keys.approval_index(approval.tool_call_id), thread_id))
            member = index_member(thread_id, approval.tool_call_id)
            first.append(("ZADD", self._keys.index("approval-expiry", thread_id), approval.expires_ts, member))
            open_member = index_member(approval.tool_call_id, thread_id)
            open_index = self._keys.index("open-approvals", thread_id)
            if approval.status == "pending":
                first.append(("ZADD", open_index, approval.requested_ts, open_member))
            else:
                first.append(("ZREM", open_index, open_member))
        if begin is not None:
            first.extend(index)  # a begin creates the thread's activity entries: before the script
            index = []
        charges: list[Command] = []
        if batch.usage and not self._cluster:
            # The steps' ledger lines after the script, each added only if the batch applied (by
            # its write id). On a Cluster they are in other slots: ``UsageMeter`` adds them after.
            for entry in batch.usage:
                listed, charge = self._usage.add_commands(entry, applied=(keys[0], args[15]))
                first.extend(listed)
                charges.append(charge)
        async with self._guard():
            if not first and not after and not index:
                return int(await APPLY(self._call, keys, args)), []
            then: list[Command] = [APPLY.command(keys, args), *after, *index, *charges]
            done, results = await self._batcher.send_ordered(first, then)
            for result in (*done, *results[: len(then) - len(charges)]):
                if isinstance(result, Exception):
                    raise result
            if charges and int(results[0]) >= 0:
                # A step whose line failed (not the write) is left to ``UsageMeter``: it adds it
                # again by its write id, with its own retries.
                charged = results[len(then) - len(charges) :]
                batch.charged = not any(isinstance(result, Exception) or result is None for result in charged)
                if batch.charged:
                    for entry in batch.usage:
                        self._usage.indexed(entry)
            return int(results[0]), results[: 1 + len(after)]

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        async with self._guard():
            thread_id = await self._run_thread(run_id)
            if thread_id is None:
                return None
            raw = await self._call("HGET", self._keys.thread(thread_id, "runs"), run_id)
        return RunRecord.model_validate_json(raw) if raw is not None else None

    async def _run_thread(self, run_id: str) -> str | None:
        """The run's thread: known to this process for the runs it began, claimed or looked up, else the index.

        A run's thread never changes, so the answer is kept (a bounded number of runs): the
        process driving a run reads it without the run-id index, a global key that may live on
        another node of a Cluster (one that is down, say).
        """
        known = self._run_threads.get(run_id)
        if known is not None:
            return known
        raw = await self._call("GET", self._keys.run_index(run_id))
        if raw is None:
            return None
        thread_id = as_text(raw)
        self._know_run(run_id, thread_id)
        return thread_id

    def _know_run(self, run_id: str, thread_id: str) -> None:
        self._run_threads[run_id] = thread_id
        if len(self._run_threads) > _RUNS_KEPT:
            self._run_threads.pop(next(iter(self._run_threads)))

    async def thread_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        async with self._guard():
            pipe = self._client.pipeline(transaction=False)
            pipe.lrange(self._keys.thread(thread_id, "run-order"), 0, -1)
            pipe.hgetall(self._keys.thread(thread_id, "runs"))
            order, records = await pipe.execute()
        return [RunRecord.model_validate_json(records[run_id]) for run_id in order if run_id in records]

    async def read_journal(self, thread_id: str, run_id: str) -> list[Entry]:
        """The run's journal, in order."""
        async with self._guard():
            items = await self._call("LRANGE", self._keys.thread(thread_id, f"journal:{run_id}"), 0, -1)
        return JOURNAL.validate_json(json_array(items)) if items else []

    async def get_messages(self, thread_id: str) -> list[Message]:
        """The thread's history, in order."""
        async with self._guard():
            items = await self._call("LRANGE", self._keys.thread(thread_id, "messages"), 0, -1)
        return MESSAGE_ADAPTER.validate_json(json_array(items)) if items else []

    # -- threads as data their owner controls (``_redis_threads``) ---------------------------------

    async def list_threads(
        self, owner_key: str, *, before: tuple[float, str] | None = None, limit: int = 20
    ) -> list[ThreadSummary]:
        """The owner's threads, newest activity first, after ``before`` (a previous page's last pair)."""
        return await self._threads.list_threads(owner_key, before, limit)

    async def rename_thread(self, thread_id: str, title: str | None) -> bool:
        """Give the thread ``title`` (``None``: its first message again)."""
        return await self._threads.rename_thread(thread_id, title)

    async def delete_thread(self, thread_id: str) -> bool:
        """Erase the thread: its keys in one script, then its index entries.

        Raises:
            ThreadBusyError: Runs kept beginning on the thread while it was being erased.
        """
        self._history.forget(thread_id)
        return await self._threads.delete_thread(thread_id)

    async def idle_threads(self, before_ts: float, limit: int = 100) -> list[str]:
        """Ids of threads last written to before ``before_ts``, oldest first."""
        return await self._threads.idle_threads(before_ts, limit)

    async def thread_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """Every approval of the thread, settled or pending, oldest first."""
        return await self._threads.thread_approvals(thread_id)

    # -- the per-thread message queue (``_redis_queue``) -------------------------------------------

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        """Put ``item`` last (``first``: first) in its thread's queue, in one round trip; answer its position.

        Raises:
            ThreadNotFoundError: No such thread.
            QueueFullError: The queue holds ``limit`` messages already (nothing was written).
        """
        self._empty_queues.pop(item.thread_id, None)
        return await self._queues.enqueue(item, limit=limit, first=first)

    async def queued_messages(self, thread_id: str) -> list[QueuedMessage]:
        """The thread's queue, first first.

        The first read by the task whose release write (``write``) found the queue empty answers
        empty without asking: a message queued after that write was queued while the thread
        was free, by a sender that drains it itself (``Runtime.send``), and one queued before
        it was counted.
        """
        noted = self._empty_queues.pop(thread_id, None)
        if noted is not None and noted is asyncio.current_task():
            return []
        return await self._queues.queued_messages(thread_id)

    async def get_queued(self, message_id: str) -> QueuedMessage | None:
        """A queued message by id, or ``None``."""
        return await self._queues.get_queued(message_id)

    async def update_queued(
        self, message_id: str, *, turn: Turn | None = None, first: bool = False
    ) -> QueuedMessage | None:
        """Replace a queued message's ``turn`` and/or move it first; ``None`` when it is gone."""
        return await self._queues.update_queued(message_id, turn=turn, first=first)

    async def remove_queued(self, message_id: str) -> QueuedMessage | None:
        """Take a message out of its queue; ``None`` when it was not queued."""
        return await self._queues.remove_queued(message_id)

    async def clear_queue(self, thread_id: str) -> list[QueuedMessage]:
        """Empty the thread's queue; answer what it held, first first."""
        return await self._queues.clear_queue(thread_id)

    async def queued_threads(self, limit: int = 100) -> list[str]:
        """Ids of threads whose queue holds a message."""
        return await self._queues.queued_threads(limit)

    # -- the event log ------------------------------------------------------------------------------

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        """Events with ``seq > after_seq``, in order (at most ``limit``), by XRANGE on the stream ids."""
        if (limit is not None and limit <= 0) or after_seq >= _MAX_SEQ:
            return []
        start = f"{after_seq + 1}-0" if after_seq >= 0 else "-"
        async with self._guard():
            count = ("COUNT", limit) if limit is not None else ()
            entries = await self._call("XRANGE", self._keys.thread(thread_id, "events"), start, "+", *count)
        if not entries:
            return []
        # Each entry is [id, [field, value]] as Redis sends it: the value is the event's JSON.
        return EVENTS.validate_json(json_array([fields[1] for _, fields in entries]))

    async def last_seq(self, thread_id: str) -> int:
        """The newest ``seq`` of the thread (0 when empty)."""
        async with self._guard():
            raw = await self._call("HGET", self._keys.thread(thread_id, "thread"), "seq")
        return int(raw) if raw is not None else 0

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The log after ``after_seq``, then live events, through the store's one pub/sub connection.

        Raises:
            StoreUnavailableError: Redis cannot be reached to subscribe or read the log.
        """
        subscriber = Subscriber()
        channel = self.channel(thread_id)
        return follow(
            subscriber,
            functools.partial(self.read_events, thread_id),
            after_seq,
            attach=functools.partial(self._hub.attach, channel, subscriber),
            detach=functools.partial(self._hub.detach, channel, subscriber),
        )

    # -- leases -------------------------------------------------------------------------------------

    async def claim_run(self, run_id: str, *, owner: str, ttl: float, expect: frozenset[str]) -> RunRecord | None:
        """Make ``owner`` the run's driver if its status is in ``expect`` and no live lease holds it."""
        async with self._guard():
            thread_id = await self._run_thread(run_id)
            if thread_id is None:
                return None
            lease_ms = millis(ttl)
            keys = [
                self._keys.thread(thread_id, "thread"),
                self._keys.thread(thread_id, "runs"),
                self._keys.thread(thread_id, f"lease:{run_id}"),
            ]
            args = [run_id, owner, lease_ms, now_iso(), *sorted(expect)]
            member = index_member(thread_id, run_id)

            # The lease entry first: a claim that then fails (or did not become ours) leaves an
            # entry a check corrects, never a running run no sweep can find.
            lease = ("ZADD", self._keys.index("leases", thread_id), time.time() * 1000 + lease_ms, member)
            done, (raw,) = await self._batcher.send_ordered([lease], [CLAIM.command(keys, args)])
            for result in (*done, raw):
                if isinstance(result, Exception):
                    raise result
        if raw is None:
            return None
        claimed = RunRecord.model_validate_json(raw)
        self._threads.remember_owner(thread_id, claimed.actor.key)
        return claimed

    async def renew_lease(self, thread_id: str, run_id: str, *, owner: str, ttl: float) -> bool:
        """Extend the lease (compare and set on its owner); ``False`` when ``owner`` lost it.

        The lease index keeps its older score: the next ``expired_leases`` check moves it.
        """
        async with self._guard():
            renewed = await RENEW(self._call, [self._keys.thread(thread_id, f"lease:{run_id}")], [owner, millis(ttl)])
        return bool(renewed)

    async def _due(self, name: IndexName, until: float, limit: int) -> list[tuple[str, Any, float]]:
        """The ``limit`` entries of every bucket of index ``name`` scored up to ``until``, lowest first.

        One round trip reads every bucket (on a Cluster, every node at once); each entry comes
        with the bucket it is in, for corrections.
        """
        keys = self._keys.indexes(name)
        replies = await self._batcher.send(
            [("ZRANGEBYSCORE", key, "-inf", repr(until), "WITHSCORES", "LIMIT", 0, limit) for key in keys]
        )
        entries: list[tuple[str, Any, float]] = []
        for key, flat in zip(keys, replies, strict=True):
            if isinstance(flat, Exception):
                raise flat
            entries.extend((key, member, float(score)) for member, score in score_pairs(flat))
        entries.sort(key=lambda entry: entry[2])
        return entries[:limit]

    async def expired_leases(self, limit: int = 100) -> list[tuple[str, str]]:
        """Running runs whose lease lapsed: index candidates (from every bucket) checked against their thread's keys."""
        async with self._guard():
            due = await self._due("leases", time.time() * 1000, limit)
            if not due:
                return []
            candidates = [(json.loads(member), key, member, score) for key, member, score in due]
            checks = [
                LEASE_STATE.command(
                    [self._keys.thread(thread_id, "runs"), self._keys.thread(thread_id, f"lease:{run_id}")], [run_id]
                )
                for (thread_id, run_id), _, _, _ in candidates
            ]
            states = await run_scripts(self._batcher.send, checks, [LEASE_STATE])
            expired: list[tuple[str, str]] = []
            corrections: dict[str, list[Any]] = {}
            for ((thread_id, run_id), key, member, score), state in zip(candidates, states, strict=True):
                if state == 0:
                    expired.append((thread_id, run_id))
                else:
                    corrections.setdefault(key, []).extend([member, score_text(score), "" if state < 0 else state])
            if corrections:
                await run_scripts(
                    self._batcher.send,
                    [RECONCILE.command([key], triplets) for key, triplets in corrections.items()],
                    [],
                )
        return expired

    # -- approvals ---------------------------------------------------------------------------------

    async def _approval_thread(self, tool_call_id: str) -> str | None:
        raw = await self._call("GET", self._keys.approval_index(tool_call_id))
        return as_text(raw) if raw is not None else None

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None:
        """The approval, or ``None``."""
        async with self._guard():
            thread_id = await self._approval_thread(tool_call_id)
            if thread_id is None:
                return None
            raw = await self._call("HGET", self._keys.thread(thread_id, "approvals"), tool_call_id)
        return ApprovalRecord.model_validate_json(raw) if raw is not None else None

    async def settle_approval(
        self,
        tool_call_id: str,
        *,
        status: ApprovalState,
        decided_by: str | None,
        via: str | None,
        reason: str | None = None,
        remember: bool = False,
    ) -> ApprovalRecord | None:
        """Settle a pending approval atomically (compare and set); ``None`` when not pending."""
        async with self._guard():
            thread_id = await self._approval_thread(tool_call_id)
            if thread_id is None:
                return None
            head = approval_head(
                status=status, decided_by=decided_by, via=via, reason=reason, decided_at=now_iso(), remember=remember
            )
            keys = [
                self._keys.thread(thread_id, "approvals"),
                self._keys.thread(thread_id, "pending"),
                self._keys.thread(thread_id, "remembered"),
            ]
            args = [tool_call_id, PENDING_HEAD, head, "1" if remember and status == "approved" else "0"]
            member = index_member(thread_id, tool_call_id)

            # Settled now or before, the approval is not pending: drop it from the expiry index.
            commands = [
                SETTLE.command(keys, args),
                ("ZREM", self._keys.index("approval-expiry", thread_id), member),
                ("ZREM", self._keys.index("open-approvals", thread_id), index_member(tool_call_id, thread_id)),
            ]
            raw = (await run_scripts(self._batcher.send, commands, [SETTLE]))[0]
        return ApprovalRecord.model_validate_json(raw) if raw is not None else None

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """The thread's pending approvals, oldest first."""
        async with self._guard():
            items = await APPROVALS(
                self._call, [self._keys.thread(thread_id, "approvals"), self._keys.thread(thread_id, "pending")], []
            )
        approvals = [ApprovalRecord.model_validate_json(raw) for raw in items if raw is not None]
        return [approval for approval in approvals if approval.status == "pending"]

    async def open_approvals(
        self, *, before: tuple[float, str] | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        """Pending approvals of every thread, newest ``(requested_ts, tool_call_id)`` first, after ``before``."""
        return await self._queues.open_approvals(before, limit)

    async def recent_runs(self, *, limit: int = 50) -> list[RunRecord]:
        """The newest created runs of every thread, newest first."""
        return await self._queues.recent_runs(limit)

    async def expired_approvals(self, now: float, limit: int = 100) -> list[ApprovalRecord]:
        """Pending approvals past their expiry (every bucket); index entries of settled ones are dropped on the way."""
        lapsed: list[ApprovalRecord] = []
        async with self._guard():
            for _ in range(8):
                due = await self._due("approval-expiry", now, limit)
                if not due:
                    break
                pairs = [json.loads(member) for _, member, _ in due]
                records = await run_scripts(
                    self._batcher.send,
                    [("HGET", self._keys.thread(thread_id, "approvals"), call_id) for thread_id, call_id in pairs],
                    [],
                )
                stale: dict[str, list[Any]] = {}
                for (key, member, _), raw in zip(due, records, strict=True):
                    approval = ApprovalRecord.model_validate_json(raw) if raw is not None else None
                    if approval is not None and approval.status == "pending" and approval.lapsed(now):
                        lapsed.append(approval)
                    else:
                        stale.setdefault(key, []).append(member)
                if stale:
                    await run_scripts(
                        self._batcher.send, [("ZREM", key, *members) for key, members in stale.items()], []
                    )
                if len(lapsed) >= limit or not stale or len(due) < limit:
                    break
        return lapsed[:limit]

    async def is_remembered(self, thread_id: str, tool: str) -> bool:
        """Whether calls of ``tool`` in the thread are approved without asking."""
        async with self._guard():
            found = await self._call("SISMEMBER", self._keys.thread(thread_id, "remembered"), tool)
        return bool(found)

    # -- confirm tokens -----------------------------------------------------------------------------

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a confirm token once (``SET NX PXAT``: the claim expires with the token)."""
        key, nonce = self._keys.confirm_token(token_hash), uuid.uuid4().hex
        async with self._guard():
            if await self._call("SET", key, nonce, "NX", "PXAT", max(1, int(expires_at * 1000))):
                return True
            # A claim sent again after a lost reply finds its own nonce: it was ours.
            return as_text(await self._call("GET", key) or b"") == nonce

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim."""
        async with self._guard():
            await self._client.delete(self._keys.confirm_token(token_hash))

    # -- channel state ------------------------------------------------------------------------------

    async def channel_get(self, key: str) -> Any:
        """A channel's JSON value, or ``None``."""
        async with self._guard():
            raw = await self._client.get(self._keys.channel_state(key))
        return json.loads(raw) if raw is not None else None

    async def channel_set(self, key: str, value: Any, *, ttl: float | None = None) -> None:
        """Store a channel's JSON value, optionally expiring after ``ttl`` seconds."""
        name = self._keys.channel_state(key)
        async with self._guard():
            if ttl is not None and ttl <= 0:
                await self._client.delete(name)
            else:
                await self._client.set(name, json.dumps(value), px=millis(ttl) if ttl is not None else None)

    async def channel_claim(self, key: str, *, ttl: float, value: Any = True) -> bool:
        """Set ``key`` only if absent (``SET NX PX``); True if claimed."""
        async with self._guard():
            claimed = await self._client.set(self._keys.channel_state(key), json.dumps(value), nx=True, px=millis(ttl))
        return bool(claimed)

    async def channel_delete(self, key: str) -> None:
        """Drop a key."""
        async with self._guard():
            await self._client.delete(self._keys.channel_state(key))

    async def channel_delete_if(self, key: str, expected: Any) -> bool:
        """Drop ``key`` only while it holds ``expected`` (one script: compare and delete)."""
        async with self._guard():
            done = await CHANNEL_IF(self._call, [self._keys.channel_state(key)], [json.dumps(expected), "del", 0])
        return bool(done)

    async def channel_renew_if(self, key: str, expected: Any, *, ttl: float) -> bool:
        """Give ``key`` a new ``ttl`` only while it holds ``expected`` (one script: compare and expire)."""
        async with self._guard():
            done = await CHANNEL_IF(
                self._call, [self._keys.channel_state(key)], [json.dumps(expected), "ttl", millis(ttl)]
            )
        return bool(done)

    # -- usage ledger and rate limits (``_redis_usage``) --------------------------------------------

    async def add_usage(self, entry: UsageEntry) -> UsageTotals:
        """Add one step to its actor's ledger line and day and month totals (one script)."""
        return await self._usage.add_usage(entry)

    async def usage_totals(self, actor_key: str, day: str) -> UsageTotals:
        """The actor's tokens on ``day`` and in its month."""
        return await self._usage.usage_totals(actor_key, day)

    async def usage_rows(
        self, *, start: str, end: str, actor_key: str | None = None, limit: int = 1000
    ) -> list[UsageRow]:
        """Ledger lines within ``start..end`` (at most 366 days), ordered."""
        return await self._usage.usage_rows(start=start, end=end, actor_key=actor_key, limit=limit)

    async def take_token(self, key: str, *, rate: float, burst: float, now: float) -> float:
        """Take a token from ``key``'s bucket (one script); ``0.0``, or the seconds until one is there."""
        return await self._usage.take_token(key, rate=rate, burst=burst, now=now)

    # -- lifecycle ----------------------------------------------------------------------------------

    async def ping(self) -> None:
        """Check that Redis answers (every master of a Cluster); the first time, migrate the old indexes.

        Raises:
            StoreUnavailableError: It does not; the message names the URL (password redacted).
        """
        try:
            async with self._guard():
                if isinstance(self._batcher, ClusterBatcher):
                    await self._batcher.ping()  # every master: a thread may live on any of them
                else:
                    await self._client.ping()
        except StoreUnavailableError as exc:
            raise StoreUnavailableError(f"Cannot reach Redis at {self._where}: {exc.__cause__}") from exc.__cause__
        if not self._migrated:
            # Once per store: the single-key indexes of an earlier version move into their buckets.
            moved = await self._threads.migrate_legacy_indexes()
            self._migrated = True
            if moved:
                logger.info("moved %d entries of the old single-key indexes into their buckets", moved)

    async def aclose(self) -> None:
        """Stop the pub/sub hub and close the connections (those of a client the store built); idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._hub.aclose()
        await self._batcher.aclose()
        if self._owns_client:
            for client in (self._client, *self._extra_clients):
                await client.aclose()
