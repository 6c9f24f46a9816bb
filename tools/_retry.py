"""Transient failures (deadlocks, serialization conflicts, lock timeouts) and their retry."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["TransientRetry", "call_with_transient_retry", "is_transient_database_error", "is_transient_error"]

T = TypeVar("T")

_MYSQL_CODES = frozenset({1213, 1205})  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
_SQLSTATES = frozenset({"40001", "40P01", "55P03"})  # serialization failure, deadlock, lock not available
_NAMED_CODES = frozenset({"ER_LOCK_DEADLOCK", "ER_LOCK_WAIT_TIMEOUT", "SQLITE_BUSY", "SQLITE_LOCKED"})
_SQLITE_BUSY_CODES = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_MESSAGE = re.compile(
    r"deadlock|lock wait timeout|serialization failure|could not serialize|database is locked|lock timeout",
    re.IGNORECASE,
)


def _is_transient_one(exc: BaseException, by_message: bool) -> bool:
    for attr in ("sqlstate", "pgcode", "code", "errno"):
        value = getattr(exc, attr, None)
        if isinstance(value, str) and (value in _SQLSTATES or value in _NAMED_CODES):
            return True
        if isinstance(value, int) and not isinstance(value, bool) and value in _MYSQL_CODES:
            return True
    if isinstance(exc, sqlite3.OperationalError) and getattr(exc, "sqlite_errorcode", None) in _SQLITE_BUSY_CODES:
        return True
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int) and not isinstance(args[0], bool) and args[0] in _MYSQL_CODES:
        return True  # PyMySQL / mysqlclient put the server's code first
    if not by_message:
        return False
    try:
        message = str(exc)
    except Exception:  # a broken __str__ must not replace the error being classified
        return False
    return bool(_MESSAGE.search(message))


def is_transient_error(exc: BaseException, *, by_message: bool = True) -> bool:
    """Whether ``exc`` (or the error it wraps, one level down) is worth retrying.

    Transient: MySQL deadlock and lock wait timeout (1213, 1205), PostgreSQL serialization
    failure, deadlock and lock timeout (SQLSTATE 40001, 40P01, 55P03), SQLite busy/locked, and
    (with ``by_message``) messages naming a deadlock, a lock wait timeout or a serialization
    failure. Nothing else. Actions are classified with ``by_message=False``: a side effect is
    retried only on a database's own error code, never on words in some other error's message.

    Raises:
        TypeError: ``exc`` is not an exception (a bare message would be matched as one).
    """
    if not isinstance(exc, BaseException):
        raise TypeError(f"is_transient_error() needs an exception, not {type(exc).__name__}")
    if _is_transient_one(exc, by_message):
        return True
    # "raise ... from None" sets __suppress_context__: the author declared the context unrelated.
    inner = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    return inner is not None and _is_transient_one(inner, by_message)


def is_transient_database_error(exc: BaseException) -> bool:
    """``is_transient_error`` by error codes only: what an action's retries use."""
    return is_transient_error(exc, by_message=False)


@dataclass(frozen=True, kw_only=True)
class TransientRetry:
    """How a tool call retries transient failures."""

    retries: int = 2
    """Retries after the first attempt (so at most ``retries + 1`` calls)."""
    backoff: float = 0.15
    """Seconds before retry ``n`` is ``backoff * n``."""
    classify: Callable[[BaseException], bool] = is_transient_error
    """Decides which errors of a read tool are transient."""
    classify_action: Callable[[BaseException], bool] = is_transient_database_error
    """Decides which errors of an action are transient (error codes only, by default)."""


async def call_with_transient_retry(fn: Callable[[], Awaitable[T]], policy: TransientRetry | None) -> T:
    """Await ``fn()``, retrying transient failures per ``policy`` (``None``: no retry)."""
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            if policy is None or attempt >= policy.retries or not policy.classify(exc):
                raise
            attempt += 1
            await asyncio.sleep(policy.backoff * attempt)
