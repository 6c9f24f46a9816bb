"""``SdkModel``: what the models over a provider's SDK share (``OpenAIModel``, ``AnthropicModel``).

Their checked options, the SDK client's lifecycle (built here and closed in ``aclose``, or the
caller's), and the retries around one streamed attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, ClassVar

from tools import UserError

from .._errors import ModelError
from ._base import ModelChunk
from ._failures import backoff_delay

__all__ = ["SdkModel"]


class _State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class SdkModel:
    """The shared half of a model over a provider's SDK; a subclass builds requests and reads streams."""

    kind: ClassVar[str]
    """The class's name in messages (``OpenAIModel``)."""
    key_env: ClassVar[str]
    """The variable the API key is read from when none is given."""
    base_env: ClassVar[str]
    """The variable the API root is read from when none is given."""
    log: ClassVar[logging.Logger]
    """Where retries are logged."""
    client: Any

    def _configure(
        self,
        model: str,
        *,
        name: str | None,
        prefix: str,
        timeout: float | None,
        max_retries: int,
        backoff: float,
        temperature: float | None,
        extra_body: Mapping[str, Any] | None,
    ) -> None:
        """Check and keep the options every such model takes.

        Raises:
            UserError: An option is out of range.
        """
        if not isinstance(model, str) or not model:
            raise UserError(f"{self.kind}: model must be a non-empty str")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UserError(f"{self.kind}: max_retries must be an int >= 0")
        if timeout is not None and timeout <= 0:
            raise UserError(f"{self.kind}: timeout must be positive, or None")
        if backoff < 0:
            raise UserError(f"{self.kind}: backoff must be >= 0")
        self.model = model
        self.name = name or f"{prefix}:{model}"
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.temperature = temperature
        self.extra_body = dict(extra_body) if extra_body else None

    def _connect(self, client: Any, api_key: str | None, base_url: str | None, make: Callable[..., Any]) -> None:
        """Use ``client`` (its own retries off: retries are ours), or build one with ``make``.

        Raises:
            UserError: Both a client and a key or root are given, or no API key is found.
        """
        self._owns_client = client is None
        if client is not None:
            if api_key is not None or base_url is not None:
                raise UserError(f"{self.kind}: pass either client or api_key/base_url, not both")
            self.client = client.with_options(max_retries=0)
        else:
            api_key = api_key or os.environ.get(self.key_env)
            if not api_key:
                raise UserError(f"{self.kind} needs an API key: pass api_key= or set {self.key_env}")
            base_url = base_url or os.environ.get(self.base_env) or None
            # No SDK timeout: ours is an asyncio scope around each await (see _attempt).
            self.client = make(api_key=api_key, base_url=base_url, max_retries=0, timeout=None)
        self._state = _State.OPEN

    def __repr__(self) -> str:
        return f"{self.kind}({self.model!r}, base_url={str(self.client.base_url)!r})"

    async def aclose(self) -> None:
        """Close the SDK client if this model built it. Idempotent."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        if self._owns_client:
            await self.client.close()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._state is _State.CLOSED:
            raise RuntimeError(f"Cannot use a closed {self.kind}")

    def _attempt(self, params: dict[str, Any]) -> AsyncGenerator[ModelChunk, None]:
        """One request and its stream (a subclass's)."""
        raise NotImplementedError

    async def _retried(self, params: dict[str, Any]) -> AsyncGenerator[ModelChunk, None]:
        """``_attempt``, tried again after a retried failure, but only while nothing was yielded."""
        attempt = 0
        while True:
            emitted = False
            try:
                async with contextlib.aclosing(self._attempt(params)) as chunks:
                    async for chunk in chunks:
                        emitted = True
                        yield chunk
                return
            except ModelError as exc:
                delay = None if emitted else self._retry_delay(exc, attempt)
                if delay is None:
                    raise
                attempt += 1
                self.log.warning("%s (%s); retry %d of %d in %.2fs", exc, exc.code, attempt, self.max_retries, delay)
            await asyncio.sleep(delay)

    def _retry_delay(self, exc: ModelError, attempt: int) -> float | None:
        """Seconds to wait before retrying after ``exc``, or ``None`` not to retry."""
        return backoff_delay(exc, attempt, max_retries=self.max_retries, backoff=self.backoff)
