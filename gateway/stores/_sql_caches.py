"""Media and renders in the SQL store's own database: ``SqlMediaBackend`` and ``SqlRenderCache``.

With ``PostgresStore`` every gateway process sharing the database serves the same media and
reuses the same renders, as with Redis; with ``SqliteStore`` they survive a restart. Each row
carries its expiry: an expired row is never answered, and the store's sweep deletes it.

A media row may name its thread (``thread_id``), so erasing the thread erases its media too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from renderers import (
    MediaBackend,
    MediaItem,
    MediaUnavailableError,
    RenderCache,
    Rendered,
    decode_rendered,
    encode_rendered,
)
from tools import AgoraError, UserError

from ._sql_tx import Tx

__all__ = ["SqlMediaBackend", "SqlRenderCache"]

logger = logging.getLogger("gateway.stores.sql")

Runner = Callable[..., Awaitable[Any]]
"""The store's ``_run``: runs one call's work over a ``Tx``."""


@contextmanager
def _media_unavailable() -> Iterator[None]:
    """The store's failures as the media backend's (a ``UserError``, a newer schema say, as it is)."""
    try:
        yield
    except UserError:
        raise
    except (AgoraError, OSError) as exc:
        raise MediaUnavailableError(f"the media backend (the store's database) is unavailable: {exc}") from exc


def _cache_failed(doing: str, exc: AgoraError | OSError) -> None:
    """The render cache is an optimisation: the store down is a miss, said once (a ``UserError`` is raised)."""
    if isinstance(exc, UserError):
        raise exc
    logger.warning("render cache %s failed: %s", doing, exc)


class SqlMediaBackend(MediaBackend):
    """Media kept in the store's ``media`` table until they expire.

    Args:
        run: Runs a call on the store (its ``_run``).
        swept: Deletes expired rows when it is time (the store's sweep).
        max_bytes: Larger items are refused (``UserError``), as by the memory backend.
    """

    def __init__(self, run: Runner, *, swept: Callable[[], Awaitable[None]], max_bytes: int = 64 * 1024 * 1024) -> None:
        self._run = run
        self._swept = swept
        self.max_bytes = max_bytes

    async def put(self, media_id: str, item: MediaItem, expires_at: float, *, thread_id: str | None = None) -> None:
        """Keep ``item`` until ``expires_at`` (UNIX seconds).

        Args:
            media_id: The id ``MediaStore`` made.
            item: The bytes, their type and download name.
            expires_at: When the row stops being served.
            thread_id: The thread the media belong to, if any: erasing it erases them.

        Raises:
            UserError: The item is larger than ``max_bytes``.
            MediaUnavailableError: The database cannot be reached.
        """
        if len(item.data) > self.max_bytes:
            raise UserError(f"Media of {len(item.data):,} bytes is larger than the store's {self.max_bytes:,}.")

        async def store(tx: Tx) -> None:
            await tx.put(
                "INSERT INTO media (media_id, thread_id, mime, filename, data, expires_ts) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (media_id) DO UPDATE SET thread_id = excluded.thread_id, "
                "mime = excluded.mime, filename = excluded.filename, data = excluded.data, "
                "expires_ts = excluded.expires_ts",
                media_id,
                thread_id,
                item.mime,
                item.filename,
                item.data,
                float(expires_at),
            )

        with _media_unavailable():
            await self._swept()
            await self._run(store)

    async def get(self, media_id: str) -> MediaItem | None:
        """The item, or ``None`` once it expired (or never was).

        Raises:
            MediaUnavailableError: The database cannot be reached.
        """

        async def load(tx: Tx) -> Any:
            return await tx.fetchrow(
                "SELECT data, mime, filename FROM media WHERE media_id = $1 AND expires_ts > $2", media_id, time.time()
            )

        with _media_unavailable():
            row = await self._run(load)
        return MediaItem(bytes(row[0]), row[1], row[2]) if row is not None else None

    async def forget_thread(self, thread_id: str) -> int:
        """Delete every item put for ``thread_id`` now; answer how many had not expired yet.

        (``SqlStore.delete_thread`` erases them too, in the erasure's transaction.)

        Raises:
            MediaUnavailableError: The database cannot be reached.
        """

        async def forget(tx: Tx) -> Any:
            return await tx.fetch("DELETE FROM media WHERE thread_id = $1 RETURNING expires_ts", thread_id)

        with _media_unavailable():
            rows = await self._run(forget)
        now = time.time()
        return sum(1 for row in rows if row[0] > now)


class SqlRenderCache(RenderCache):
    """Renders kept in the store's ``renders`` table, each for ``ttl`` seconds.

    A cache never breaks a render: a database that cannot be reached is logged and counts as a
    miss (a write is dropped).

    Args:
        run: Runs a call on the store (its ``_run``).
        swept: Deletes expired rows when it is time (the store's sweep).
        ttl: Seconds a render is kept.
        max_item_bytes: Larger renders are not stored.
    """

    def __init__(
        self,
        run: Runner,
        *,
        swept: Callable[[], Awaitable[None]],
        ttl: float = 86_400,
        max_item_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        if ttl <= 0:
            raise UserError("render cache ttl must be positive")
        self._run = run
        self._swept = swept
        self.ttl = ttl
        self.max_item_bytes = max_item_bytes

    async def get(self, key: str) -> Rendered | None:
        """The render kept under ``key``, or ``None`` (expired, absent, or the database away)."""

        async def load(tx: Tx) -> Any:
            return await tx.fetchrow("SELECT data FROM renders WHERE key = $1 AND expires_ts > $2", key, time.time())

        try:
            row = await self._run(load)
        except (AgoraError, OSError) as exc:
            _cache_failed("read", exc)
            return None
        return decode_rendered(bytes(row[0])) if row is not None else None

    async def set(self, key: str, value: Rendered) -> None:
        """Keep ``value`` under ``key`` for ``ttl`` seconds (unless it is larger than ``max_item_bytes``)."""
        if value.size > self.max_item_bytes:
            return
        blob, expires = encode_rendered(value), time.time() + self.ttl

        async def store(tx: Tx) -> None:
            await tx.put(
                "INSERT INTO renders (key, data, expires_ts) VALUES ($1, $2, $3) "
                "ON CONFLICT (key) DO UPDATE SET data = excluded.data, expires_ts = excluded.expires_ts",
                key,
                blob,
                expires,
            )

        try:
            await self._swept()
            await self._run(store)
        except (AgoraError, OSError) as exc:
            _cache_failed("write", exc)
