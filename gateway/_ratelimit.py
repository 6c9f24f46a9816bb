"""Per-actor token buckets that bound how many turns one actor may start."""

from __future__ import annotations

import time
from collections import OrderedDict

__all__ = ["RateLimiter"]


class RateLimiter:
    """A token bucket per key (an actor id), in this process.

    Each key holds up to ``burst`` tokens, refilled at ``rate_per_minute``. Buckets of idle keys
    are dropped beyond ``max_keys``, oldest first, so memory stays bounded.
    """

    def __init__(self, rate_per_minute: float, burst: int, *, max_keys: int = 100_000) -> None:
        self.rate = rate_per_minute / 60.0
        self.burst = float(burst)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, key: str, *, now: float | None = None) -> bool:
        """Take a token for ``key``; False when its bucket is empty."""
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        allowed = tokens >= 1.0
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return allowed

    def retry_after(self, key: str) -> float:
        """Seconds until ``key`` has a token again."""
        tokens, _ = self._buckets.get(key, (self.burst, 0.0))
        return max(0.0, (1.0 - tokens) / self.rate) if self.rate > 0 else 60.0
