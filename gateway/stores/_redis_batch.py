"""``CommandBatcher``: commands that pile up while others are in flight go to Redis as one pipeline.

A gateway process drives many runs at once, and each store call is one small command. On a busy
process most of a command's cost is the socket write and the pool checkout, not Redis. When no
command is in flight, a call is sent at once from the caller's task (a quiet process pays
nothing); while some are, new calls wait for the end of the loop turn and go out together as one
pipeline (no MULTI: each command runs as if sent alone, in the order issued).

The batcher talks to its connections itself rather than through ``Redis.execute_command``: it
packs commands with hiredis (redis-py's asyncio client packs in Python, about 25 µs for a
script call with its two dozen arguments), keeps the connections it used instead of checking
them in and out of the pool, and returns replies as Redis sent them (no response callbacks:
``XRANGE`` gives ``[id, [field, value, ...]]`` pairs). Failures follow redis-py's own rules: a
connection error or timeout disconnects and the connection's ``Retry`` sends again.

Each reconnection goes through the connection's ``connect``, so a Sentinel-managed connection
asks the sentinels where the master is now. A connection whose send failed (the retries spent)
or was interrupted is closed and given back to the pool, never kept: the next send checks out
one the pool connects anew.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError, NoScriptError, ResponseError

from .._errors import StoreUnavailableError

__all__ = ["SCRIPT_SOURCES", "CommandBatcher", "Round", "Sender"]

SCRIPT_SOURCES: dict[str, str] = {}
"""Every Lua script the stores call by SHA1 (``_redis_scripts.LuaScript`` registers itself), so
a batcher that meets NOSCRIPT loads it on the server that answered and sends again."""

Command = tuple[Any, ...]
"""``execute_command`` arguments: the command's name, then its arguments."""

_Pending = tuple[Command, "asyncio.Future[Any]", int]
"""A command waiting for a flush, its caller's future, and its send's number (a send's
commands stay in one pipeline, in order)."""


class Sender:
    """What both batchers share: ``call`` on top of their ``send``."""

    async def send(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands; each reply or error (as a value), in order."""
        raise NotImplementedError

    async def call(self, *command: Any) -> Any:
        """Send one command and return its reply (or raise its error)."""
        (result,) = await self.send([command])
        if isinstance(result, Exception):
            raise result
        return result


class CommandBatcher(Sender):
    """Coalesces concurrent commands into pipelines on one client.

    Each flush is a task the batcher owns; ``aclose`` cancels those in flight (their callers get
    ``CancelledError``) and refuses new commands.
    """

    def __init__(
        self, client: Redis, *, max_in_flight: int = 48, max_batch: int = 512, refuse_cluster: str | None = None
    ) -> None:
        """Batch commands for ``client``.

        Args:
            client: The client whose pool the sends use.
            max_in_flight: Sends (so connections) in flight at most; more commands wait their turn.
            max_batch: Commands per pipeline at most.
            refuse_cluster: The server's name, to refuse a Redis Cluster node behind a plain URL:
                before its first send the batcher asks the server (``INFO cluster``) and, on a
                Cluster node, every send raises ``StoreUnavailableError`` instead of writing
                half a step (a thread's script runs there while the index entries beside it
                are MOVED away).
        """
        self._client = client
        self._refuse_cluster = refuse_cluster
        self._probed = refuse_cluster is None
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._pending: list[_Pending] = []
        self._sends = 0
        self._scheduled = False
        self._busy = 0
        """Sends in flight (direct or flushes): while any is, new commands queue."""
        self._flushes: set[asyncio.Task[None]] = set()
        self._idle: list[Connection] = []
        """Connections this batcher took from the pool and is not using now."""
        self._owned: set[Connection] = set()
        self._closed = False
        self.pipelines = 0
        """Pipelines sent, for tests and metrics."""

    async def send_ordered(self, first: Sequence[Command], then: Sequence[Command]) -> tuple[list[Any], list[Any]]:
        """Send ``first``, then ``then`` only once every command of ``first`` succeeded.

        Writes that cross slots on a Cluster (a thread's script and the global index entries
        that find it) are ordered so that a failure between them leaves nothing a reader cannot
        correct: the index entries go ``first``. On one server both go in one pipeline, in
        order, on one connection (Redis runs them in that order; a connection lost midway runs
        a prefix); a command of ``first`` that fails there still lets ``then`` run, which the
        callers accept since Redis refuses the script too when it refused an index write
        (out of memory, read-only replica) or the connection is gone for both.

        Returns:
            The replies of ``first`` and of ``then`` (each reply or error as a value).
        """
        results = await self.send([*first, *then])
        return results[: len(first)], results[len(first) :]

    async def send(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands together, in order; each reply or error (as a value) in order.

        A script Redis does not know (NOSCRIPT: it restarted, or failed over) is loaded and
        every command from the first that met NOSCRIPT on is sent again, in order: a later
        command may read what the script writes (``begin_run`` reads the history the script
        appended to), so its first reply is stale. Commands that ride beside a script are
        idempotent index writes and reads, and the scripts answer a write they already applied
        as they did, so sending them twice is safe.
        """
        if not self._probed:
            await self._probe()
        return await self.recover_scripts(commands, await self._send(commands))

    async def _probe(self) -> None:
        """Refuse a Cluster node (once known; a server that cannot answer is asked again next time)."""
        (info,) = await self._send([("INFO", "cluster")])
        if isinstance(info, Exception):
            return  # the send that follows meets the same failure, as a value
        text = info.decode() if isinstance(info, bytes) else str(info)
        if "cluster_enabled:1" in text:
            raise StoreUnavailableError(
                f"Redis at {self._refuse_cluster} is a Redis Cluster node: connect with a redis+cluster:// URL"
            )
        self._probed = True

    async def recover_scripts(self, commands: Sequence[Command], results: list[Any]) -> list[Any]:
        """``results`` of ``commands``, with those from the first NOSCRIPT on sent again once the scripts are loaded."""
        first = next((i for i, result in enumerate(results) if isinstance(result, NoScriptError)), None)
        if first is None:
            return results
        shas = {command[1] for command in commands[first:] if command[0] == "EVALSHA"}
        loads = [("SCRIPT LOAD", SCRIPT_SOURCES[sha]) for sha in sorted(shas) if sha in SCRIPT_SOURCES]
        loaded = await self._send(loads)
        failed = next((result for result in loaded if isinstance(result, Exception)), None)
        if failed is not None:
            results[first:] = [failed] * (len(results) - first)
            return results
        results[first:] = await self._send(commands[first:])
        return results

    async def send_together(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands on one connection at once, never coalesced with others (``ASKING`` + its command)."""
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        self._busy += 1
        try:
            return await self._execute(commands)
        finally:
            self._busy -= 1
            self._kick()

    async def _send(self, commands: Sequence[Command]) -> list[Any]:
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        if not self._pending and not self._busy:
            return await self.send_together(commands)  # nothing to coalesce with: at once, in this task
        return list(await asyncio.gather(*self.submit(commands), return_exceptions=True))

    def submit(self, commands: Sequence[Command]) -> list[asyncio.Future[Any]]:
        """Queue commands for the next flush (in one pipeline, in order); a future per reply.

        No task of its own: a caller sending to several batchers at once (a Cluster's nodes)
        waits on the futures together. NOSCRIPT is the caller's (``recover_scripts``).
        """
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        loop = asyncio.get_running_loop()
        futures = []
        self._sends += 1
        for command in commands:
            future: asyncio.Future[Any] = loop.create_future()
            self._pending.append((command, future, self._sends))
            futures.append(future)
        self._kick()
        return futures

    def _kick(self) -> None:
        """Flush at the end of this loop turn if commands wait and a send may start."""
        if self._pending and not self._scheduled and not self._closed and self._busy < self._max_in_flight:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def _execute(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` on one connection; each reply, or error as a value, in order."""
        try:
            packed = b"".join([_pack(command) for command in commands])
        except DataError as exc:
            return [exc] * len(commands)
        if len(commands) > 1:
            self.pipelines += 1
        try:
            connection = self._idle.pop() if self._idle else await self._checkout()
        except Exception as exc:
            return [exc] * len(commands)
        healthy = False
        try:
            replies: list[Any] = await connection.retry.call_with_retry(
                lambda: _round_trip(connection, packed, len(commands)),
                lambda error: connection.disconnect(),
            )
            healthy = True
            return replies
        except Exception as exc:  # the connection failed: every command shares the failure
            return [exc] * len(commands)
        finally:
            if healthy and not self._closed:
                self._idle.append(connection)
            else:  # failed or interrupted: never reused, the pool connects it anew
                await self._give_back(connection, discard=not healthy)

    # -- rounds: one send's commands written now, their replies read later (a Cluster's scatter) --

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing in flight: a round may start at once."""
        return not self._pending and not self._busy and not self._closed

    async def start_round(self, commands: Sequence[Command]) -> Round:
        """Write ``commands`` on a connection now; ``finish_round`` reads their replies.

        A caller with commands for several servers writes to each, then reads each: the
        servers work at the same time, and no task is made. Every round started must be
        finished or abandoned.
        """
        self._busy += 1
        round_ = Round(commands)
        try:
            round_.packed = b"".join([_pack(command) for command in commands])
            round_.connection = self._idle.pop() if self._idle else await self._checkout()
            if not round_.connection.is_connected:
                await round_.connection.connect()  # type: ignore[no-untyped-call]
            await round_.connection.send_packed_command(round_.packed, check_health=False)
        except Exception as exc:  # the normal send (with its retries) takes over in finish_round
            round_.failed = exc
        except BaseException:
            await self.abandon_round(round_)
            raise
        return round_

    async def finish_round(self, round_: Round) -> list[Any]:
        """The replies of a started round (on a failure, its commands sent again as ``send`` would)."""
        try:
            connection = round_.connection
            if round_.failed is None and connection is not None:
                try:
                    replies = await _read_replies(connection, len(round_.commands))
                except Exception as exc:
                    round_.failed = exc
                else:
                    round_.connection = None
                    if len(round_.commands) > 1:
                        self.pipelines += 1
                    if self._closed:
                        await self._give_back(connection)
                    else:
                        self._idle.append(connection)
                    return await self.recover_scripts(round_.commands, replies)
            if isinstance(round_.failed, DataError):
                return [round_.failed] * len(round_.commands)
            if round_.connection is not None:
                await self._give_back(round_.connection, discard=True)
                round_.connection = None
            return await self.recover_scripts(round_.commands, await self._execute(round_.commands))
        except BaseException:
            await self.abandon_round(round_)
            raise
        finally:
            if not round_.done:
                round_.done = True
                self._busy -= 1
                self._kick()

    async def abandon_round(self, round_: Round) -> None:
        """Give up a round (its caller was cancelled): its connection, mid-reply, is closed."""
        if round_.connection is not None:
            connection, round_.connection = round_.connection, None
            await self._give_back(connection, discard=True)
        if not round_.done:
            round_.done = True
            self._busy -= 1
            self._kick()

    async def _checkout(self) -> Connection:
        connection: Connection = await self._client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        self._owned.add(connection)
        return connection

    async def _give_back(self, connection: Connection, *, discard: bool = False) -> None:
        if connection in self._owned:
            self._owned.discard(connection)
            if discard:
                with contextlib.suppress(Exception):  # closing a broken connection may fail too
                    await connection.disconnect()
            await self._client.connection_pool.release(connection)

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending and self._busy < self._max_in_flight:
            cut = min(self._max_batch, len(self._pending))
            while cut < len(self._pending) and self._pending[cut][2] == self._pending[cut - 1][2]:
                cut += 1  # one send's commands never split over two pipelines (two connections)
            batch, self._pending = self._pending[:cut], self._pending[cut:]
            live = [item for item in batch if not item[1].done()]  # callers may have given up
            if live:
                self._busy += 1
                task = asyncio.get_running_loop().create_task(self._deliver(live))
                self._flushes.add(task)
                task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._busy -= 1
        self._flushes.discard(task)
        self._kick()

    async def _deliver(self, batch: list[_Pending]) -> None:
        try:
            results = await self._execute([command for command, _, _ in batch])
        except BaseException:
            for _, future, _ in batch:
                future.cancel()
            raise
        for (_, future, _), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def aclose(self) -> None:
        """Refuse new commands and cancel the flushes in flight."""
        self._closed = True
        for _, future, _ in self._pending:
            future.cancel()
        self._pending = []
        for task in list(self._flushes):
            task.cancel()
        await asyncio.gather(*self._flushes, return_exceptions=True)
        idle, self._idle = self._idle, []
        for connection in idle:
            await self._give_back(connection)


def _pack(command: Command) -> bytes:
    """One command in the Redis protocol; a name like ``SCRIPT LOAD`` is sent as two words."""
    name = command[0]
    if isinstance(name, str) and " " in name:
        command = (*name.split(), *command[1:])
    try:
        packed: bytes = hiredis.pack_command(command)
    except TypeError as exc:
        raise DataError(f"Cannot send {name!r}: {exc}") from exc
    return packed


class Round:
    """One send's commands, written on a connection whose replies are read later (``start_round``)."""

    __slots__ = ("commands", "connection", "done", "failed", "packed")

    def __init__(self, commands: Sequence[Command]) -> None:
        self.commands = commands
        self.packed = b""
        self.connection: Connection | None = None
        self.failed: BaseException | None = None
        self.done = False


async def _read_replies(connection: Connection, count: int) -> list[Any]:
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(await connection.read_response())
        except ResponseError as error:  # the reply is an error: the others still follow
            replies.append(error)
    return replies


async def _round_trip(connection: Connection, packed: bytes, count: int) -> list[Any]:
    if not connection.is_connected:
        # ``connect`` rather than letting the send connect: only ``connect`` asks a Sentinel-managed
        # connection's sentinels where the master is now (since redis-py 6 a send reconnects to
        # the last address, a dead master after a failover).
        await connection.connect()  # type: ignore[no-untyped-call]
    await connection.send_packed_command(packed, check_health=False)
    return await _read_replies(connection, count)
