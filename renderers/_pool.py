"""``RenderPool``: worker processes for CPU-bound work, a time limit per job, crash-proof.

Why not ``concurrent.futures.ProcessPoolExecutor``: it cannot stop one running job (a job past
its time limit would hold its worker for good) and one crashed worker breaks the whole executor.
Here a job past its limit is cut off by killing its worker, only that one; a worker that dies
fails only its own job; in both cases the pool starts a replacement.

Wire: each worker has a job pipe and a result pipe, carrying frames of an 8-byte big-endian
length and a pickle. The parent side is asyncio streams over the pipes (no threads wait on
them); the worker side is plain blocking reads and writes. Messages: ``("call", fn, args)`` and
``("stop",)`` in; ``("ready", info)``, ``("failed", exc)``, ``("ok", value)`` and
``("error", exc)`` out. Workers are spawned (not forked: the parent runs an event loop and
threads), so ``fn`` must be importable by reference, like a ``ProcessPoolExecutor`` task.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import multiprocessing
import os
import pickle
import signal
import struct
import sys
import traceback
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from tools import AgoraError, UserError

from ._errors import RenderFailedError, RenderTimeoutError

__all__ = ["RemoteError", "RenderPool", "default_worker_count"]

logger = logging.getLogger("renderers.pool")

T = TypeVar("T")

_HEADER = struct.Struct("!Q")
_PROTOCOL = pickle.HIGHEST_PROTOCOL


def default_worker_count() -> int:
    """The cores this process may run on (its CPU affinity, else ``os.cpu_count()``), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


class RemoteError(RenderFailedError):
    """An exception raised in a worker whose class the parent should not import.

    Built-in exceptions and ``AgoraError`` subclasses cross as they are; anything else (a
    weasyprint error, say) arrives as this, so unpickling never imports worker-only modules.

    Attributes:
        type_name: The original exception's qualified class name.
        remote_traceback: The traceback as formatted in the worker.
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str = "") -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_traceback = remote_traceback

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemoteError, (self.type_name, str(self).partition(": ")[2], self.remote_traceback))


# ------------------------------------------------------------------------------ worker side


def _portable(exc: BaseException) -> BaseException:
    if type(exc).__module__ == "builtins" or isinstance(exc, AgoraError):
        try:
            pickle.loads(pickle.dumps(exc, _PROTOCOL))
        except Exception:  # an exception whose arguments do not pickle
            pass
        else:
            return exc
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return RemoteError(name, str(exc), "".join(traceback.format_exception(exc)))


def _write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _serve(jobs: Connection, results: Connection, initializer: Callable[[], Any] | None, nice: int) -> None:
    """A worker's whole life: initialise, report ready, run calls until told to stop or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if nice and hasattr(os, "nice"):
        os.nice(nice)
    job_fd, result_fd = jobs.fileno(), results.fileno()
    try:
        info = initializer() if initializer is not None else None
    except BaseException as exc:
        _write_frame(result_fd, pickle.dumps(("failed", _portable(exc)), _PROTOCOL))
        return
    _write_frame(result_fd, pickle.dumps(("ready", info), _PROTOCOL))
    while True:
        header = _read_exactly(job_fd, _HEADER.size)
        body = None if header is None else _read_exactly(job_fd, _HEADER.unpack(header)[0])
        if body is None:
            return  # the parent went away
        message = pickle.loads(body)
        if message[0] == "stop":
            return
        _, fn, args = message
        try:
            reply = pickle.dumps(("ok", fn(*args)), _PROTOCOL)
        except Exception as exc:
            reply = pickle.dumps(("error", _portable(exc)), _PROTOCOL)
        _write_frame(result_fd, reply)


# ------------------------------------------------------------------------------ parent side


class _State(enum.Enum):
    NEW = "new"
    OPEN = "open"
    CLOSED = "closed"


@dataclass(kw_only=True, eq=False)
class _Worker:
    process: BaseProcess
    reader: asyncio.StreamReader
    read_transport: asyncio.ReadTransport
    writer: asyncio.StreamWriter
    info: Any = None
    """What the initializer returned."""
    calls: int = 0
    """Calls served."""

    @property
    def pid(self) -> int:
        return self.process.pid or 0


async def _read_message(reader: asyncio.StreamReader) -> tuple[str, Any]:
    (size,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    message: tuple[str, Any] = pickle.loads(await reader.readexactly(size))
    return message


def _reimported_main() -> str | None:
    """The main module a spawned worker imports again before anything else (as ``spawn`` decides), if any."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:  # python -m name
        name = str(spec.name)
        return None if name == "__main__" or name.endswith(".__main__") else name
    path = getattr(main, "__file__", None)  # python script.py (none for -c or a prompt)
    return str(path) if path else None


def _unready_exit(pid: int, exitcode: int | None) -> str:
    """Why a worker that ended before it reported ready did, and what to do about it, in one line."""
    if exitcode is not None and exitcode < 0:
        return f"render worker {pid} was killed by {signal.Signals(-exitcode).name} before it was ready"
    how = f"exited with code {exitcode}" if exitcode is not None else "closed its pipe"
    main = _reimported_main()
    if main is None:
        return f"render worker {pid} {how} before it was ready (its error is on stderr)"
    return (
        f"render worker {pid} {how} before it was ready. A spawned worker first re-imports the main module "
        f"({main}), so what that module does at import time runs again in each worker, and a Renderer or "
        'RenderPool used there cannot start its own workers: put that code under `if __name__ == "__main__":` '
        "(the worker's own error is on stderr)"
    )


def _spawn(tasks: set[asyncio.Task[None]], coro: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


class RenderPool:
    """A pool of worker processes that run picklable functions, each call with a time limit.

    Workers start lazily on the first ``run`` (or on ``start()``), run ``initializer`` once, and
    then serve calls one at a time. A call past its ``timeout`` kills its worker and raises
    ``RenderTimeoutError``; a worker that dies fails its call with ``RenderFailedError``; either
    way a replacement starts in the background. The pool belongs to the event loop that first
    used it. Close it with ``await pool.aclose()`` or ``async with RenderPool(...)``.

    Args:
        workers: Number of processes; default the cores this process may use.
        initializer: Run in each worker before it serves calls; its return value is the worker's
            ``info`` and is passed to ``on_ready`` in the parent.
        on_ready: Called in the parent with each new worker's ``info``.
        start_timeout: Seconds a worker may take to become ready.
        max_calls: Retire a worker after this many calls and start a fresh one (``None``: never).
            A bound on native memory that creeps up in long-lived workers.
        nice: Added to the workers' niceness (Unix). Rendering is background work: with every
            core busy rendering, the default 10 lets the parent's event loop (sockets, webhooks)
            have a core as soon as it wakes instead of waiting for its share of a time slice.
            On an otherwise idle host it costs renders nothing.
        name: Prefix of the worker process names.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        initializer: Callable[[], Any] | None = None,
        on_ready: Callable[[Any], None] | None = None,
        start_timeout: float = 60.0,
        max_calls: int | None = None,
        nice: int = 10,
        name: str = "agora-render",
    ) -> None:
        if workers is not None and workers < 1:
            raise UserError("RenderPool needs at least 1 worker")
        self.size = workers or default_worker_count()
        """How many worker processes the pool keeps."""
        self._initializer = initializer
        self._on_ready = on_ready
        self._start_timeout = start_timeout
        self._max_calls = max_calls
        self._nice = nice
        self._name = name
        self._context = multiprocessing.get_context("spawn")
        self._state = _State.NEW
        self._idle: deque[_Worker] = deque()
        self._busy: set[_Worker] = set()
        self._starting = 0
        self._failure: BaseException | None = None
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._starts: set[asyncio.Task[None]] = set()
        """Workers being started; cancelled on close."""
        self._reaps: set[asyncio.Task[None]] = set()
        """Workers being stopped and reaped; awaited (never cancelled) on close."""
        self._started = 0

    # -- lifecycle

    async def __aenter__(self) -> RenderPool:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def start(self) -> None:
        """Start the workers now rather than on the first ``run``; they become ready in the background."""
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot start a closed RenderPool")
        self._state = _State.OPEN
        self._ensure_capacity()

    async def aclose(self) -> None:
        """Stop every worker (a running call fails) and wait for the processes to exit."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        self._wake(every=True)
        for task in list(self._starts):
            task.cancel()
        await asyncio.gather(*self._starts, return_exceptions=True)
        for worker in list(self._busy):
            self._discard(worker)
        while self._idle:
            worker = self._idle.popleft()
            if not worker.writer.is_closing():
                worker.writer.write(self._frame(("stop",)))
            _spawn(self._reaps, self._reap(worker, grace=5.0))
        while self._reaps:
            await asyncio.gather(*self._reaps, return_exceptions=True)

    @property
    def closed(self) -> bool:
        """Whether ``aclose()`` was called."""
        return self._state is _State.CLOSED

    def worker_pids(self) -> list[int]:
        """Process ids of the workers that are ready (idle or busy)."""
        return sorted(w.pid for w in (*self._idle, *self._busy))

    def worker_info(self) -> dict[int, Any]:
        """What each ready worker's initializer returned, by process id."""
        return {w.pid: w.info for w in (*self._idle, *self._busy)}

    def health(self) -> dict[str, Any]:
        """The pool's state for a health check: a JSON-able dict, cheap (nothing is asked of a worker).

        ``status`` is ``idle`` (no worker started yet: they start on the first call),
        ``starting`` (fewer ready than ``size``, none failed), ``ready`` (all ``size`` ready),
        ``degraded`` (some ready, a start failed), ``failing`` (none ready, a start failed: calls
        fail until one starts; the log says why) or ``closed``. ``ready``, ``busy`` and
        ``starting`` count workers; ``started`` counts those that became ready since the pool
        opened (replacements included).
        """
        ready = len(self._idle) + len(self._busy)
        if self._state is _State.NEW:
            status = "idle"
        elif self._state is _State.CLOSED:
            status = "closed"
        elif ready >= self.size:
            status = "ready"
        elif self._failure is not None:
            status = "degraded" if ready else "failing"
        else:
            status = "starting"
        return {
            "status": status,
            "size": self.size,
            "ready": ready,
            "busy": len(self._busy),
            "starting": self._starting,
            "started": self._started,
        }

    @property
    def workers_started(self) -> int:
        """How many worker processes became ready since the pool opened (replacements included)."""
        return self._started

    # -- calls

    async def run(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        """Run ``fn(*args)`` in a worker and return its result.

        Args:
            fn: A function importable by reference (module-level).
            *args: Its arguments; they must pickle.
            timeout: Seconds the call may run in its worker (waiting for a free worker does not
                count); ``None`` for no limit.

        Raises:
            RenderTimeoutError: past ``timeout``; the worker was killed and is being replaced.
            RenderFailedError: the worker died during the call, or workers cannot start.
            RemoteError: ``fn`` raised an exception of a class the parent does not import.
            Exception: whatever else ``fn`` raised (built-in exceptions, ``AgoraError``).
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot run on a closed RenderPool")
        self._state = _State.OPEN
        self._ensure_capacity()
        frame = self._frame(("call", fn, args))
        worker = await self._acquire()
        healthy = False
        try:
            worker.writer.write(frame)
            await worker.writer.drain()
            async with asyncio.timeout(timeout):
                status, value = await _read_message(worker.reader)
            healthy = True
        except TimeoutError:
            assert timeout is not None
            raise RenderTimeoutError(timeout) from None
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise RenderFailedError(f"Render worker {worker.pid} died during the call.") from exc
        finally:
            if healthy:
                self._release(worker)
            else:
                self._discard(worker)
        if status == "error":
            raise value
        result: T = value
        return result

    @staticmethod
    def _frame(message: tuple[Any, ...]) -> bytes:
        payload = pickle.dumps(message, _PROTOCOL)
        return _HEADER.pack(len(payload)) + payload

    async def _acquire(self) -> _Worker:
        loop = asyncio.get_running_loop()
        while True:
            while self._idle:
                worker = self._idle.popleft()
                if worker.process.is_alive():
                    self._busy.add(worker)
                    return worker
                logger.warning("render worker %s died while idle; replacing it", worker.pid)
                self._discard(worker)
            if self._state is _State.CLOSED:
                raise RuntimeError("The RenderPool was closed")
            if self._failure is not None and not self._starting and not self._busy:
                raise RenderFailedError(f"Render workers cannot start: {self._failure}")
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # hand the wake-up this task will not use to the next waiter
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _wake(self, *, every: bool = False) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not every:
                    return

    def _release(self, worker: _Worker) -> None:
        self._busy.discard(worker)
        worker.calls += 1
        if self._state is _State.CLOSED:
            self._discard(worker)
        elif self._max_calls is not None and worker.calls >= self._max_calls:
            self._retire(worker)
        else:
            self._idle.append(worker)
            self._wake()

    def _retire(self, worker: _Worker) -> None:
        """Stop a healthy worker after its last call, and start its replacement."""
        worker.writer.write(self._frame(("stop",)))
        _spawn(self._reaps, self._reap(worker, grace=5.0))
        self._ensure_capacity()

    def _discard(self, worker: _Worker) -> None:
        """Kill ``worker`` (it may be mid-call or dead already), reap it, start a replacement."""
        self._busy.discard(worker)
        if worker.process.is_alive():
            worker.process.kill()
        _spawn(self._reaps, self._reap(worker, grace=0.0))
        self._ensure_capacity()
        self._wake()

    async def _reap(self, worker: _Worker, *, grace: float) -> None:
        process = worker.process
        if grace:
            await asyncio.to_thread(process.join, grace)
            if process.is_alive():
                process.kill()
        await asyncio.to_thread(process.join)
        worker.writer.close()
        worker.read_transport.close()
        process.close()

    # -- starting workers

    def _ensure_capacity(self) -> None:
        if self._state is not _State.OPEN:
            return
        missing = self.size - (len(self._idle) + len(self._busy) + self._starting)
        for _ in range(missing):
            self._starting += 1
            _spawn(self._starts, self._start_worker())

    async def _start_worker(self) -> None:
        worker: _Worker | None = None
        try:
            worker = await self._launch()
            try:
                async with asyncio.timeout(self._start_timeout):
                    status, info = await _read_message(worker.reader)
            except TimeoutError:
                raise RuntimeError(
                    f"render worker {worker.pid} was not ready within {self._start_timeout:g} s (its initializer, "
                    "or the main module it re-imports, did not return)"
                ) from None
            except (asyncio.IncompleteReadError, ConnectionError):
                await asyncio.to_thread(worker.process.join, 5.0)
                raise RuntimeError(_unready_exit(worker.pid, worker.process.exitcode)) from None
            if status != "ready":
                raise info
            worker.info = info
            if self._on_ready is not None:
                self._on_ready(info)
        except (Exception, asyncio.CancelledError) as exc:
            self._starting -= 1
            if worker is not None:
                if worker.process.is_alive():
                    worker.process.kill()
                _spawn(self._reaps, self._reap(worker, grace=0.0))
            if isinstance(exc, asyncio.CancelledError):
                raise
            logger.error("render worker failed to start: %s", exc)
            self._failure = exc
            self._wake(every=True)
            return
        self._starting -= 1
        self._failure = None
        self._started += 1
        if self._state is _State.CLOSED:
            self._discard(worker)
            return
        self._idle.append(worker)
        self._wake()

    async def _launch(self) -> _Worker:
        loop = asyncio.get_running_loop()
        job_out, job_in = self._context.Pipe(duplex=False)
        result_out, result_in = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_serve,
            args=(job_out, result_in, self._initializer, self._nice),
            name=f"{self._name}-{self._started + self._starting}",
            daemon=True,
        )
        try:
            process.start()  # spawn: a fork-exec, about 1 ms; the slow part (imports) runs in the child
        finally:
            job_out.close()  # the child holds its own copies now
            result_in.close()
        read_fd, write_fd = os.dup(result_out.fileno()), os.dup(job_in.fileno())
        result_out.close()
        job_in.close()
        read_file, write_file = os.fdopen(read_fd, "rb", 0), os.fdopen(write_fd, "wb", 0)
        read_transport: asyncio.ReadTransport | None = None
        try:
            reader = asyncio.StreamReader()
            read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), read_file)
            transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, write_file)
        except BaseException:  # cancelled by aclose() mid-launch, most likely
            process.kill()
            if read_transport is not None:
                read_transport.close()
            else:
                read_file.close()
            write_file.close()
            await asyncio.shield(asyncio.to_thread(process.join))
            raise
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return _Worker(process=process, reader=reader, read_transport=read_transport, writer=writer)
