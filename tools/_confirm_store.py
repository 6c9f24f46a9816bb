"""Where confirmed tools claim their single-use tokens."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["ConfirmTokenStore", "InMemoryConfirmTokenStore"]


@runtime_checkable
class ConfirmTokenStore(Protocol):
    """Claim-once storage of confirm tokens, keyed by the token's SHA-256 (never the token)."""

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a token; True for the first claim only.

        ``expires_at`` is a UNIX time after which the record may be dropped (an expired token is
        refused before it is ever claimed).
        """
        ...

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim (the commit failed), so the same preview can be confirmed again."""
        ...


class InMemoryConfirmTokenStore:
    """A ``ConfirmTokenStore`` for one process. Expired records are swept as claims arrive."""

    def __init__(self) -> None:
        self._claimed: dict[str, float] = {}
        self._lock = asyncio.Lock()

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        """Claim a token; True for the first claim only."""
        async with self._lock:
            now = time.time()
            if len(self._claimed) > 1024:
                self._claimed = {h: exp for h, exp in self._claimed.items() if exp > now}
            if token_hash in self._claimed:
                return False
            self._claimed[token_hash] = expires_at
            return True

    async def release_confirm_token(self, token_hash: str) -> None:
        """Undo a claim."""
        async with self._lock:
            self._claimed.pop(token_hash, None)
