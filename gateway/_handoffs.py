"""Handoffs: an agent hands a task to another as a child run (``ask_<agent>`` awaited, ``start_<agent>`` detached).

The rules, in one place:

1. **Offer.** The driver offers each of its agent's ``Handoff`` s as a tool (``{task: str}``) next
   to the registry's tools; they are not registry tools, so no other agent sees them.
2. **Refuse.** A sub-agent the actor may not talk to, one already among the run's ancestors (a
   cycle) or a run at ``MAX_HANDOFF_DEPTH``: the call fails with the reason, which the model reads.
3. **Begin.** The child run runs on its own thread (``<parent thread>:<call id>``, same owner),
   for the parent's actor, channel and UI capabilities, with ``parent_run_id``, ``parent_call_id``
   and ``depth`` set. Its id is derived from the call's (``run-ask-<call id>``,
   ``run-start-<call id>``): a resumed parent finds its child, never begins a second one.
4. **Mirror.** What the child's tools do (started, completed, failed, denied, approvals, ``ui``) is
   written again to the parent's thread, with the parent's ``run_id``, tagged
   ``parent_tool_call_id`` and ``sub_agent``: channels show it nested under the handoff's line,
   and the child's approvals reach the same person, who decides them by their ``tool_call_id``.
5. **Await** (``ask_``). The parent waits for the child: its final text is the call's result; a
   failed or cancelled child fails the call. A child that parks on an approval parks the parent
   too (``awaiting-approval`` with no approval record of its own, its lease released); whoever ends
   the child claims the parked parent and resumes it from its journal. The parent looks at the
   child again once its park is written, so a child ending meanwhile is never missed.
6. **Detach** (``start_``). The call settles at once with a receipt; when the child ends, its
   answer is written to the parent's thread as its own assistant message by a short run of its
   own (``<child run id>.answer``) whose journal holds that message as its only step, begun when
   the thread is free: durable like any run, and never a second model call.
7. **Cancel.** A parent that ends ``cancelled`` stops its children that have not ended.
8. **Safety net.** A process that stopped between a child's end and the step after it (waking
   the parent, delivering the answer) leaves that step to the sweep of any process
   (:meth:`Handoffs.sweep`, among the newest runs).

The data parts (ids, a thread's list of children, mirrored copies, answer runs) are in
``gateway._handoff_parts``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from tools import ToolDefinition, UserError

from ._agents import MAX_HANDOFF_DEPTH, Agent, Handoff
from ._errors import StoreUnavailableError, ThreadBusyError, ThreadParkedError
from ._handoff_parts import (
    CHILD_RUN_PREFIXES,
    ChildThreads,
    answer_run,
    answer_run_id,
    child_run_id,
    child_thread_id,
    handoff_of,
    is_detached,
    mirrored,
    parked_key,
    to_mirror,
)
from ._transcript import error_value
from .events import (
    ENDED_STATUSES,
    ApprovalSettledEvent,
    RunEvent,
    RunStatus,
    ToolStartedEvent,
    Turn,
)
from .stores import Batch, ModelStepEntry, PlannedCall, RunRecord, ToolSettledEntry

if TYPE_CHECKING:
    from ._driver import RunDriver
    from ._runtime import Runtime

__all__ = ["Handoffs", "check_handoffs"]

logger = logging.getLogger("gateway.handoffs")


_PARKED = frozenset({"awaiting-approval"})
_TASK_CHARS = 32_000
_CHAINS_KEPT = 4096
_ANSWERING = "agora-handoff-answering:{run_id}"
"""Channel state: a process is beginning the answer run of this detached child."""
_ANSWER_CLAIM_TTL = 60.0
_PARKED_TTL = 30 * 86400.0
"""How long a thread remembers its run parked on a sub-agent (the run's status is checked on every read)."""
SWEEP_EVERY = 30.0
"""Seconds between the handoff safety net's looks at the newest runs (``Handoffs.sweep``)."""
SWEEP_RUNS = 100
REFUSED = "handoff_refused"
FAILED = "handoff_failed"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the other agent should do, in full."}},
    "required": ["task"],
    "additionalProperties": False,
}


def check_handoffs(agents: dict[str, Agent]) -> None:
    """Refuse a handoff to an agent that is not served.

    Raises:
        UserError: An agent hands off to a name no agent has.
    """
    for agent in agents.values():
        for handoff in agent.handoffs:
            assert isinstance(handoff, Handoff)  # Agent made every entry one
            if handoff.agent not in agents:
                raise UserError(f"agent {agent.name!r} hands off to {handoff.agent!r}, which is not served")


class Handoffs:
    """The handoffs of one runtime (see the module docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._chains: dict[str, list[RunRecord]] = {}
        """A child run's ancestors, nearest first (they never change), until it ends."""
        self._delivering: set[str] = set()
        """Names of the background tasks running (one per answer to deliver, per parent to wake)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.children = ChildThreads(runtime.store)
        """Each thread's children that have not ended: where its sub-agents' approvals are."""
        self._swept = -SWEEP_EVERY
        self.enabled = any(agent.handoffs for agent in runtime.agents.values())
        """An agent hands off: without one, nothing here ever reads the store (the hot path pays nothing)."""

    # -- offering ----------------------------------------------------------------------------------

    def definitions(self, agent: Agent) -> list[ToolDefinition]:
        """The handoff tools ``agent`` offers its model."""
        found: list[ToolDefinition] = []
        for handoff in agent.handoffs:
            assert isinstance(handoff, Handoff)
            sub = self.runtime.agents.get(handoff.agent)
            about = handoff.description or (sub.description if sub is not None else "") or f"the {handoff.agent} agent"
            verb = (
                "Start a task in the background; its answer arrives later as its own message."
                if handoff.detached
                else "Ask and wait for the answer."
            )
            description = f"Hand a task to {handoff.agent}: {about}. {verb}"
            found.append(
                ToolDefinition(name=handoff.tool_name, description=description, parameters=INPUT_SCHEMA, kind="read")
            )
        return found

    # -- a handoff call --------------------------------------------------------------------------

    async def refusal(self, driver: RunDriver, handoff: Handoff) -> str | None:
        """Why this run may not hand off to ``handoff.agent`` (in words the model reads), or ``None``."""
        run = driver.run
        sub = self.runtime.agents.get(handoff.agent)
        if sub is None or not sub.usable_by(run.turn.actor):
            return f"You may not hand work to {handoff.agent!r} for this person."
        if run.depth >= MAX_HANDOFF_DEPTH:
            return f"Handoffs go {MAX_HANDOFF_DEPTH} levels deep at most; this run is at the limit: do it yourself."
        names = [run.agent, *(a.agent for a in await self.ancestors(run))]
        if sub.name in names:
            chain = " -> ".join(reversed(names))
            return f"{sub.name!r} is already working on this ({chain}): handing it the task again would be a cycle."
        return None

    async def ancestors(self, run: RunRecord) -> list[RunRecord]:
        """The runs that led to ``run``, nearest first."""
        if run.parent_run_id is None:
            return []
        known = self._chains.get(run.run_id)
        if known is not None:
            return known
        chain: list[RunRecord] = []
        parent_id: str | None = run.parent_run_id
        while parent_id is not None and len(chain) <= MAX_HANDOFF_DEPTH:
            parent = await self.runtime.store.get_run(parent_id)
            if parent is None:
                break
            chain.append(parent)
            parent_id = parent.parent_run_id
        if len(self._chains) >= _CHAINS_KEPT:
            self._chains.clear()  # runs that ended on another process: forgotten, read again if needed
        self._chains[run.run_id] = chain
        return chain

    async def run_call(self, driver: RunDriver, call: PlannedCall, handoff: Handoff) -> bool:
        """Carry out one handoff call; ``True`` when the parent parked waiting for its child."""
        task = call.args.get("task") if isinstance(call.args, dict) else None
        if not isinstance(task, str) or not task.strip() or len(task) > _TASK_CHARS:
            reason = f"{call.name} needs {{'task': <text>}} (at most {_TASK_CHARS} characters)."
            await driver.settle_handoff(call, "failed", error=error_value("invalid_input", reason))
            return False
        if set(call.args or {}) - {"task"}:
            await driver.settle_handoff(
                call, "failed", error=error_value("invalid_input", f"{call.name} takes only 'task'.")
            )
            return False
        refusal = await self.refusal(driver, handoff)
        if refusal is not None:
            await driver.settle_handoff(call, "failed", error=error_value(REFUSED, refusal))
            return False
        child = await self.runtime.store.get_run(child_run_id(call.id, detached=handoff.detached))
        if child is None:
            started = driver.event(
                ToolStartedEvent,
                tool_call_id=call.id,
                tool=call.name,
                kind="read",
                input={"task": task},
                label=handoff.agent,
                running=f"{'Starting' if handoff.detached else 'Asking'} {handoff.agent}",
            )
            await driver.write(Batch(events=[started]))
            child = await self._begin(driver, call, handoff, task)
        if handoff.detached:
            receipt = {
                "detached": True,
                "status": "started",
                "agent": handoff.agent,
                "run_id": child.run_id,
                "note": f"{handoff.agent} works on it in the background; its answer arrives as its own message.",
            }
            await driver.settle_handoff(call, "completed", output=receipt, done=f"Started {handoff.agent}")
            return False
        return await self._await(driver, call, handoff, child)

    async def _begin(self, driver: RunDriver, call: PlannedCall, handoff: Handoff, task: str) -> RunRecord:
        parent, turn = driver.run, driver.run.turn
        sub = self.runtime.agents[handoff.agent]
        child_turn = Turn(
            thread_id=child_thread_id(parent.thread_id, call.id),
            actor=turn.actor,
            text=task,
            ui_capabilities=turn.ui_capabilities,
            page_context=dict(turn.page_context),
            channel=turn.channel,
            agent=sub.name,
        )
        child = RunRecord(
            run_id=child_run_id(call.id, detached=handoff.detached),
            thread_id=child_turn.thread_id,
            agent=sub.name,
            turn=child_turn,
            parent_run_id=parent.run_id,
            parent_thread_id=parent.thread_id,
            parent_call_id=call.id,
            depth=parent.depth + 1,
        )
        # Listed first: the child's approvals count as the parent thread's from their first event.
        await self.children.update(parent.thread_id, child.thread_id, present=True)
        await self.runtime.begin_child(child)
        return child

    async def _await(self, driver: RunDriver, call: PlannedCall, handoff: Handoff, child: RunRecord) -> bool:
        store = self.runtime.store
        if child.status not in ENDED_STATUSES:
            status = await driver.wait_handoff(call, self.runtime.wait(child.run_id))
            if status == "awaiting-approval":
                await driver.park_for_child()
                # The child may have ended while the park was written: its end found the parent
                # still running and could not resume it, so the parent resumes itself.
                current = await store.get_run(child.run_id)
                if current is not None and current.status in ENDED_STATUSES:
                    await self.wake(driver.run.run_id)
                return True
        current = await store.get_run(child.run_id) or child
        if current.status == "completed":
            text = await self.final_text(current)
            await driver.settle_handoff(call, "completed", output=text, done=f"{handoff.agent} answered")
        else:
            await driver.settle_handoff(call, "failed", error=error_value(FAILED, self._why(current)))
        return False

    @staticmethod
    def _why(child: RunRecord) -> str:
        error = child.error or {}
        detail = error.get("message") or ("it was stopped" if child.status == "cancelled" else child.status)
        return f"{child.agent} did not finish ({child.status}): {detail}"

    async def final_text(self, child: RunRecord) -> str:
        """The child's last assistant text (``""`` when it said nothing)."""
        steps = [
            e
            for e in await self.runtime.store.read_journal(child.thread_id, child.run_id)
            if isinstance(e, ModelStepEntry)
        ]
        for entry in sorted(steps, key=lambda e: e.step, reverse=True):
            if entry.text:
                return entry.text
        return ""

    async def note_parked(self, run: RunRecord) -> None:
        """Say that ``run`` parked on a sub-agent: its thread counts as parked (``parked_on_child``)."""
        await self.runtime.store.channel_set(parked_key(run.thread_id), run.run_id, ttl=_PARKED_TTL)

    async def parked_on_child(self, thread_id: str) -> bool:
        """Whether a run of the thread is parked on a sub-agent (which waits for a person).

        The store sees such a thread as free (its run has no approval of its own); a new message
        waits behind it as behind any parked run. One read, only in apps that hand off.
        """
        if not self.enabled:
            return False
        store = self.runtime.store
        run_id = await store.channel_get(parked_key(thread_id))
        if not isinstance(run_id, str):
            return False
        run = await store.get_run(run_id)
        return run is not None and run.thread_id == thread_id and run.status == "awaiting-approval"

    async def awaited_child(self, run_id: str) -> RunRecord | None:
        """The sub-agent run a parked run waits for through an unsettled ``ask_`` call, if any.

        ``None`` for a run that is not parked, or parked on an approval of its own.
        """
        store = self.runtime.store
        run = await store.get_run(run_id)
        if run is None or run.status != "awaiting-approval":
            return None
        agent = self.runtime.agents.get(run.agent)
        journal = await store.read_journal(run.thread_id, run_id)
        settled = {e.tool_call_id for e in journal if isinstance(e, ToolSettledEntry)}
        for entry in journal:
            if not isinstance(entry, ModelStepEntry) or agent is None:
                continue
            for call in entry.calls:
                handoff = handoff_of(agent, call.name)
                if call.id not in settled and handoff is not None and not handoff.detached:
                    return await store.get_run(child_run_id(call.id, detached=False))
        return None

    async def wake(self, run_id: str) -> bool:
        """Claim a parent parked on its child and resume it here; ``False`` when it is not parked (any more).

        A parked parent whose thread is busy (a person's new message began a run there: see the
        README) is claimed again in the background until that run ends.
        """
        run = await self.runtime.leases.claim(run_id, expect=_PARKED)
        if run is not None:
            logger.info("run %s resumes: the sub-agent it waited for ended", run_id)
            self.runtime.resume_claimed(run)
            return True
        current = await self.runtime.store.get_run(run_id)
        if current is not None and current.status == "awaiting-approval":
            self._background(self._wake_later(run_id), f"agora-handoff-wake-{run_id}")
        return False

    async def _wake_later(self, run_id: str) -> None:
        delay = 0.05
        while not self.runtime.closed:
            await asyncio.sleep(delay)  # back-off while the parent's thread is busy, not synchronisation
            delay = min(delay * 2, 2.0)
            try:
                run = await self.runtime.leases.claim(run_id, expect=_PARKED)
                if run is not None:
                    logger.info("run %s resumes: its thread is free and the sub-agent it waited for ended", run_id)
                    self.runtime.resume_claimed(run)
                    return
                current = await self.runtime.store.get_run(run_id)
            except StoreUnavailableError:
                continue
            if current is None or current.status != "awaiting-approval":
                return

    def _background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        if name in self._delivering:
            work.close()
            return
        self._delivering.add(name)
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._delivering.discard(name))

    # -- the end of a run ------------------------------------------------------------------------

    async def ended(self, driver: RunDriver, status: RunStatus) -> None:
        """A run ended (the driver's ``finish`` hook): resume its parent, deliver, cascade a cancel."""
        run = driver.run
        self._chains.pop(run.run_id, None)  # its lines are all written: no more mirroring of it
        try:
            if run.parent_thread_id is not None and status != "awaiting-approval":
                await self.children.update(run.parent_thread_id, run.thread_id, present=False)
            if status == "cancelled":
                await self.cancel_children(driver.handoff_calls(), "The run that asked for it was stopped.")
            if run.parent_run_id is None or status == "awaiting-approval":
                return
            if is_detached(run):
                if status != "cancelled":
                    self.deliver_later(run)
            else:
                await self.wake(run.parent_run_id)
        except StoreUnavailableError:
            logger.warning("run %s: the store is away; its parent resumes on a later sweep", run.run_id)
        except Exception:
            logger.exception("run %s: after its end, its handoff could not be carried on", run.run_id)

    async def cancel_children(self, calls: list[tuple[PlannedCall, Handoff]], reason: str) -> None:
        """Stop the children of these handoff calls that have not ended."""
        for call, handoff in calls:
            child = await self.runtime.store.get_run(child_run_id(call.id, detached=handoff.detached))
            if child is not None and child.status not in ENDED_STATUSES:
                logger.info("stopping sub-agent run %s: %s", child.run_id, reason)
                await self.runtime.stop_run(child, reason)

    # -- detached answers ------------------------------------------------------------------------

    def deliver_later(self, child: RunRecord) -> None:
        """Write the detached child's answer to the parent's thread once it is free (in the background)."""
        self._background(self._deliver(child), f"agora-handoff-answer-{child.run_id}")

    async def _deliver(self, child: RunRecord) -> None:
        store, runtime = self.runtime.store, self.runtime
        run_id = answer_run_id(child)
        claim = _ANSWERING.format(run_id=child.run_id)
        delay = 0.05
        while not runtime.closed:
            try:
                if await store.get_run(run_id) is not None:
                    return  # delivered already (by this process or another)
                # One process begins it: two that both found no answer run would write it twice.
                if await store.channel_claim(claim, ttl=_ANSWER_CLAIM_TTL):
                    try:
                        if await self._begin_answer(child, run_id):
                            return
                    except (ThreadBusyError, ThreadParkedError):
                        await store.channel_delete(claim)  # the thread is busy: try again later
            except StoreUnavailableError:
                logger.warning("the answer of %s waits for the store", child.run_id)
            await asyncio.sleep(delay)  # back-off between looks at a busy thread, not synchronisation
            delay = min(delay * 2, 2.0)

    async def _begin_answer(self, child: RunRecord, run_id: str) -> bool:
        store, runtime = self.runtime.store, self.runtime
        assert child.parent_thread_id is not None
        parent_thread = await store.get_thread(child.parent_thread_id)
        if parent_thread is None:
            return True  # the conversation was erased: nobody to tell
        current = await store.get_run(child.run_id) or child
        if current.status == "completed":
            text = await self.final_text(current) or f"{child.agent} finished and had nothing to add."
        else:
            text = f"{child.agent} could not finish the task: {self._why(current)}"
        answer, record, batch = answer_run(child, run_id, text, parent_thread)
        await runtime.begin_prepared(answer, thread=record, batch=batch)
        return True

    # -- nested narration ------------------------------------------------------------------------

    async def mirror(self, batch: Batch, events: list[RunEvent]) -> None:
        """Write a child's tool narration (and approvals) again to its ancestors' threads.

        Never raises: the narration is a copy, and the child's own write already happened.
        """
        shown = to_mirror(events)
        if not shown:
            return
        run = batch.run
        try:
            if run is None:
                # An approval settled: its batch names no run (``ApprovalFlow.announce``).
                settled = [e for e in shown if isinstance(e, ApprovalSettledEvent)]
                if not settled or not settled[0].run_id.startswith(CHILD_RUN_PREFIXES):
                    return  # not a sub-agent's approval: no read of its run
                run = await self.runtime.store.get_run(settled[0].run_id)
            if run is None or run.parent_run_id is None or run.parent_call_id is None:
                return
            below, parent_call = run, run.parent_call_id
            for ancestor in await self.ancestors(run):
                shown = mirrored(shown, ancestor, parent_call=parent_call, sub_agent=below.agent)
                await self.runtime.write(ancestor.thread_id, Batch(events=shown))
                if ancestor.parent_call_id is None:
                    break
                below, parent_call = ancestor, ancestor.parent_call_id
        except Exception:
            logger.warning("a sub-agent's narration was not shown in its parent's thread", exc_info=True)

    # -- the safety net ------------------------------------------------------------------------------

    async def sweep(self) -> None:
        """Carry on what a stopped process left (every ``SWEEP_EVERY`` seconds, from ``Runtime.sweep``).

        Among the newest ``SWEEP_RUNS`` runs: a parent parked on a child that has ended is resumed;
        a detached child that ended without its answer in the thread gets it delivered.
        """
        now = time.monotonic()
        if not self.enabled or now - self._swept < SWEEP_EVERY:
            return
        self._swept = now
        for run in await self.runtime.store.recent_runs(limit=SWEEP_RUNS):
            if run.status == "awaiting-approval":
                await self._parked_on_ended_child(run)
            elif is_detached(run) and run.status in ("completed", "failed"):
                if await self.runtime.store.get_run(answer_run_id(run)) is None:
                    self.deliver_later(run)

    async def _parked_on_ended_child(self, run: RunRecord) -> None:
        store = self.runtime.store
        agent = self.runtime.agents.get(run.agent)
        if agent is None or not agent.handoffs:
            return
        if any(a.run_id == run.run_id for a in await store.pending_approvals(run.thread_id)):
            return  # parked on an approval of its own
        journal = await store.read_journal(run.thread_id, run.run_id)
        settled = {e.tool_call_id for e in journal if isinstance(e, ToolSettledEntry)}
        for entry in journal:
            if not isinstance(entry, ModelStepEntry):
                continue
            for call in entry.calls:
                handoff = handoff_of(agent, call.name)
                if handoff is None or handoff.detached or call.id in settled:
                    continue
                child = await store.get_run(child_run_id(call.id, detached=False))
                if child is not None and child.status in ENDED_STATUSES:
                    await self.wake(run.run_id)
                    return

    async def aclose(self) -> None:
        """Stop the background work: answers waiting for their thread, parents waiting to be woken."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
