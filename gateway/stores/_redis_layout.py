"""How ``RedisStore`` lays a thread out in Redis: its keys, and how records are encoded.

Key layout (``P`` is the prefix, ``agora`` by default). The keys of one thread share the hash tag
``{thread_id}``, so a Redis Cluster keeps a thread on one node and every script touches one slot::

    P:{t}:thread            hash: record (JSON), owner, seq (last event), running (run id),
                            approvals (insertion counter), active (last write, UNIX s),
                            title (the name its owner gave it), born (names this
                            messages list: ``_redis_history``)
    P:{t}:events            stream: one entry per event, id ``<seq>-0``, field ``e`` = event JSON
    P:{t}:live              pub/sub channel: each write publishes its events as a JSON array
    P:{t}:messages          list of history messages (JSON)
    P:{t}:runs              hash: run id -> run record (JSON, with a ``status``/``updated_at`` head)
    P:{t}:run-order         list of run ids, oldest first
    P:{t}:journal:<run>     list of journal entries (JSON)
    P:{t}:lease:<run>       string: the lease owner, expiring (PX) with the lease
    P:{t}:approvals         hash: tool call id -> approval (JSON, with a settle-fields head)
    P:{t}:pending           sorted set: pending approvals' tool call ids, oldest first
    P:{t}:approval-order    sorted set: every approval's tool call id, oldest first
    P:{t}:remembered        set: tools approved without asking in this thread
    P:{t}:queue             list: the queued messages' ids, first (next to run) first
    P:{t}:queued            hash: message id -> queued message (JSON)

Global keys (one per id, so they shard too), written in the same round trip as the script:

    P:run:<run id>          string: thread id (run ids are global)
    P:approval:<id>         string: thread id (tool call ids are global)
    P:leases:{b}            sorted set: [thread, run] -> when to check the lease (ms)
    P:approval-expiry:{b}   sorted set: [thread, tool call id] -> expiry (s)
    P:owner:<sha256>:{b}    sorted set: thread id -> last activity (s), per owner (the SHA-256
                            of the owner's ``Actor.key``) and bucket: the owner's list of threads
    P:activity:{b}          sorted set: thread id -> last activity (s): retention's index
    P:queued:<message id>   string: thread id (queued message ids are global)
    P:queued-threads:{b}    sorted set: thread id -> when a message last queued there (s)
    P:open-approvals:{b}    sorted set: [tool call id, thread] -> requested_ts (s), pending ones
    P:recent-runs:{b}       sorted set: [run id, thread] -> created_at (s)
    P:confirm:<hash>        claimed confirm token (expires with the token)
    P:channel:<key>         channel state (JSON)

The usage ledger (``_redis_usage``): an actor's keys share the hash tag ``{usage:<sha256>}`` (the
SHA-256 of its ``Actor.key``), so ``add_usage``'s one script touches one slot::

    P:{usage:<a>}:day:<YYYY-MM-DD>   hash: ``tokens`` (the day's total), ``actor`` (its key), and
                                     per ledger line ``i|<line>``, ``o|<line>``, ``s|<line>``,
                                     ``u|<line>`` (input, output, steps, unpriced steps) and
                                     ``c|<line>`` (cost in nano-dollars); ``<line>`` is
                                     ``["agent","model"]`` as JSON. Expires 400 days after the day
    P:{usage:<a>}:month:<YYYY-MM>    string: the month's total tokens; expires 400 days after the month
    P:{usage:<a>}:write:<id>         string: an ``add_usage`` that ran (2 minutes), so one sent
                                     again after a lost reply adds nothing
    P:usage-day:<YYYY-MM-DD>         set: the actor keys with usage that day (``usage_rows`` of
                                     everyone), written beside the script; expires with the day
    P:bucket:<sha256>               hash: a rate-limit bucket (``t`` tokens, ``ts`` last refill,
                                     UNIX s); expires when it would be full again

The sorted sets are indexes, not truth: the thread's keys are. A reader checks candidates
against the thread's keys and corrects the index only where nobody changed it since it looked
(``RECONCILE``), so an index that lags (a renewal, a crash between two commands) costs a check,
never a lost run. The activity indexes are created beside ``begin_run`` (and ``ensure_thread``)
and moved beside every write of events (``ZADD XX``: a write never adds a thread to them, so
a write that finds no thread leaves nothing behind); an owner's index moves with the writes
that name the owner (those carrying a run record, or of a thread this process began or
claimed), the rest of the time with the run's next such write.

The queue index gets a thread beside every enqueue, with a new score each time, and loses it
only when a reader finds the thread's queue empty and the score unchanged (``queued_threads``):
a message queued while the reader looked moved the score, so its thread stays. The open
approvals and recent runs indexes are written beside the writes that make the records
(settling drops an approval; erasure drops both), and readers drop entries naming nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from pydantic import TypeAdapter
from redis.crc import key_slot

from ..events import RunEvent
from ._records import ApprovalRecord, JournalEntry, RunRecord

__all__ = [
    "BUCKETS",
    "BUCKET_TAGS",
    "EVENTS",
    "INDEX_NAMES",
    "IndexName",
    "JOURNAL",
    "NO_SEQ",
    "PENDING_HEAD",
    "RedisKeys",
    "approval_head",
    "approval_json",
    "bucket_of",
    "json_array",
    "index_member",
    "millis",
    "parse_events",
    "run_parts",
    "score_pairs",
    "as_text",
]


IndexName = Literal["leases", "approval-expiry", "activity", "queued-threads", "open-approvals", "recent-runs"]
"""The global indexes, each bucketed over ``BUCKETS`` keys by thread."""

INDEX_NAMES: tuple[IndexName, ...] = get_args(IndexName)

BUCKETS = 16
"""Keys each global index is spread over. On a Cluster each bucket's hash tag is picked so that
the buckets' slots are evenly spaced over the 16,384 (a cluster's masters serve contiguous
ranges), so every master holds its share of every index and of the sweeps that read them."""


def _bucket_tags() -> tuple[str, ...]:
    """For bucket ``k``, the first tag ``i<k>`` / ``i<k>.<n>`` whose slot lies in the k-th sixteenth."""
    width = 16384 // BUCKETS
    tags = []
    for k in range(BUCKETS):
        for n in range(100_000):
            tag = f"i{k}" if n == 0 else f"i{k}.{n}"
            if k * width <= key_slot(tag.encode()) < (k + 1) * width:
                tags.append(tag)
                break
    return tuple(tags)


BUCKET_TAGS = _bucket_tags()


@functools.lru_cache(maxsize=16_384)
def bucket_of(thread_id: str) -> int:
    """Which bucket of every global index holds a thread's entries (stable across processes).

    The bucket whose tag lies in the same sixteenth of the slots as the thread's own tag: a
    Cluster's masters serve contiguous slot ranges, so a thread's index entries are on its own
    node (but where a range ends inside that sixteenth), and a write beside its script goes in
    the same pipeline.
    """
    return key_slot(thread_id.encode("utf-8", "surrogatepass")) * BUCKETS // 16384


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """The names of a store's keys under its prefix."""

    prefix: str

    def thread(self, thread_id: str, name: str) -> str:
        """A key of the thread (they share its hash tag)."""
        return f"{self.prefix}:{{{thread_id}}}:{name}"

    def run_index(self, run_id: str) -> str:
        """Which thread a run belongs to."""
        return f"{self.prefix}:run:{run_id}"

    def approval_index(self, tool_call_id: str) -> str:
        """Which thread an approval belongs to."""
        return f"{self.prefix}:approval:{tool_call_id}"

    def index(self, name: IndexName, thread_id: str) -> str:
        """The bucket of the global index ``name`` that holds the thread's entries."""
        return f"{self.prefix}:{name}:{{{BUCKET_TAGS[bucket_of(thread_id)]}}}"

    def indexes(self, name: IndexName) -> list[str]:
        """Every bucket of the global index ``name`` (a reader reads them all)."""
        return [f"{self.prefix}:{name}:{{{tag}}}" for tag in BUCKET_TAGS]

    def legacy_index(self, name: IndexName) -> str:
        """The one key the global index ``name`` was before it was bucketed (read to migrate it)."""
        return f"{self.prefix}:{name}"

    def owner_threads(self, owner_key: str, thread_id: str) -> str:
        """The bucket of the owner's list of threads that holds ``thread_id`` (beside the thread's keys).

        The key names a hash of the owner key (which may hold anything).
        """
        return f"{self.prefix}:owner:{_digest(owner_key)}:{{{BUCKET_TAGS[bucket_of(thread_id)]}}}"

    def owner_lists(self, owner_key: str) -> list[str]:
        """Every bucket of the owner's list of threads (``list_threads`` merges them)."""
        return [f"{self.prefix}:owner:{_digest(owner_key)}:{{{tag}}}" for tag in BUCKET_TAGS]

    def legacy_owner_threads(self, owner_key: str) -> str:
        """The one key the owner's list was before it was bucketed (read to migrate it)."""
        return f"{self.prefix}:owner:{_digest(owner_key)}"

    def queued_index(self, message_id: str) -> str:
        """Which thread a queued message waits on."""
        return f"{self.prefix}:queued:{message_id}"

    def confirm_token(self, token_hash: str) -> str:
        """A claimed confirm token."""
        return f"{self.prefix}:confirm:{token_hash}"

    def channel_state(self, key: str) -> str:
        """A channel's state."""
        return f"{self.prefix}:channel:{key}"

    def usage(self, actor_key: str, name: str) -> str:
        """A key of the actor's usage (they share its hash tag)."""
        return f"{self.prefix}:{{usage:{_digest(actor_key)}}}:{name}"

    def usage_day(self, day: str) -> str:
        """The actors with usage on ``day``."""
        return f"{self.prefix}:usage-day:{day}"

    def bucket(self, key: str) -> str:
        """A rate-limit bucket."""
        return f"{self.prefix}:bucket:{_digest(key)}"


@functools.lru_cache(maxsize=4_096)
def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


EVENTS: TypeAdapter[list[RunEvent]] = TypeAdapter(list[RunEvent])
JOURNAL: TypeAdapter[list[JournalEntry]] = TypeAdapter(list[JournalEntry])
NO_SEQ = {"seq"}
_COMPACT = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(..., separators=(",", ":"))`` without building an encoder per call."""
_quote = json.encoder.encode_basestring_ascii
"""A string as ``json.dumps`` writes it (``ensure_ascii``)."""
_RUN_HEAD = frozenset({"status", "updated_at"})
_RUN_HEAD_FIRST = frozenset({"status", "updated_at", "first_seq"})
_SETTLE_FIELDS = ("status", "decided_by", "via", "reason", "decided_at", "remember")


def approval_head(**fields: Any) -> str:
    """The settle fields of an approval as the opening of a JSON object."""
    return _COMPACT.encode({name: fields[name] for name in _SETTLE_FIELDS})[:-1] + ","


PENDING_HEAD = approval_head(status="pending", decided_by=None, via=None, reason=None, decided_at=None, remember=False)
"""How every pending approval starts; settling swaps this head for the decision's."""


def approval_json(approval: ApprovalRecord) -> str:
    """An approval's JSON, opening with its settle fields (the canonical head when pending)."""
    if approval.status == "pending":
        head = PENDING_HEAD
    else:
        head = approval_head(**{name: getattr(approval, name) for name in _SETTLE_FIELDS})
    return head + approval.model_dump_json(exclude=set(_SETTLE_FIELDS))[1:]


def run_parts(run: RunRecord, *, begin: bool) -> tuple[str, str]:
    """The run's head (status and update time, which scripts rewrite) and the rest of its JSON."""
    body = run.model_dump_json(exclude=set(_RUN_HEAD_FIRST if begin else _RUN_HEAD))
    return f'{{"status":"{run.status}","updated_at":{json.dumps(run.updated_at)},', body[1:]


def as_text(value: bytes | str) -> str:
    """A reply as text, whether the client decodes responses or not."""
    return value.decode() if isinstance(value, bytes) else value


def json_array(items: Sequence[bytes | str]) -> bytes | str:
    """Join JSON values into one JSON array, so one pydantic call parses them all."""
    if items and isinstance(items[0], str):
        return "[" + ",".join(cast(Sequence[str], items)) + "]"
    return b"[" + b",".join(cast(Sequence[bytes], items)) + b"]"


def index_member(thread_id: str, item_id: str) -> str:
    """A global index's member: the thread and the id, as a JSON array."""
    return f"[{_quote(thread_id)},{_quote(item_id)}]"


def millis(seconds: float) -> int:
    """Seconds as Redis milliseconds (at least 1)."""
    return max(1, int(seconds * 1000))


def parse_events(data: bytes | str) -> list[RunEvent]:
    """Events from a JSON array (a published batch, or joined stream entries)."""
    return EVENTS.validate_json(data)


def score_text(value: float) -> str:
    """A score as Redis reads it back: the shortest text of the float, so both sides agree."""
    return repr(float(value))


def score_pairs(reply: Sequence[Any]) -> list[tuple[Any, Any]]:
    """A raw ``WITHSCORES`` reply as (member, score) pairs: redis-py 8 parses it into pairs, RESP2 is flat."""
    if reply and isinstance(reply[0], (list, tuple)):
        return [(member, score) for member, score in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))
