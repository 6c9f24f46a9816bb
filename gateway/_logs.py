"""Log lines that say which run, thread, channel and actor they are about, as text or JSON.

Four fields follow the work through ``contextvars``: ``run_id``, ``thread_id``, ``channel`` and
``actor``. They are set where that work is known, and every line logged inside carries them:

- a request, by the access middleware (``gateway._access``): ``channel`` on a channel's routes
  (run, thread and actor cleared), then ``actor`` once ``resolve_actor`` / ``identify`` knows it;
- a turn, by ``Runtime.start_turn``: the turn's thread, channel and actor;
- a run, by ``RunDriver.drive`` (and ``supersede``): its run id, thread, channel and actor, for
  as long as this process drives it (a task of its own, so the fields never leak to the caller);
- a push delivery's drain of a thread (``PushDelivery``): that thread, and no run.

``actor`` is never the actor's id: it is ``actor_hash(id)``, the first 12 hex digits of
HMAC-SHA256 of the id under the constant label ``ACTOR_HASH_LABEL``. The label is public, so the
hash is a pseudonym that stays the same across processes and restarts (lines of one person can be
followed), not a secret: an id that can be guessed (a phone number) can be found by trying
candidates. It keeps ids out of log storage, not out of reach of someone who already suspects one.

``configure_logging`` (``agora-gateway serve --log-format``, ``AGORA_LOG_FORMAT``) installs one
handler on the root logger: ``text`` is the classic ``time level logger: message`` line; ``json``
is one JSON object per line (``JsonFormatter``), ASCII only, so no character of a message (a
newline, U+2028) can split it.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import hmac
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

from opentelemetry import trace
from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from tools import UserError

__all__ = [
    "ACTOR_HASH_LABEL",
    "FIELDS_ATTRIBUTE",
    "LOG_FORMATS",
    "JsonFormatter",
    "LogFormat",
    "LogOptions",
    "RedactOptions",
    "actor_hash",
    "bind_log",
    "configure_logging",
    "log_context",
    "log_scope",
]

LogFormat = Literal["json", "text"]
LOG_FORMATS: tuple[LogFormat, ...] = ("json", "text")

ACTOR_HASH_LABEL = b"agora-gateway log actor v1"
"""The HMAC key of ``actor_hash``: a constant, not a secret (see the module's docstring)."""

FIELDS_ATTRIBUTE = "log_fields"
"""A record's attribute (``extra={"log_fields": {...}}``) whose items a JSON line carries at top level."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_KEYS = ("run_id", "thread_id", "channel", "actor")
_RESERVED = frozenset({"ts", "level", "logger", "message", "exc", "stack", "trace_id", "span_id", *_KEYS})
_EMPTY: Mapping[str, str] = {}
_FIELDS: ContextVar[Mapping[str, str]] = ContextVar("agora_log_fields", default=_EMPTY)


class _Keep(enum.Enum):
    KEEP = "keep"


_KEEP = _Keep.KEEP


@functools.lru_cache(maxsize=4096)
def actor_hash(actor_id: str) -> str:
    """The pseudonym of an actor id in log lines: 12 hex digits of HMAC-SHA256 under ``ACTOR_HASH_LABEL``."""
    return hmac.new(ACTOR_HASH_LABEL, actor_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:12]


def log_context() -> Mapping[str, str]:
    """The fields lines logged here and now carry (``actor`` already hashed)."""
    return _FIELDS.get()


def _merged(
    run_id: str | None | _Keep,
    thread_id: str | None | _Keep,
    channel: str | None | _Keep,
    actor: str | None | _Keep,
) -> Mapping[str, str]:
    fields = dict(_FIELDS.get())
    for key, value in (("run_id", run_id), ("thread_id", thread_id), ("channel", channel), ("actor", actor)):
        if value is _KEEP:
            continue
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = actor_hash(value) if key == "actor" else value
    return fields


def bind_log(
    *,
    run_id: str | None | _Keep = _KEEP,
    thread_id: str | None | _Keep = _KEEP,
    channel: str | None | _Keep = _KEEP,
    actor: str | None | _Keep = _KEEP,
) -> None:
    """Set fields for the rest of the current context (a request's task: its scope resets them).

    A field not given is kept, ``None`` clears it; ``actor`` is the actor's id (hashed here).
    """
    _FIELDS.set(_merged(run_id, thread_id, channel, actor))


@contextlib.contextmanager
def log_scope(
    *,
    run_id: str | None | _Keep = _KEEP,
    thread_id: str | None | _Keep = _KEEP,
    channel: str | None | _Keep = _KEEP,
    actor: str | None | _Keep = _KEEP,
) -> Iterator[None]:
    """Set fields for the lines logged inside the ``with`` block (as ``bind_log``), as they were after it."""
    token = _FIELDS.set(_merged(run_id, thread_id, channel, actor))
    try:
        yield
    finally:
        _FIELDS.reset(token)


class _ContextFilter(logging.Filter):
    """Stamps each record with the fields and span of the context that logged it (before any handler formats it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "agora_context"):
            record.agora_context = _FIELDS.get()
            record.agora_span = _span_ids()
        return True


def _span_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex), when a span that records is current."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    ids = span.get_span_context()
    return format(ids.trace_id, "032x"), format(ids.span_id, "016x")


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line.

    Keys, in this order: ``ts`` (ISO-8601, UTC, milliseconds), ``level``, ``logger``, ``message``;
    then, when known, ``run_id``, ``thread_id``, ``channel``, ``actor`` (a hash, ``actor_hash``);
    then ``trace_id`` and ``span_id`` (hex, as OpenTelemetry backends show them) when a recording
    span was current where the line was logged (``gateway._tracing``); then the record's own
    fields (``extra={"log_fields": {...}}``: an access line's ``method``,
    ``path``, ``status``, ``ms``...), never overriding the keys above; then ``exc``, the
    traceback as a string, when the record has one (``stack`` likewise for ``stack_info``).
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (ASCII: every other character escaped)."""
        line: dict[str, Any] = {
            "ts": _iso(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        context: Mapping[str, str] = getattr(record, "agora_context", None) or _FIELDS.get()
        for key in _KEYS:
            value = context.get(key)
            if value is not None:
                line[key] = value
        ids = getattr(record, "agora_span", _KEEP)
        if ids is _KEEP:  # a record no filter of ours stamped: the context formatting it
            ids = _span_ids()
        if ids is not None:
            line["trace_id"], line["span_id"] = ids
        own = getattr(record, FIELDS_ATTRIBUTE, None)
        if isinstance(own, Mapping):
            for key, value in own.items():
                if key not in _RESERVED and value is not None:
                    line[str(key)] = value
        if record.exc_text:  # formatted already (and redacted, by a ``PiiLogFilter``)
            line["exc"] = record.exc_text
        elif record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=True, default=str)


class LogOptions(BaseSettings):
    """How ``serve`` logs, from ``AGORA_LOG_FORMAT`` (environment or ``.env``) when ``--log-format`` is not given."""

    model_config = SettingsConfigDict(env_prefix="AGORA_", env_file=".env", extra="ignore")

    log_format: LogFormat = "text"
    """``text`` (``time level logger: message``) or ``json`` (one object per line)."""


class RedactOptions(BaseSettings):
    """Whether ``configure_logging`` redacts lines, from ``AGORA_REDACT_PII`` when its caller does not say."""

    model_config = SettingsConfigDict(env_prefix="AGORA_", env_file=".env", extra="ignore")

    redact_pii: bool = False
    """Redact e-mail addresses, phone numbers and card numbers in every line (``gateway._pii``)."""


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure_logging`` installs (so that a second call replaces it, not doubles it)."""


def configure_logging(
    level: int, log_format: str | None = None, *, stream: Any = None, redact_pii: bool | None = None
) -> logging.Handler:
    """Log to ``stream`` (stderr) at ``level`` and above, as ``text`` or ``json``.

    Args:
        level: The root logger's level.
        log_format: ``json`` or ``text``; ``None`` reads ``AGORA_LOG_FORMAT`` (default ``text``).
        stream: Where lines go (``sys.stderr``).
        redact_pii: Redact e-mail addresses, phone numbers and card numbers in every line
            (messages, fields, tracebacks); ``None`` reads ``AGORA_REDACT_PII`` (default off).

    Returns:
        The handler installed on the root logger (replacing one an earlier call installed).

    Raises:
        UserError: ``log_format`` (or ``AGORA_LOG_FORMAT``) is neither ``json`` nor ``text``.
    """
    if log_format is None:
        try:
            log_format = LogOptions().log_format
        except ValidationError:
            raise UserError("AGORA_LOG_FORMAT: use json or text") from None
    if log_format not in LOG_FORMATS:
        raise UserError(f"log format {log_format!r}: use json or text")
    if redact_pii is None:
        try:
            redact_pii = RedactOptions().redact_pii
        except ValidationError:
            raise UserError("AGORA_REDACT_PII: use true or false") from None
    handler = _Handler(stream if stream is not None else sys.stderr)
    handler.addFilter(_ContextFilter())
    if redact_pii:
        from ._pii import PiiLogFilter

        handler.addFilter(PiiLogFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
