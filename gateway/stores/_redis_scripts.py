"""The Lua scripts of ``RedisStore`` and how they are called.

Every script touches the keys of ONE thread only (they share the ``{thread_id}`` hash tag, so on a
Redis Cluster they live in one slot), except ``RECONCILE``, which touches one global sorted set.
Each names every key it touches in ``KEYS``: ``ERASE`` is given the journal and lease of each run
the caller read, and refuses when the thread's runs are no longer those.
Global indexes are never written from a script: the store pipelines them beside the script call.

Records that a script must change are stored with a fixed *head*: a JSON fragment at the start of
the object that only the store writes (``{"status":"running","updated_at":"...",`` for runs, the
settle fields for approvals). A script reads and rewrites the head with an anchored match and
keeps the rest byte for byte, so it never decodes and re-encodes a record (``cjson`` would turn
``{}`` into ``[]`` and round floats).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import NoScriptError

from ._redis_batch import SCRIPT_SOURCES, Command

__all__ = [
    "APPLY",
    "APPROVALS",
    "CHANNEL_IF",
    "CLAIM",
    "CLEAR_QUEUE",
    "ENQUEUE",
    "ENSURE",
    "ERASE",
    "LEASE_STATE",
    "QUEUED",
    "RECONCILE",
    "RENAME",
    "REMOVE_QUEUED",
    "RENEW",
    "SETTLE",
    "UPDATE_QUEUED",
    "Call",
    "LuaScript",
    "Send",
    "SendOrdered",
    "run_scripts",
]


Call = Callable[..., Awaitable[Any]]
"""Sends one command (``execute_command`` arguments) and returns its reply."""

Send = Callable[[Sequence[Command]], Awaitable[list[Any]]]
"""Sends commands together and returns each reply or error, in order."""

SendOrdered = Callable[[Sequence[Command], Sequence[Command]], Awaitable[tuple[list[Any], list[Any]]]]
"""Sends the first commands, then the others once the first succeeded (``CommandBatcher.send_ordered``)."""


@dataclass(frozen=True)
class LuaScript:
    """A script called by its SHA1, loaded on first use and again after a Redis restart."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())
        SCRIPT_SOURCES[self.sha] = self.source

    def command(self, keys: Sequence[str], args: Sequence[Any]) -> Command:
        """The EVALSHA command that runs the script."""
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    async def __call__(self, call: Call, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run the script in one round trip (two when Redis does not know it yet)."""
        try:
            return await call(*self.command(keys, args))
        except NoScriptError:
            await call("SCRIPT LOAD", self.source)
            return await call(*self.command(keys, args))


async def run_scripts(send: Send, commands: Sequence[Command], scripts: Sequence[LuaScript]) -> list[Any]:
    """Send commands together (one pipeline, no MULTI); reload scripts once if Redis forgot them.

    redis-py's own script helper asks ``SCRIPT EXISTS`` before every pipeline (a second round
    trip); calling by SHA and reloading only on NOSCRIPT keeps one. After a reload, every command
    from the first that met NOSCRIPT on is sent again, in order: a later command may read what the
    script writes (``begin_run`` reads the history the script appended to), so its first reply
    is stale. Commands that ride beside a script are idempotent index writes and reads, and
    ``APPLY`` answers a write it already applied as it did, so sending them twice is safe.
    """
    results = await send(commands)
    first = next((i for i, result in enumerate(results) if isinstance(result, NoScriptError)), None)
    if first is not None and scripts:
        await send([("SCRIPT LOAD", script.source) for script in scripts])
        results[first:] = await send(commands[first:])
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


CHANNEL_IF = LuaScript(
    "channel_if",
    r"""
-- Compare a channel-state value and, when it matches, delete it or give it a new TTL.
-- KEYS: 1 the key. ARGV: 1 the expected JSON, 2 'del' | 'ttl', 3 the new TTL in ms (for 'ttl').
-- Returns 1 when the value matched (and was changed), else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == 'del' then
  redis.call('DEL', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
""",
)


APPLY = LuaScript(
    "apply",
    r"""
-- Begin a run or apply one step's batch on a thread, atomically.
-- KEYS: 1 thread hash, 2 event stream, 3 messages, 4 runs hash, 5 run order,
--       6 journal of the run, 7 lease of the run, 8 approvals hash, 9 pending approvals,
--       10 the order of all approvals, 11 the queue (message ids), 12 queued messages hash
-- ARGV: 1 channel, 2 mode (begin|write), 3 run id ('' = none), 4 run head, 5 run rest,
--       6 release (1|0), 7 owner id, 8 thread record, 9 lease owner, 10 lease ms,
--       11 events (JSON without seq), 12 journal entries, 13 messages, 14 approvals, each a
--       newline-joined list (compact JSON never holds a raw newline), 15 approval ids (JSON array),
--       16 this write's id (32 hex digits), 17 now (UNIX seconds: the thread's last activity),
--       18 the queued message a begin dequeues ('' = none: then a queue that holds one is busy),
--       19 PUBLISH, or SPUBLISH on a Cluster (the channel shares the thread's slot).
-- Returns the seq of the first event (last seq + 1 when there are none), or
-- -1 no such thread, -2 someone else's thread, -3 a run is running, -4 a run waits for an approval,
-- -5 messages wait in the queue, -6 the message to dequeue is not the queue's head.
--
-- redis-py sends a command again when the connection drops before the reply came, though Redis
-- may have run it: the thread remembers its last writes' ids ('recent': "<id>:<first>;" each), and
-- a write it already applied answers as it did, instead of applying twice.
local thread = KEYS[1]
local mode = ARGV[2]
local run_id = ARGV[3]
local write_id = ARGV[16]
local recent = redis.call('HGET', thread, 'recent') or ''
local seen = string.find(recent, write_id .. ':', 1, true)
if seen then
  local from = seen + #write_id + 1
  return tonumber(string.sub(recent, from, string.find(recent, ';', from, true) - 1))
end
if mode == 'begin' then
  local owner = redis.call('HGET', thread, 'owner')
  if not owner then
    redis.call('HSET', thread, 'owner', ARGV[7], 'record', ARGV[8])
  elseif owner ~= ARGV[7] then
    return -2
  end
  if redis.call('HEXISTS', thread, 'running') == 1 then
    return -3
  end
  if redis.call('ZCARD', KEYS[9]) > 0 then
    return -4
  end
  local head = redis.call('LINDEX', KEYS[11], 0)
  if ARGV[18] == '' then
    if head then
      return -5
    end
  elseif head ~= ARGV[18] then
    return -6
  else
    redis.call('LPOP', KEYS[11])
    redis.call('HDEL', KEYS[12], ARGV[18])
  end
  redis.call('HSET', thread, 'running', run_id, 'active', ARGV[17])
  redis.call('RPUSH', KEYS[5], run_id)
  redis.call('SET', KEYS[7], ARGV[9], 'PX', ARGV[10])
elseif redis.call('EXISTS', thread) == 0 then
  return -1
end

local function split(blob)
  local items, start = {}, 1
  if blob == '' then
    return items
  end
  while true do
    local stop = string.find(blob, '\n', start, true)
    if not stop then
      items[#items + 1] = string.sub(blob, start)
      return items
    end
    items[#items + 1] = string.sub(blob, start, stop - 1)
    start = stop + 1
  end
end

local function push_all(key, items)
  for i = 1, #items, 1000 do
    redis.call('RPUSH', key, unpack(items, i, math.min(i + 999, #items)))
  end
end

local seq = tonumber(redis.call('HGET', thread, 'seq') or '0')
local first = seq + 1
local bodies = split(ARGV[11])
for k = 1, #bodies do
  seq = seq + 1
  bodies[k] = '{"seq":' .. seq .. ',' .. string.sub(bodies[k], 2)
  redis.call('XADD', KEYS[2], seq .. '-0', 'e', bodies[k])
end
if #bodies > 0 then
  redis.call('HSET', thread, 'seq', seq, 'active', ARGV[17])
end
if run_id ~= '' then
  local record = ARGV[4]
  if mode == 'begin' then
    record = record .. '"first_seq":' .. first .. ','
  end
  redis.call('HSET', KEYS[4], run_id, record .. ARGV[5])
  if ARGV[12] ~= '' then
    push_all(KEYS[6], split(ARGV[12]))
  end
  if ARGV[6] == '1' then
    if redis.call('HGET', thread, 'running') == run_id then
      redis.call('HDEL', thread, 'running')
    end
    redis.call('DEL', KEYS[7])
  end
end
if ARGV[13] ~= '' then
  push_all(KEYS[3], split(ARGV[13]))
end
if ARGV[14] ~= '' then
  local approvals, ids = split(ARGV[14]), cjson.decode(ARGV[15])
  for k = 1, #approvals do
    redis.call('HSET', KEYS[8], ids[k], approvals[k])
    if redis.call('ZSCORE', KEYS[9], ids[k]) == false then
      redis.call('ZADD', KEYS[9], redis.call('HINCRBY', thread, 'approvals', 1), ids[k])
    end
    if redis.call('ZSCORE', KEYS[10], ids[k]) == false then
      redis.call('ZADD', KEYS[10], redis.call('HINCRBY', thread, 'approvals', 1), ids[k])
    end
  end
end
recent = recent .. write_id .. ':' .. first .. ';'
if #recent > 640 then
  recent = string.sub(recent, string.find(recent, ';', #recent - 640, true) + 1)
end
redis.call('HSET', thread, 'recent', recent)
if #bodies > 0 then
  redis.call(ARGV[19], ARGV[1], '[' .. table.concat(bodies, ',') .. ']')
end
return first
""",
)

ENSURE = LuaScript(
    "ensure",
    r"""
-- Create a thread unless it exists; answer the stored record.
-- KEYS: 1 thread hash. ARGV: 1 owner, 2 record.
redis.call('HSETNX', KEYS[1], 'owner', ARGV[1])
redis.call('HSETNX', KEYS[1], 'record', ARGV[2])
return redis.call('HGET', KEYS[1], 'record')
""",
)

CLAIM = LuaScript(
    "claim",
    r"""
-- Make an owner the driver of a run: its status is expected, no live foreign lease holds it
-- and the thread's running slot is free or its own.
-- KEYS: 1 thread hash, 2 runs hash, 3 lease of the run
-- ARGV: 1 run id, 2 owner, 3 lease ms, 4 now (ISO), 5... expected statuses
-- Returns the updated run record, or nil.
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if not stored then
  return false
end
local _, head_end, status = string.find(stored, '^{"status":"([^"]*)","updated_at":"[^"]*",')
if not head_end then
  return redis.error_reply('ERR agora: malformed run record ' .. ARGV[1])
end
local expected = false
for i = 5, #ARGV do
  if ARGV[i] == status then
    expected = true
  end
end
if not expected then
  return false
end
local holder = redis.call('GET', KEYS[3])
if holder and holder ~= ARGV[2] then
  return false
end
local running = redis.call('HGET', KEYS[1], 'running')
if running and running ~= ARGV[1] then
  return false
end
redis.call('HSET', KEYS[1], 'running', ARGV[1])
redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3])
local updated = '{"status":"running","updated_at":"' .. ARGV[4] .. '",' .. string.sub(stored, head_end + 1)
redis.call('HSET', KEYS[2], ARGV[1], updated)
return updated
""",
)

RENEW = LuaScript(
    "renew",
    r"""
-- Extend a lease if the owner still holds it (compare and set).
-- KEYS: 1 lease; ARGV: 1 owner, 2 lease ms
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
""",
)

LEASE_STATE = LuaScript(
    "lease_state",
    r"""
-- Where a run's lease stands, for the global lease index.
-- KEYS: 1 runs hash, 2 lease of the run; ARGV: 1 run id
-- Returns -1 the run is gone or not running, 0 running without a lease (expired),
-- else the lease's expiry in ms (Redis clock).
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored or string.sub(stored, 1, 20) ~= '{"status":"running",' then
  return -1
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl == -2 then
  return 0
end
local now = redis.call('TIME')
if ttl == -1 then
  ttl = 86400000
end
return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
""",
)

RECONCILE = LuaScript(
    "reconcile",
    r"""
-- Correct entries of a global index (a sorted set) only where nobody changed them since we looked.
-- KEYS: 1 the sorted set; ARGV: triplets (member, score seen, new score or '' to remove)
local changed = 0
for i = 1, #ARGV, 3 do
  local current = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if current and tonumber(current) == tonumber(ARGV[i + 1]) then
    if ARGV[i + 2] == '' then
      redis.call('ZREM', KEYS[1], ARGV[i])
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 2], ARGV[i])
    end
    changed = changed + 1
  end
end
return changed
""",
)

SETTLE = LuaScript(
    "settle",
    r"""
-- Settle a pending approval (compare and set on its head).
-- KEYS: 1 approvals hash, 2 pending approvals, 3 remembered tools
-- ARGV: 1 tool call id, 2 the head of a pending approval, 3 the new head, 4 remember (1|0)
-- Returns the updated approval, or nil when it is not pending.
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if stored and string.sub(stored, 1, #ARGV[3]) == ARGV[3] then
  return stored  -- this very decision, sent again after a lost reply
end
if not stored or string.sub(stored, 1, #ARGV[2]) ~= ARGV[2] then
  return false
end
local updated = ARGV[3] .. string.sub(stored, #ARGV[2] + 1)
redis.call('HSET', KEYS[1], ARGV[1], updated)
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[4] == '1' then
  redis.call('SADD', KEYS[3], cjson.decode(stored)['tool'])
end
return updated
""",
)

APPROVALS = LuaScript(
    "approvals",
    r"""
-- The thread's pending approvals, oldest first.
-- KEYS: 1 approvals hash, 2 pending approvals
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
if #ids == 0 then
  return {}
end
return redis.call('HMGET', KEYS[1], unpack(ids))
""",
)

RENAME = LuaScript(
    "rename",
    r"""
-- Name a thread, or drop its name, if the thread exists.
-- KEYS: 1 thread hash; ARGV: 1 'set' | 'reset', 2 the title (for 'set')
-- Returns 1 when the thread exists, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], 'title', ARGV[2])
else
  redis.call('HDEL', KEYS[1], 'title')
end
return 1
""",
)

ERASE = LuaScript(
    "erase",
    r"""
-- Erase every key of a thread at once, if its runs are the ones the caller read.
-- KEYS: 1 thread hash, 2 event stream, 3 messages, 4 runs hash, 5 run order, 6 approvals hash,
--       7 pending approvals, 8 approval order, 9 remembered tools, 10 the queue, 11 queued
--       messages hash, then the journal and the lease of each run the caller read, in run order
--       (two keys per run)
-- ARGV: the run ids the caller read, in order
-- Returns -1 when the thread's runs changed since (read them again), else
-- {owner ('' when there was no thread), the tool call ids of its approvals, its queued message ids}.
local runs = redis.call('LRANGE', KEYS[5], 0, -1)
if #runs ~= #ARGV then
  return -1
end
for i = 1, #runs do
  if runs[i] ~= ARGV[i] then
    return -1
  end
end
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local approvals = redis.call('HKEYS', KEYS[6])
local queued = redis.call('HKEYS', KEYS[11])
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
return {owner, approvals, queued}
""",
)

ENQUEUE = LuaScript(
    "enqueue",
    r"""
-- Put a message last (or first) in its thread's queue, if the thread exists and the queue has room.
-- KEYS: 1 thread hash, 2 the queue (message ids, first first), 3 queued messages hash
-- ARGV: 1 message id, 2 its JSON, 3 the limit, 4 first (1|0)
-- Returns its 1-based position, or -1 no such thread, -2 the queue is full.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1 then
  -- this very message, sent again after a lost reply
  local at = redis.call('LPOS', KEYS[2], ARGV[1])
  if at then
    return at + 1
  end
end
if redis.call('LLEN', KEYS[2]) >= tonumber(ARGV[3]) then
  return -2
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if ARGV[4] == '1' then
  redis.call('LPUSH', KEYS[2], ARGV[1])
  return 1
end
return redis.call('RPUSH', KEYS[2], ARGV[1])
""",
)

QUEUED = LuaScript(
    "queued",
    r"""
-- The thread's queued messages, first first.
-- KEYS: 1 the queue, 2 queued messages hash
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
if #ids == 0 then
  return {}
end
return redis.call('HMGET', KEYS[2], unpack(ids))
""",
)

UPDATE_QUEUED = LuaScript(
    "update_queued",
    r"""
-- Replace a queued message (compare and set on what the caller read) and/or move it first.
-- KEYS: 1 the queue, 2 queued messages hash
-- ARGV: 1 message id, 2 the JSON the caller read, 3 the new JSON, 4 first (1|0)
-- Returns 1 done, 0 no such message, -1 it changed since the caller read it (read it again).
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if not stored then
  return 0
end
if stored ~= ARGV[2] and stored ~= ARGV[3] then
  return -1
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
if ARGV[4] == '1' and redis.call('LINDEX', KEYS[1], 0) ~= ARGV[1] then
  redis.call('LREM', KEYS[1], 1, ARGV[1])
  redis.call('LPUSH', KEYS[1], ARGV[1])
end
return 1
""",
)

REMOVE_QUEUED = LuaScript(
    "remove_queued",
    r"""
-- Take a message out of its thread's queue.
-- KEYS: 1 the queue, 2 queued messages hash; ARGV: 1 message id
-- Returns the message's JSON, or nil when it was not queued.
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if not stored then
  return false
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('LREM', KEYS[1], 1, ARGV[1])
return stored
""",
)

CLEAR_QUEUE = LuaScript(
    "clear_queue",
    r"""
-- Empty a thread's queue. KEYS: 1 the queue, 2 queued messages hash
-- Returns the messages' JSON, first first.
local ids = redis.call('LRANGE', KEYS[1], 0, -1)
local held = {}
if #ids > 0 then
  held = redis.call('HMGET', KEYS[2], unpack(ids))
end
redis.call('DEL', KEYS[1], KEYS[2])
return held
""",
)
