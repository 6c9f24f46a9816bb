"""How the HTTP-backed models fail: ``ModelError`` codes, what people read, retry waits.

Shared by ``OpenAIModel`` and ``AnthropicModel``.
"""

from __future__ import annotations

import email.utils
import random
import time

from .._errors import ModelError

__all__ = ["MAX_RETRY_AFTER", "RETRIED_CODES", "backoff_delay", "model_error", "retry_after"]

MAX_BACKOFF = 30.0
"""Ceiling of one computed backoff wait, in seconds."""
MAX_RETRY_AFTER = 60.0
"""A server asking to wait longer than this is not retried: the error goes to the caller at once."""
RETRIED_CODES = frozenset({"model_rate_limited", "model_unavailable"})
"""Failures retried by the model itself. ``model_timeout`` is retryable for the caller but not
retried there: the timeout is the caller's bound on waiting, and retrying would multiply it."""
RETRYABLE_CODES = RETRIED_CODES | {"model_timeout"}
"""Failures a caller may retry (``ModelError.retryable``)."""

PUBLIC_TEXTS = {
    "model_timeout": "The assistant took too long to answer.",
    "model_unavailable": "The assistant could not be reached.",
    "model_rate_limited": "The assistant is busy right now.",
    "model_auth": "The assistant is not available: its model refused the gateway's credentials.",
    "model_error": "The assistant could not answer this time.",
}
"""What people read for each failure (``ModelError.public``): never the model's name, URL or the
server's words, which only the log carries (a chat must not show ``openai:gpt-4o could not be reached``)."""


def model_error(story: str, code: str) -> ModelError:
    """A ``ModelError`` telling ``story`` to the log and its code's public text to people."""
    return ModelError(story, code=code, retryable=code in RETRYABLE_CODES, public=PUBLIC_TEXTS[code])


def backoff_delay(exc: ModelError, attempt: int, *, max_retries: int, backoff: float) -> float | None:
    """Seconds to wait before retry ``attempt + 1`` after ``exc``, or ``None`` not to retry.

    The server's ``Retry-After`` wins (unless beyond ``MAX_RETRY_AFTER``); else exponential
    backoff from ``backoff`` seconds, with jitter.
    """
    if exc.code not in RETRIED_CODES or attempt >= max_retries:
        return None
    hinted = retry_after(exc.__cause__)
    if hinted is not None:
        return hinted if hinted <= MAX_RETRY_AFTER else None
    ceiling = min(backoff * 2.0**attempt, MAX_BACKOFF)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def retry_after(cause: BaseException | None) -> float | None:
    """The wait an error response asks for (``retry-after-ms``, ``Retry-After``), in seconds."""
    response = getattr(cause, "response", None)
    if response is None:
        return None
    headers = response.headers
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())
