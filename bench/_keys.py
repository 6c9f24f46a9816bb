"""What the benchmarks share for Redis: removing the keys a run wrote under its own prefix."""

from __future__ import annotations

import redis.asyncio as redis


async def drop_prefix(url: str, prefix: str) -> None:
    """Delete the keys under ``prefix`` (never FLUSHDB: the server may be shared)."""
    client = redis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        for start in range(0, len(keys), 1000):
            await client.delete(*keys[start : start + 1000])
    finally:
        await client.aclose()
