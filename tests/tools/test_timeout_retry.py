"""Per-tool timeouts and the transient-failure retry."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

import tools

WATCHDOG = 2.0


# -- timeout ---------------------------------------------------------------------------------------


async def test_a_tool_past_its_timeout_raises_tool_timeout(ctx: tools.ToolContext) -> None:
    never = asyncio.Event()
    cancelled = asyncio.Event()

    @tools.define_tool(name="stuck", description="Waits forever.", timeout=0.05)
    async def stuck(input: Any, c: Any) -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with asyncio.timeout(WATCHDOG):
        with pytest.raises(tools.ToolTimeoutError, match="'stuck' timed out after 0.05 s") as caught:
            await tools.ToolRegistry([stuck]).invoke("stuck", {}, ctx)
    assert caught.value.tool == "stuck" and caught.value.code == "tool_timeout"
    assert not isinstance(caught.value, TimeoutError)
    assert cancelled.is_set(), "the tool was not cancelled"


async def test_a_class_tool_timeout(ctx: tools.ToolContext) -> None:
    never = asyncio.Event()

    class Stuck(tools.ReadTool):
        description = "Waits forever."
        timeout = 0.05

        async def execute(self, input: Any, c: Any) -> None:
            await never.wait()

    async with asyncio.timeout(WATCHDOG):
        with pytest.raises(tools.ToolTimeoutError):
            await tools.ToolRegistry([Stuck]).invoke("stuck", {}, ctx)


async def test_a_sync_tool_past_its_timeout_raises_tool_timeout(ctx: tools.ToolContext) -> None:
    release = threading.Event()

    def blocking(input: Any, c: Any) -> str:
        release.wait(timeout=WATCHDOG)
        return "late"

    tool = tools.define_tool(name="blocking", description="d", execute=blocking, timeout=0.05)
    try:
        async with asyncio.timeout(WATCHDOG):
            with pytest.raises(tools.ToolTimeoutError):
                await tools.ToolRegistry([tool]).invoke("blocking", {}, ctx)
    finally:
        release.set()  # let the worker thread finish


@pytest.mark.parametrize("timeout", [None, 5])
async def test_a_timeout_error_raised_by_the_tool_is_not_ours(timeout: float | None, ctx: tools.ToolContext) -> None:
    @tools.define_tool(name="upstream", description="d", timeout=timeout)
    async def upstream(input: Any, c: Any) -> None:
        raise TimeoutError("upstream API timed out")

    with pytest.raises(TimeoutError, match="upstream API timed out") as caught:
        await tools.ToolRegistry([upstream]).invoke("upstream", {}, ctx)
    assert type(caught.value) is TimeoutError


async def test_a_tool_within_its_timeout_returns(ctx: tools.ToolContext) -> None:
    @tools.define_tool(name="quick", description="d", timeout=5)
    async def quick(input: Any, c: Any) -> str:
        return "done"

    assert await tools.ToolRegistry([quick]).invoke("quick", {}, ctx) == "done"


async def test_the_timeout_bounds_retries_too(ctx: tools.ToolContext) -> None:
    calls = 0

    @tools.define_tool(name="locked", description="d", timeout=0.05)
    async def locked(input: Any, c: Any) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("Deadlock found when trying to get lock")

    registry = tools.ToolRegistry([locked], transient_retry=tools.TransientRetry(retries=1000, backoff=60))
    async with asyncio.timeout(WATCHDOG):
        with pytest.raises(tools.ToolTimeoutError):
            await registry.invoke("locked", {}, ctx)
    assert calls == 1  # the first backoff was cut short by the timeout


# -- is_transient_error ----------------------------------------------------------------------------


class DriverError(Exception):
    def __init__(self, message: str = "driver error", **attrs: Any) -> None:
        super().__init__(message)
        for key, value in attrs.items():
            setattr(self, key, value)


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


def chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (Exception(1213, "Deadlock found when trying to get lock"), True),
        (Exception(1205, "Lock wait timeout exceeded; try restarting transaction"), True),
        (Exception(1213), True),
        (Exception(1062, "Duplicate entry 'x' for key 'PRIMARY'"), False),
        (Exception(True), False),
        (DriverError(sqlstate="40001"), True),
        (DriverError(sqlstate="40P01"), True),
        (DriverError(sqlstate="55P03"), True),
        (DriverError(pgcode="40001"), True),
        (DriverError(pgcode="40P01"), True),
        (DriverError(pgcode="55P03"), True),
        (DriverError(sqlstate="23505"), False),
        (DriverError(pgcode="42P01"), False),
        (DriverError(code="ER_LOCK_DEADLOCK"), True),
        (DriverError(code="ER_LOCK_WAIT_TIMEOUT"), True),
        (DriverError(code="SQLITE_BUSY"), True),
        (DriverError(code="ER_DUP_ENTRY"), False),
        (DriverError(errno=1213), True),  # mysql-connector's errno
        (DriverError(code=1205), True),
        (DriverError(errno=2003), False),
        (DriverError(errno=True), False),
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: orders"), False),
        (RuntimeError("DEADLOCK detected"), True),
        (RuntimeError("deadlock"), True),
        (RuntimeError("Lock wait timeout exceeded"), True),
        (RuntimeError("ERROR: could not serialize access due to concurrent update"), True),
        (RuntimeError("serialization failure"), True),
        (RuntimeError("canceling statement due to lock timeout"), True),
        (ValueError("order not found"), False),
        (TimeoutError("upstream timed out"), False),
        (tools.ToolFailed("Order o1 was already refunded"), False),
        (BadStr(), False),
        (chained(RuntimeError("query failed"), Exception(1213, "Deadlock")), True),
        (chained(RuntimeError("query failed"), DriverError(sqlstate="40P01")), True),
        (chained(RuntimeError("query failed"), ValueError("bad")), False),
        (chained(RuntimeError("query failed"), chained(RuntimeError("wrapped"), Exception(1213))), False),
    ],
)
def test_is_transient_error(error: BaseException, transient: bool) -> None:
    assert tools.is_transient_error(error) is transient


def test_from_none_hides_a_transient_context() -> None:
    try:
        try:
            raise Exception(1213, "Deadlock found")
        except Exception:
            raise tools.ToolFailed("Could not refund, please retry later") from None
    except tools.ToolFailed as error:
        assert error.__context__ is not None
        assert tools.is_transient_error(error) is False


def test_a_real_sqlite_lock_is_transient(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        holder.execute("CREATE TABLE t (x INTEGER)")
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(sqlite3.OperationalError) as caught:
            waiter.execute("INSERT INTO t VALUES (1)")
        assert tools.is_transient_error(caught.value)
    finally:
        holder.close()
        waiter.close()


# -- retry -----------------------------------------------------------------------------------------


class Flaky:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0

    def tool(self) -> tools.Tool:
        async def run(input: Any, ctx: Any) -> str:
            self.calls += 1
            if self.failures:
                raise self.failures.pop(0)
            return f"ok after {self.calls}"

        return tools.define_tool(name="flaky", description="d", execute=run)


def deadlock() -> Exception:
    return Exception(1213, "Deadlock found when trying to get lock")


async def test_a_transient_error_is_retried_then_succeeds(make_registry: Any, ctx: tools.ToolContext) -> None:
    flaky = Flaky([deadlock(), deadlock()])
    assert await make_registry(flaky.tool()).invoke("flaky", {}, ctx) == "ok after 3"


async def test_a_transient_error_is_retried_twice_then_raised(make_registry: Any, ctx: tools.ToolContext) -> None:
    errors = [deadlock(), deadlock(), deadlock(), deadlock()]
    last = errors[2]
    flaky = Flaky(errors)
    with pytest.raises(Exception) as caught:
        await make_registry(flaky.tool()).invoke("flaky", {}, ctx)
    assert caught.value is last
    assert flaky.calls == 3


async def test_a_non_transient_error_is_not_retried(make_registry: Any, ctx: tools.ToolContext) -> None:
    flaky = Flaky([ValueError("order not found"), deadlock()])
    with pytest.raises(ValueError, match="order not found"):
        await make_registry(flaky.tool()).invoke("flaky", {}, ctx)
    assert flaky.calls == 1


async def test_retries_can_be_disabled(ctx: tools.ToolContext) -> None:
    flaky = Flaky([deadlock()])
    with pytest.raises(Exception, match="Deadlock"):
        await tools.ToolRegistry([flaky.tool()], transient_retry=None).invoke("flaky", {}, ctx)
    assert flaky.calls == 1


async def test_backoff_grows_with_each_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recording_sleep(delay: float) -> None:
        waits.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recording_sleep)
    calls = 0

    async def always_locked() -> None:
        nonlocal calls
        calls += 1
        raise deadlock()

    with pytest.raises(Exception, match="Deadlock"):
        await tools.call_with_transient_retry(always_locked, tools.TransientRetry())
    assert calls == 3
    assert waits == pytest.approx([0.15, 0.30])


async def test_retry_policy_fields_and_custom_classifier() -> None:
    default = tools.TransientRetry()
    assert (default.retries, default.backoff, default.classify) == (2, 0.15, tools.is_transient_error)

    calls = 0

    async def rate_limited() -> str:
        nonlocal calls
        calls += 1
        if calls < 4:
            raise KeyError("rate limited")
        return "ok"

    policy = tools.TransientRetry(retries=3, backoff=0, classify=lambda exc: isinstance(exc, KeyError))
    assert await tools.call_with_transient_retry(rate_limited, policy) == "ok"
    assert calls == 4


async def test_no_policy_means_one_attempt() -> None:
    calls = 0

    async def locked() -> None:
        nonlocal calls
        calls += 1
        raise deadlock()

    with pytest.raises(Exception, match="Deadlock"):
        await tools.call_with_transient_retry(locked, None)
    assert calls == 1


async def test_cancellation_is_never_retried() -> None:
    calls = 0

    async def cancelled() -> None:
        nonlocal calls
        calls += 1
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await tools.call_with_transient_retry(cancelled, tools.TransientRetry(backoff=0))
    assert calls == 1


@pytest.mark.parametrize("value", ["deadlock", 1213, None])
def test_is_transient_error_refuses_what_is_not_an_exception(value: Any) -> None:
    with pytest.raises(TypeError, match="needs an exception"):
        tools.is_transient_error(value)


class _CodedError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("kind", "error", "calls"),
    [
        ("read", RuntimeError("upstream said: lock timeout, try later"), 3),  # reads: words are enough
        ("action", RuntimeError("upstream said: lock timeout, try later"), 1),  # a payment is not retried on words
        ("action", _CodedError("could not serialize access", "40001"), 3),  # a database's own code is
    ],
)
async def test_actions_retry_only_on_database_error_codes(kind: str, error: Exception, calls: int) -> None:
    seen: list[int] = []

    from pydantic import BaseModel

    class Args(BaseModel):
        key: str

    @tools.define_tool(name=f"flaky_{kind}", description="Fails.", input=Args, kind=kind)
    async def flaky(input: Args, ctx: tools.ToolContext) -> None:
        seen.append(1)
        raise error

    registry = tools.ToolRegistry([flaky], transient_retry=tools.TransientRetry(backoff=0))
    ctx = tools.ToolContext(actor=tools.Actor(id="u1"))
    with pytest.raises(type(error)):
        await registry.execute(registry.get(f"flaky_{kind}"), Args(key="k"), ctx)  # type: ignore[arg-type]
    assert len(seen) == calls
