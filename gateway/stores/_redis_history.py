"""``HistoryCache``: the history window a ``RedisStore`` read last, per thread, so a turn reads only what is new.

A thread's messages list only grows (``APPLY`` appends; erasing the thread deletes it whole), so
its length names its content, given which list it is: the thread hash keeps a ``born`` id, set
by the first ``HISTORY`` read of the thread (a thread erased and made again gets a new one).
``begin_run`` sends ``HISTORY`` in its pipeline, after ``APPLY``, with the ``born`` and length
this process last saw and the oldest position it still holds: when they still describe the
list (whoever wrote since, this process or another), the script answers only the messages
appended since; otherwise (a new process, another thread of the same id, a window the cache
does not cover) it answers the whole window. Either way one round trip, and the answer is what
``LRANGE`` of the window would give.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..models import MESSAGE_ADAPTER, AssistantMessage, ToolMessage, UserMessage
from ._redis_batch import Command
from ._redis_layout import as_text, json_array
from ._redis_scripts import LuaScript

__all__ = ["HISTORY", "HistoryCache"]

Message = UserMessage | AssistantMessage | ToolMessage

_KEPT_MESSAGES = 20_000
"""Messages the cache holds at most, over all its threads (the least recently read go first)."""

HISTORY = LuaScript(
    "history",
    r"""
-- A thread's history window, or only what was appended since the caller's last read.
-- KEYS: 1 thread hash, 2 messages. ARGV: 1 the born id the caller knows ('' none), 2 the length
-- it knows, 3 the oldest position it holds, 4 the window (0: every message), 5 a born id for a
-- thread that has none yet.
-- Returns {born, length, from, the messages from position 'from' on}: 'from' is the caller's
-- known length when it may append them to what it holds, else the window's first position.
local born = redis.call('HGET', KEYS[1], 'born')
if not born then
  born = ARGV[5]
  if redis.call('EXISTS', KEYS[1]) == 1 then
    redis.call('HSET', KEYS[1], 'born', born)
  end
end
local length = redis.call('LLEN', KEYS[2])
local window = tonumber(ARGV[4])
local start = 0
if window > 0 and length > window then
  start = length - window
end
local from = start
local known = tonumber(ARGV[2])
if born == ARGV[1] and known <= length and tonumber(ARGV[3]) <= start and known >= start then
  from = known
end
return {born, length, from, redis.call('LRANGE', KEYS[2], from, -1)}
""",
)


@dataclass(kw_only=True)
class _Held:
    born: str
    length: int
    """The list's length when read: ``messages`` are its last ones."""
    messages: list[Message]


class HistoryCache:
    """The newest history window read per thread, kept for the next ``begin_run`` on it."""

    def __init__(self, kept_messages: int = _KEPT_MESSAGES) -> None:
        self._held: dict[str, _Held] = {}
        """Thread id -> its window as last read (least recently read first)."""
        self._kept = kept_messages
        self._count = 0

    def command(self, thread_key: str, messages_key: str, thread_id: str, limit: int | None) -> Command:
        """The ``HISTORY`` call that reads ``thread_id``'s window of ``limit`` messages (``None``: all)."""
        held = self._held.get(thread_id)
        born, known, oldest = ("", 0, 0) if held is None else (held.born, held.length, held.length - len(held.messages))
        args = [born, known, oldest, limit or 0, os.urandom(8).hex()]
        return HISTORY.command([thread_key, messages_key], args)

    def answer(self, thread_id: str, reply: Sequence[Any], limit: int | None) -> list[Message]:
        """The window from ``HISTORY``'s reply (what is new appended to what is held), kept for next time."""
        born, length, start, items = as_text(reply[0]), int(reply[1]), int(reply[2]), reply[3]
        new: list[Message] = MESSAGE_ADAPTER.validate_json(json_array(items)) if items else []
        held = self._held.pop(thread_id, None)
        if held is not None:
            self._count -= len(held.messages)
        if held is not None and held.born == born and start == held.length:
            window = held.messages + new
            if limit and len(window) > limit:
                window = window[-limit:]
        else:
            window = new
        self._held[thread_id] = _Held(born=born, length=length, messages=window)
        self._count += len(window)
        while self._count > self._kept and self._held:
            self._count -= len(self._held.pop(next(iter(self._held))).messages)
        return list(window)

    def forget(self, thread_id: str) -> None:
        """Drop what is held of ``thread_id`` (it was erased)."""
        held = self._held.pop(thread_id, None)
        if held is not None:
            self._count -= len(held.messages)
