"""The tables of the SQL stores, and how a store creates and migrates them itself.

One schema for SQLite and PostgreSQL; the column types that differ are named in braces and filled
in from the adapter's ``Dialect`` (``{id}`` an auto-numbered primary key, ``{float}``, ``{blob}``,
``{bytewise}`` the collation that orders text by code point).
JSON is kept as text, never ``jsonb``: records come back byte for byte as pydantic wrote them.

Each migration is a list of statements run in one transaction with the ``schema_version`` row of
``meta`` moved forward; a store runs whatever is missing the first time it is used (or pinged).
A database whose version is newer than ``SCHEMA_VERSION`` was migrated by a newer agora-gateway:
the store refuses it (``UserError``) rather than misread it.

Tables (``thread_id`` on every row of a thread, so an erasure is one ``DELETE`` per table)::

    meta            name -> value: ``schema_version``
    threads         one row per thread: owner, ``version`` (a new random one at every write of the row), the
                    newest seq, the running run, the last writes' ids (``recent``), its title, the
                    start of its first user message, last activity
    events          (thread_id, seq) -> the event's JSON (its ``seq`` inside)
    messages        the history, in ``id`` order
    runs            run id -> its record (status and lease beside it, for the sweeps), ``id`` order
    journal         journal entries, in ``id`` order
    approvals       tool call id -> its record (status and expiry beside it), ``id`` order
    remembered      (thread_id, tool): approved without asking
    confirm_tokens  claimed confirm tokens, until they expire
    channel_state   key -> JSON value, optionally expiring
    media           media bytes by id, until they expire (``thread_id`` when known)
    renders         render cache entries, until they expire
    queue           message id -> a queued message (JSON), its thread and ``position`` (the queue's
                    order: smallest first); every change of a queue's order moves the thread row's
                    ``version``, so a begin that read the queue guards on what it read
    usage_lines     (day, actor_key, agent, model) -> tokens in and out, steps, cost in nano-dollars,
                    unpriced steps: the usage ledger, kept ``LEDGER_DAYS`` (400) days
    usage_totals    (actor_key, period) -> tokens; ``period`` is a day (``YYYY-MM-DD``) or a month
                    (``YYYY-MM``)
    usage_writes    (actor_key, write_id) -> when it was added: ``add_usage`` adds a write id once
                    (kept ``USAGE_WRITE_DAYS``, then swept)
    buckets         rate-limit bucket key -> tokens, last refill and when it is full again (then swept)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tools import UserError

__all__ = ["META", "MIGRATIONS", "SCHEMA_VERSION", "Dialect", "check_version", "migration"]


@dataclass(frozen=True, kw_only=True)
class Dialect:
    """What differs between the SQL the adapters speak; the store logic is written once over it."""

    name: str
    """``sqlite`` or ``postgresql``."""
    lock: str
    """Appended to a ``SELECT`` that locks the rows it reads until the transaction ends
    (``FOR UPDATE``; empty where the one writer makes locks needless)."""
    skip_locked: str
    """Like ``lock``, skipping the rows another transaction holds (``FOR UPDATE SKIP LOCKED``)."""
    types: dict[str, str] = field(default_factory=dict)
    """Column types (and the few expressions that differ) by the names the DDL uses in braces."""
    joined_bodies: str | None = None
    """An aggregate of ``body`` joined by commas in ``id`` order (``string_agg``), so that a read
    answers a history with the row it goes with; ``None`` where two reads cost no more than one."""


_CONVERSATIONS = [
    """CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        owner_key TEXT NOT NULL,
        record TEXT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0,
        seq BIGINT NOT NULL DEFAULT 0,
        running TEXT,
        recent TEXT NOT NULL DEFAULT '',
        title TEXT,
        first_text TEXT,
        last_ts {float} NOT NULL
    )""",
    "CREATE INDEX threads_by_owner ON threads (owner_key, last_ts, thread_id)",
    "CREATE INDEX threads_by_activity ON threads (last_ts, thread_id)",
    """CREATE TABLE events (
        thread_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
    "CREATE TABLE messages (id {id}, thread_id TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX messages_by_thread ON messages (thread_id, id)",
    """CREATE TABLE runs (
        id {id},
        run_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        begun INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        record TEXT NOT NULL,
        lease_owner TEXT,
        lease_until {float}
    )""",
    "CREATE INDEX runs_by_thread ON runs (thread_id, id)",
    "CREATE INDEX runs_by_lease ON runs (lease_until) WHERE lease_until IS NOT NULL",
    "CREATE TABLE journal (id {id}, thread_id TEXT NOT NULL, run_id TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE INDEX journal_by_run ON journal (run_id, id)",
    "CREATE INDEX journal_by_thread ON journal (thread_id)",
    """CREATE TABLE approvals (
        id {id},
        tool_call_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        status TEXT NOT NULL,
        expires_ts {float} NOT NULL,
        record TEXT NOT NULL
    )""",
    "CREATE INDEX approvals_by_thread ON approvals (thread_id, status, id)",
    "CREATE INDEX approvals_pending_by_expiry ON approvals (expires_ts) WHERE status = 'pending'",
    "CREATE TABLE remembered (thread_id TEXT NOT NULL, tool TEXT NOT NULL, PRIMARY KEY (thread_id, tool))",
    "CREATE TABLE confirm_tokens (token_hash TEXT PRIMARY KEY, expires_ts {float} NOT NULL)",
    "CREATE INDEX confirm_tokens_by_expiry ON confirm_tokens (expires_ts)",
    "CREATE TABLE channel_state (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_ts {float})",
    "CREATE INDEX channel_state_by_expiry ON channel_state (expires_ts) WHERE expires_ts IS NOT NULL",
]

_CACHES = [
    """CREATE TABLE media (
        media_id TEXT PRIMARY KEY,
        thread_id TEXT,
        mime TEXT NOT NULL,
        filename TEXT,
        data {blob} NOT NULL,
        expires_ts {float} NOT NULL
    )""",
    "CREATE INDEX media_by_expiry ON media (expires_ts)",
    "CREATE INDEX media_by_thread ON media (thread_id) WHERE thread_id IS NOT NULL",
    "CREATE TABLE renders (key TEXT PRIMARY KEY, data {blob} NOT NULL, expires_ts {float} NOT NULL)",
    "CREATE INDEX renders_by_expiry ON renders (expires_ts)",
]

_QUEUE = [
    """CREATE TABLE queue (
        message_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        position BIGINT NOT NULL,
        queued_ts {float} NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE UNIQUE INDEX queue_by_thread ON queue (thread_id, position)",
    "ALTER TABLE approvals ADD COLUMN requested_ts {float} NOT NULL DEFAULT 0",
    "UPDATE approvals SET requested_ts = {requested_epoch}",
    "CREATE INDEX approvals_open ON approvals (requested_ts, tool_call_id) WHERE status = 'pending'",
]
"""The per-thread message queue, and what ``open_approvals`` reads (``recent_runs`` reads ``runs`` by ``id``).

Approvals written before it get their request time from their record's ``requested_at``."""

_USAGE = [
    """CREATE TABLE usage_lines (
        day TEXT NOT NULL,
        actor_key TEXT {bytewise} NOT NULL,
        agent TEXT {bytewise} NOT NULL,
        model TEXT {bytewise} NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        steps BIGINT NOT NULL,
        cost_nanos BIGINT NOT NULL,
        unpriced_steps BIGINT NOT NULL,
        PRIMARY KEY (day, actor_key, agent, model)
    )""",
    "CREATE INDEX usage_lines_by_actor ON usage_lines (actor_key, day)",
    """CREATE TABLE usage_totals (
        actor_key TEXT {bytewise} NOT NULL,
        period TEXT NOT NULL,
        tokens BIGINT NOT NULL,
        PRIMARY KEY (actor_key, period)
    )""",
    "CREATE INDEX usage_totals_by_period ON usage_totals (period)",
    """CREATE TABLE usage_writes (
        actor_key TEXT NOT NULL,
        write_id TEXT NOT NULL,
        written_ts {float} NOT NULL,
        PRIMARY KEY (actor_key, write_id)
    )""",
    "CREATE INDEX usage_writes_by_time ON usage_writes (written_ts)",
    """CREATE TABLE buckets (
        key TEXT PRIMARY KEY,
        tokens {float} NOT NULL,
        last_ts {float} NOT NULL,
        full_ts {float} NOT NULL
    )""",
    "CREATE INDEX buckets_by_full ON buckets (full_ts)",
]
"""The usage ledger (lines per day, actor, agent and model; totals per actor and day or month; the
write ids it added), and the rate-limit buckets. Text that orders the ledger compares by code point (``{bytewise}``)."""

MIGRATIONS: list[list[str]] = [_CONVERSATIONS, _CACHES, _QUEUE, _USAGE]
"""Migration ``n`` (from 1) takes a database from version ``n - 1`` to ``n``. Append only."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code writes and reads."""

META = "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)"
"""Made before anything else, so the version can be read (and refused) first."""


def migration(dialect: Dialect, version: int) -> list[str]:
    """The statements that take a database to ``version``, in ``dialect``'s column types."""
    return [statement.format(**dialect.types) for statement in MIGRATIONS[version - 1]]


def check_version(found: int, *, where: str, known: int | None = None) -> Sequence[int]:
    """The versions to migrate through from ``found``; refuses a version newer than the code's.

    Raises:
        UserError: ``found`` is newer than ``known`` (``SCHEMA_VERSION`` by default): a newer
            agora-gateway migrated the database. The message is one line, for the command line.
    """
    known = SCHEMA_VERSION if known is None else known
    if found > known:
        raise UserError(
            f"The database at {where} has agora schema version {found}, newer than this agora-gateway "
            f"knows ({known}): upgrade agora-gateway, or point the store at another database."
        )
    return range(found + 1, known + 1)
