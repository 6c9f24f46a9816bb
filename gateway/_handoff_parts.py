"""The parts of handoffs that are only data: ids, a thread's list of children, mirrored lines, answer runs.

See ``gateway._handoffs`` for the rules.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from ._agents import MAX_HANDOFF_DEPTH, Agent, Handoff
from .events import (
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    RunEvent,
    RunStartedEvent,
    TextEndEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
    new_id,
    now_iso,
)
from .stores import ApprovalRecord, Batch, ModelStepEntry, RunRecord, Store, ThreadRecord

__all__ = [
    "CHILD_RUN_PREFIXES",
    "ChildThreads",
    "answer_run",
    "answer_run_id",
    "child_run_id",
    "child_thread_id",
    "child_threads_of",
    "children_key",
    "handoff_of",
    "is_child_thread",
    "is_detached",
    "mirrored",
    "parked_key",
    "to_mirror",
]

CHILD_RUN_PREFIXES = ("run-ask-", "run-start-")
"""How the id of a handoff's child run begins (``child_run_id``)."""
_THREAD_CHARS = 200
_PARKED_ON = "agora-handoff-parked:{thread_id}"
_MIRRORED = (
    ToolStartedEvent,
    ToolCompletedEvent,
    ToolFailedEvent,
    ToolDeniedEvent,
    ApprovalRequestedEvent,
    ApprovalSettledEvent,
    UiEvent,
)
_CHILDREN = "agora-handoff-children:{thread_id}"
"""Channel state: the threads of the thread's children that have not ended (where their approvals are)."""
_CHILDREN_TTL = 40 * 24 * 3600.0
_CHILDREN_KEPT = 20
_CHILD_THREAD = re.compile(r":tc_[0-9a-f]{32}\Z")
"""How a child's thread id ends (``child_thread_id``: the call id the driver made)."""


def child_thread_id(parent_thread: str, call_id: str) -> str:
    """The thread of the child run answering ``call_id``: ``<parent>:<call id>``, hashed when too long."""
    thread = f"{parent_thread}:{call_id}"
    if len(thread) <= _THREAD_CHARS:
        return thread
    digest = hashlib.sha256(parent_thread.encode()).hexdigest()[:32]
    return f"sub:{digest}:{call_id}"


def parked_key(thread_id: str) -> str:
    """The channel state key of the thread's run parked on a sub-agent (``Handoffs.parked_on_child``)."""
    return _PARKED_ON.format(thread_id=thread_id)


def children_key(thread_id: str) -> str:
    """The channel state key of the thread's children that have not ended (``ChildThreads``)."""
    return _CHILDREN.format(thread_id=thread_id)


async def is_child_thread(store: Store, thread_id: str) -> bool:
    """Whether ``thread_id`` is a handoff child's own thread (its first run has a parent).

    Only an id shaped as ``child_thread_id`` makes is read from the store: the others cost nothing.
    """
    if _CHILD_THREAD.search(thread_id) is None:
        return False
    runs = await store.thread_runs(thread_id)
    return bool(runs) and runs[0].parent_thread_id is not None


async def child_threads_of(store: Store, thread_id: str) -> list[str]:
    """The threads of the handoff children the thread's runs began (read from their journals)."""
    found: list[str] = []
    for run in await store.thread_runs(thread_id):
        for entry in await store.read_journal(thread_id, run.run_id):
            if not isinstance(entry, ModelStepEntry):
                continue
            for call in entry.calls:
                if not call.name.startswith(("ask_", "start_")):
                    continue
                child = await store.get_run(child_run_id(call.id, detached=call.name.startswith("start_")))
                if child is not None and child.parent_thread_id == thread_id and child.thread_id not in found:
                    found.append(child.thread_id)
    return found


def child_run_id(call_id: str, *, detached: bool) -> str:
    """The id of the child run answering the parent's call ``call_id`` (``run-ask-…``, ``run-start-…``)."""
    return f"{CHILD_RUN_PREFIXES[1] if detached else CHILD_RUN_PREFIXES[0]}{call_id}"


def is_detached(run: RunRecord) -> bool:
    """Whether ``run`` is a ``start_`` handoff's child (its answer is delivered, not awaited)."""
    return run.parent_run_id is not None and run.run_id.startswith(CHILD_RUN_PREFIXES[1])


def answer_run_id(child: RunRecord) -> str:
    """The id of the run that writes a detached child's answer to its parent's thread."""
    return f"{child.run_id}.answer"


def handoff_of(agent: Agent, name: str) -> Handoff | None:
    """The agent's handoff whose tool is ``name``, or ``None``."""
    for handoff in agent.handoffs:
        if isinstance(handoff, Handoff) and handoff.tool_name == name:
            return handoff
    return None


@dataclass
class ChildThreads:
    """Each thread's children that have not ended, in channel state: where its sub-agents' approvals are."""

    store: Store

    async def pending_below(self, thread_id: str, depth: int = 0) -> list[ApprovalRecord]:
        """The pending approvals of the thread's children that have not ended (and of theirs)."""
        store = self.store
        children = await store.channel_get(_CHILDREN.format(thread_id=thread_id))
        if not isinstance(children, list) or depth >= MAX_HANDOFF_DEPTH:
            return []
        found: list[ApprovalRecord] = []
        for child_thread in children:
            if isinstance(child_thread, str):
                found.extend(await store.pending_approvals(child_thread))
                found.extend(await self.pending_below(child_thread, depth + 1))
        return found

    async def update(self, parent_thread: str, child_thread: str, *, present: bool) -> None:
        """Add (or drop) a child's thread in its parent's list (``pending_below``).

        A read and a write, not atomic: only the parent's driver adds and the child's end drops, so
        they rarely meet; a child lost to a race still shows its approval by its mirrored event,
        it is only missing from ``pending_approvals`` (typed decisions on push channels).
        """
        store, key = self.store, _CHILDREN.format(thread_id=parent_thread)
        held = await store.channel_get(key)
        children = [c for c in held if isinstance(c, str) and c != child_thread] if isinstance(held, list) else []
        if present:
            children = [*children[-(_CHILDREN_KEPT - 1) :], child_thread]
        if children:
            await store.channel_set(key, children, ttl=_CHILDREN_TTL)
        elif held is not None:
            await store.channel_delete(key)


def to_mirror(events: list[RunEvent]) -> list[Any]:
    """The events of a child's write that its ancestors' threads show too.

    A copy (``parent_tool_call_id`` set) is never mirrored again: it was written to every
    ancestor at once.
    """
    return [e for e in events if isinstance(e, _MIRRORED) and e.parent_tool_call_id is None]


def mirrored(events: list[Any], ancestor: RunRecord, *, parent_call: str, sub_agent: str) -> list[Any]:
    """Copies of ``events`` for ``ancestor``'s thread, nested under ``parent_call`` (kept when already set)."""
    return [
        event.model_copy(
            update={
                "seq": 0,
                "thread_id": ancestor.thread_id,
                "run_id": ancestor.run_id,
                "parent_tool_call_id": event.parent_tool_call_id or parent_call,
                "sub_agent": event.sub_agent or sub_agent,
            }
        )
        for event in events
    ]


def answer_run(
    child: RunRecord, run_id: str, text: str, parent_thread: ThreadRecord
) -> tuple[RunRecord, ThreadRecord, Batch]:
    """The run that writes a detached child's answer ``text``: its record, its thread, its first batch.

    Its journal holds the answer as its one model step, so driving it (here, or after a crash on
    any process) ends it with that message and never asks a model.
    """
    assert child.parent_thread_id is not None
    message_id = new_id("msg")
    turn = child.turn.model_copy(update={"thread_id": child.parent_thread_id})
    answer = RunRecord(
        run_id=run_id,
        thread_id=child.parent_thread_id,
        agent=child.agent,
        turn=turn,
        parent_call_id=child.parent_call_id,  # not a child: nothing waits for it or mirrors it
    )
    step = ModelStepEntry(step=0, message_id=message_id, text=text)
    events: list[RunEvent] = [
        RunStartedEvent(thread_id=answer.thread_id, run_id=run_id, agent=child.agent),
        TextEndEvent(thread_id=answer.thread_id, run_id=run_id, at=now_iso(), message_id=message_id, text=text),
    ]
    record = ThreadRecord(
        thread_id=parent_thread.thread_id,
        owner_id=parent_thread.owner_id,
        tenant_ref=parent_thread.tenant_ref,
        channel=parent_thread.channel,
    )
    return answer, record, Batch(events=events, journal=[step])
