"""Render caches: a bounded in-memory LRU, Redis (shared between gateway processes), and both tiered.

Keys are opaque strings (a SHA-256 of component, version, template, format and canonical props,
see ``Renderer``). A cache never breaks a render: a Redis error is logged and counts as a miss.
"""

from __future__ import annotations

import json
import logging
import struct
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import TYPE_CHECKING

from tools import UserError

from ._rendered import Rendered

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

__all__ = [
    "MemoryRenderCache",
    "RedisRenderCache",
    "RenderCache",
    "TieredRenderCache",
    "decode_rendered",
    "encode_rendered",
]

logger = logging.getLogger("renderers.cache")


class RenderCache(ABC):
    """Where finished renders are kept. Implementations must be safe to call concurrently."""

    @abstractmethod
    async def get(self, key: str) -> Rendered | None:
        """The render stored under ``key``, or ``None``."""

    @abstractmethod
    async def set(self, key: str, value: Rendered) -> None:
        """Store ``value`` under ``key`` (a cache may decline, e.g. when it is too large)."""


class MemoryRenderCache(RenderCache):
    """A least-recently-used cache in this process, bounded in bytes and in entries.

    Args:
        max_bytes: Total size of the renders kept (PNG pages, PDFs, text).
        max_entries: Number of renders kept.
        max_item_bytes: Larger renders are not kept.
    """

    def __init__(
        self, *, max_bytes: int = 64 * 1024 * 1024, max_entries: int = 2048, max_item_bytes: int = 8 * 1024 * 1024
    ) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.max_item_bytes = max_item_bytes
        self._items: OrderedDict[str, Rendered] = OrderedDict()
        self._bytes = 0

    async def get(self, key: str) -> Rendered | None:  # noqa: D102
        return self.peek(key)

    def peek(self, key: str) -> Rendered | None:
        """``get`` without awaiting: the tiered cache and the renderer's fast path use it."""
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    async def set(self, key: str, value: Rendered) -> None:  # noqa: D102
        size = value.size
        if size > self.max_item_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old.size
        self._items[key] = value
        self._bytes += size
        while self._items and (self._bytes > self.max_bytes or len(self._items) > self.max_entries):
            _, evicted = self._items.popitem(last=False)
            self._bytes -= evicted.size

    def __len__(self) -> int:
        return len(self._items)

    @property
    def bytes(self) -> int:
        """Total size of the renders held."""
        return self._bytes


_MAGIC = b"AGR1"
_LENGTH = struct.Struct("!I")


def encode_rendered(value: Rendered) -> bytes:
    """``value`` as bytes: a small JSON header and the payloads. Never a pickle (Redis is not code)."""
    text = isinstance(value.data, str)
    parts = [value.data.encode("utf-8")] if isinstance(value.data, str) else list(value.pages or (value.data,))
    header = json.dumps(
        {"mime": value.mime, "text": text, "sizes": [len(p) for p in parts], "page_count": value.page_count}
    ).encode()
    return b"".join([_MAGIC, _LENGTH.pack(len(header)), header, *parts])


def decode_rendered(blob: bytes) -> Rendered | None:
    """The inverse of ``encode_rendered``; ``None`` for anything malformed."""
    try:
        if not blob.startswith(_MAGIC):
            return None
        (length,) = _LENGTH.unpack_from(blob, len(_MAGIC))
        start = len(_MAGIC) + _LENGTH.size
        header = json.loads(blob[start : start + length])
        offset = start + length
        parts: list[bytes] = []
        for size in header["sizes"]:
            parts.append(blob[offset : offset + size])
            offset += size
        if offset != len(blob) or not parts:
            return None
        if header["text"]:
            return Rendered(parts[0].decode("utf-8"), header["mime"], (), int(header["page_count"]))
        return Rendered(parts[0], header["mime"], tuple(parts), int(header["page_count"]))
    except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None


class RedisRenderCache(RenderCache):
    """Renders kept in Redis, shared by every gateway process, each for ``ttl`` seconds.

    Args:
        redis: A ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster`` client created
            with ``decode_responses=False`` (each render is one key: any slot will do).
        prefix: Key prefix; keys are ``prefix + key``.
        ttl: Seconds a render is kept.
        max_item_bytes: Larger renders are not stored.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        *,
        prefix: str = "agora:render:",
        ttl: float = 86_400,
        max_item_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        from ._media import _decodes  # a sibling's helper: one way to read a client's options

        if _decodes(redis):
            raise UserError("RedisRenderCache needs a Redis client with decode_responses=False (renders are bytes).")
        self._redis = redis
        self._prefix = prefix
        self._ttl_ms = max(1, int(ttl * 1000))
        self._max_item_bytes = max_item_bytes

    async def get(self, key: str) -> Rendered | None:  # noqa: D102
        try:
            blob = await self._redis.get(self._prefix + key)
        except Exception as exc:  # the cache is an optimisation: Redis down means a miss
            logger.warning("render cache read failed: %s", exc)
            return None
        return decode_rendered(blob) if isinstance(blob, bytes) else None

    async def set(self, key: str, value: Rendered) -> None:  # noqa: D102
        if value.size > self._max_item_bytes:
            return
        try:
            await self._redis.set(self._prefix + key, encode_rendered(value), px=self._ttl_ms)
        except Exception as exc:
            logger.warning("render cache write failed: %s", exc)


class TieredRenderCache(RenderCache):
    """A near cache (this process's memory) in front of a far one (Redis).

    Hits in the far cache fill the near one; writes go to both.
    """

    def __init__(self, near: RenderCache, far: RenderCache) -> None:
        self.near = near
        self.far = far

    async def get(self, key: str) -> Rendered | None:  # noqa: D102
        value = await self.near.get(key)
        if value is None:
            value = await self.far.get(key)
            if value is not None:
                await self.near.set(key, value)
        return value

    async def set(self, key: str, value: Rendered) -> None:  # noqa: D102
        await self.near.set(key, value)
        await self.far.set(key, value)
