"""Stores: where threads, runs, the event log, approvals and channel state live."""

from ._memory import MemoryStore
from ._postgres import PostgresStore
from ._protocol import Store
from ._records import (
    JOURNAL_ADAPTER,
    MAX_STEP_TOKENS,
    TITLE_CHARS,
    ApprovalRecord,
    ApprovalState,
    Batch,
    Begun,
    JournalEntry,
    ModelStepEntry,
    PlannedCall,
    PreflightEntry,
    QueuedMessage,
    RunRecord,
    RunState,
    ThreadRecord,
    ThreadSummary,
    ToolSettledEntry,
    UsageEntry,
    UsageRow,
    UsageTotals,
)
from ._redis import RedisStore
from ._sqlite import SqliteStore
from ._usage import MAX_USAGE_DAYS, USAGE_WRITE_DAYS

__all__ = [
    "JOURNAL_ADAPTER",
    "MAX_STEP_TOKENS",
    "MAX_USAGE_DAYS",
    "TITLE_CHARS",
    "USAGE_WRITE_DAYS",
    "ApprovalRecord",
    "ApprovalState",
    "Batch",
    "Begun",
    "JournalEntry",
    "MemoryStore",
    "ModelStepEntry",
    "PlannedCall",
    "PostgresStore",
    "PreflightEntry",
    "QueuedMessage",
    "RedisStore",
    "RunRecord",
    "RunState",
    "SqliteStore",
    "Store",
    "ThreadRecord",
    "ThreadSummary",
    "ToolSettledEntry",
    "UsageEntry",
    "UsageRow",
    "UsageTotals",
]
