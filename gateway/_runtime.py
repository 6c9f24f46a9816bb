"""``Runtime``: turns in, governed tools, durable runs and approvals, events out.

Here: the assembly, the lifecycle, spawning and waiting for runs, approvals and stops. The rest of
the class is in its parts (``gateway._runtime_parts`` lists them); ``RuntimeObserver`` lives in
``gateway._observers`` and is importable from here as before.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tools import Actor, RolesPolicy, ToolLike, ToolRegistry, Toolset, UserError

from ._agents import Agent
from ._approvals import ApprovalFlow, ApprovalPolicy
from ._attachments import AttachmentReader
from ._driver import RunDriver
from ._errors import RunNotActiveError, RunNotFoundError, StoreUnavailableError, ThreadForbiddenError, UnknownAgentError
from ._handoffs import Handoffs, check_handoffs
from ._leases import Leases
from ._logs import log_scope
from ._observers import ObserverFanOut, RuntimeObserver
from ._personas import PersonaPins
from ._pricing import ModelPrice
from ._queue import ThreadQueue
from ._quotas import Quota
from ._runtime_parts import _CANCEL_KEY, _State
from ._runtime_reads import ThreadReads
from ._runtime_sweeps import Sweeps
from ._runtime_turns import TurnStarts
from ._threads import Threads
from ._tracing import detached
from ._usage import UsageMeter
from .events import ENDED_STATUSES, RunEvent, RunFinishedEvent, RunStatus
from .models import AssistantMessage, Model, ToolMessage, UserMessage
from .stores import ApprovalRecord, Batch, MemoryStore, RunRecord, Store

__all__ = ["Runtime", "RuntimeObserver"]

logger = logging.getLogger("gateway.runtime")


class Runtime(TurnStarts, ThreadReads, Sweeps, ObserverFanOut):
    """The agent loop with its tools, agents, model, store and approval policy.

    ``send`` begins a turn at once when its thread is free, or queues it behind the thread's
    active run (``gateway._queue``); ``start_turn`` refuses a busy thread instead. A run
    proceeds in the background on this process. Its events are in the store (``events``), so
    any process sharing the store can follow it, decide its approvals (``decide``) or resume it
    after a crash.

    Background work (lease renewal, recovery of runs whose process died, expiry of approvals,
    retention) starts with the first run, or with ``start()``; ``aclose()`` stops it. A
    conversation's owner lists, renames, erases and exports it through ``threads``.
    """

    def __init__(
        self,
        *,
        tools: Iterable[ToolLike | Toolset] = (),
        agents: Sequence[Agent] | None = None,
        model: Model | None = None,
        store: Store | None = None,
        owns_store: bool | None = None,
        approval_policy: ApprovalPolicy | None = None,
        roles_policy: RolesPolicy | None = None,
        registry: ToolRegistry | None = None,
        lease_ttl: float = 15.0,
        maintenance_interval: float | None = None,
        instance_id: str | None = None,
        store_retry: float = 60.0,
        takeover_grace: float | None = None,
        retention_days: float | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
        quota: Quota | None = None,
    ) -> None:
        """Assemble a runtime.

        Args:
            tools: Tools in any authoring form and toolsets (``McpToolset``), added to ``registry``
                when both are given; toolsets connect at ``start()``.
            agents: The agents served; the first is the default (one ``"default"`` agent if none).
            model: The model of agents that declare none.
            store: Where everything durable lives (a new ``MemoryStore`` when omitted).
            owns_store: Whether ``aclose`` closes the store too; by default only a store the
                runtime made (a store you pass stays yours to close).
            approval_policy: Who approves actions and for how long (the requester, 24 h).
            roles_policy: The roles policy of a registry built here.
            registry: A ready ``ToolRegistry``.
            lease_ttl: Seconds a process's claim on a running run lasts without renewal; a run
                whose process died is resumed elsewhere after this long.
            maintenance_interval: Seconds between background passes (``lease_ttl / 3``).
            instance_id: This process's name in leases (host, pid and a random suffix).
            store_retry: Seconds a run holds a step it could not write while the store is away
                (a tool's result, say) and tries again; ``0`` stops the run at once. Past this,
                the run stops and resumes from its journal later, running unsettled calls again.
            takeover_grace: Seconds a lapsed lease must stay lapsed, as this process's sweeps
                see it, before they take the run over (``maintenance_interval``). A process
                alive after a store outage renews (or takes back) its leases first, so a result
                it holds is written and its tool never runs twice. Where the outage you expect is
                a network partition (calls hang until the store's timeout, not refused at once),
                set it above that timeout.
            retention_days: Erase threads nobody wrote to for this many days (fractions allowed)
                in the background passes, never one with a run running or waiting for an
                approval (``AGORA_RETENTION_DAYS`` for a runtime the gateway builds). ``None``
                keeps threads for good.
            pricing: Prices by ``Model.name`` (``gateway._pricing``): each step's and run's
                ``cost_usd``; an unpriced model's is ``None``. None by default.
            quota: The token budgets of agents without their own ``Agent.quota``.

        Raises:
            UserError: An agent has no model and no runtime model is given, or names repeat,
                or a setting is out of range.
        """
        self.registry = registry or ToolRegistry(roles_policy=roles_policy)
        if registry is not None:
            for tool in tools:
                self.registry.register(tool)
        else:
            for tool in tools:
                self.registry.register(tool)
        agent_list = list(agents) if agents else [Agent(name="default")]
        self.agents: dict[str, Agent] = {}
        for agent in agent_list:
            if agent.name in self.agents:
                raise UserError(f"two agents are named {agent.name!r}")
            if agent.model is None and model is None:
                raise UserError(f"agent {agent.name!r} has no model and the runtime has none")
            self.agents[agent.name] = agent
        check_handoffs(self.agents)
        self.default_agent = agent_list[0]
        self.model = model
        self._owns_store = store is None if owns_store is None else owns_store
        self.store: Store = store if store is not None else MemoryStore()
        policy = approval_policy or ApprovalPolicy()
        if lease_ttl <= 0:
            raise UserError("lease_ttl must be positive")
        self.lease_ttl = float(lease_ttl)
        self.maintenance_interval = maintenance_interval or self.lease_ttl / 3
        if store_retry < 0:
            raise UserError("store_retry must not be negative")
        self.store_retry = float(store_retry)
        self.instance_id = instance_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.leases = Leases(
            store=self.store,
            owner=self.instance_id,
            ttl=self.lease_ttl,
            grace=self.maintenance_interval if takeover_grace is None else float(takeover_grace),
        )
        """The lease rules (``gateway._leases``): renew, hold, take over."""
        self.approvals = ApprovalFlow(
            store=self.store,
            policy=policy,
            leases=self.leases,
            write=self.write,
            resume=self._resume_claimed,
            end=self._end_claimed,
        )
        """The approval flow (``gateway._approvals``): request, decide, expire, supersede, resume."""
        if retention_days is not None and not retention_days > 0:
            raise UserError("retention_days must be positive (None keeps threads for good)")
        self.threads = Threads(
            store=self.store,
            runs=self,
            retention_days=retention_days,
            handoffs=any(agent.handoffs for agent in self.agents.values()),
        )
        """Threads as data their owner controls (``gateway._threads``): list, rename, erase, export, retention."""
        self.persona_pins = PersonaPins(self.store)
        """The personas threads pin (``gateway._personas``); ``Threads`` erases them with their thread."""
        self.queue = ThreadQueue(store=self.store, write=self.write, drain=self.drain, stop=self._stop_active)
        """Threads' message queues as their owners manage them (``gateway._queue``)."""
        self.handoffs = Handoffs(self)
        """Handoffs between agents (``gateway._handoffs``): child runs, nested narration, answers."""
        self.observers: list[RuntimeObserver] = []
        self.usage = UsageMeter(
            store=self.store,
            pricing=pricing,
            quota=quota,
            retry=self.store_retry,
            observers=self.observers,
            closed=lambda: self.closed,
        )
        """Pricing, the usage ledger and quotas (``gateway._usage``)."""
        self.attachment_reader: AttachmentReader | None = None
        """Reads the bytes of a turn's attachments for tools and models (``create_app`` sets the app's)."""
        self._drivers: dict[str, RunDriver] = {}
        self._tasks: dict[str, asyncio.Task[RunStatus]] = {}
        self._maintenance: asyncio.Task[None] | None = None
        self._state = _State.OPEN

    @property
    def approval_policy(self) -> ApprovalPolicy:
        """Who approves each action tool and for how long (the approval flow's policy)."""
        return self.approvals.policy

    @approval_policy.setter
    def approval_policy(self, policy: ApprovalPolicy) -> None:
        self.approvals.policy = policy

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the registry's toolsets (``McpToolset``) and background work.

        Background work otherwise starts with the first run; toolsets start only here. A
        toolset whose server is down does not fail the start: its tools join once it connects.
        """
        self._ensure_open()
        await self.registry.start()
        if self._maintenance is None:
            self._maintenance = asyncio.create_task(self._maintain(), name="agora-maintenance")

    async def aclose(self) -> None:
        """Stop background work, the runs driven here (their leases lapse; others resume them) and the toolsets."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        tasks: list[asyncio.Task[Any]] = [*self._tasks.values()]
        if self._maintenance is not None:
            tasks.append(self._maintenance)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.handoffs.aclose()
        await self.registry.aclose()
        if self._owns_store:
            await self.store.aclose()

    @property
    def closed(self) -> bool:
        """``aclose`` was called."""
        return self._state is _State.CLOSED

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _ensure_open(self) -> None:
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot use a closed Runtime")

    async def write(self, thread_id: str, batch: Batch) -> list[RunEvent]:
        """Write a batch to the store and tell observers about its events."""
        events = await self.store.write(thread_id, batch)
        if events:
            for observer in self.observers:
                observer.events_written(thread_id, events)
            if batch.run is None or batch.run.parent_run_id is not None:
                await self.handoffs.mirror(batch, events)  # a sub-agent's lines, shown to its parent too
        return events

    # -- turns and runs -----------------------------------------------------------------------------

    def agent(self, name: str | None) -> Agent:
        """The agent of that name (the default for ``None``).

        Raises:
            UnknownAgentError: No such agent.
        """
        if name is None:
            return self.default_agent
        agent = self.agents.get(name)
        if agent is None:
            raise UnknownAgentError(f"No agent named {name!r}")
        return agent

    def agent_for(self, name: str | None, actor: Actor) -> Agent:
        """The agent of that name (the default for ``None``), when ``actor`` may use it.

        An agent whose ``roles`` the actor lacks reads as unknown: a caller learns nothing of
        agents it may not use.

        Raises:
            UnknownAgentError: No such agent, or not one ``actor`` may use.
        """
        agent = self.agent(name)
        if not agent.usable_by(actor):
            raise UnknownAgentError(f"No agent named {agent.name!r}")
        return agent

    def usable_agents(self, actor: Actor) -> list[Agent]:
        """The agents ``actor`` may use, the default first when it is one of them."""
        return [agent for agent in self.agents.values() if agent.usable_by(actor)]

    async def _stop_active(self, thread_id: str, *, end_parked: bool = True) -> bool:
        """Stop the thread's running run at its next safe point, or end its parked run now (``end_parked``)."""
        run_id = await self.queue.active_run(thread_id)
        if not run_id:
            return False
        run = await self.store.get_run(run_id)
        if run is None or run.status in ENDED_STATUSES:
            return False
        if run.status == "awaiting-approval":
            if not end_parked:
                return False
            await self.approvals.end_parked(run_id, "The person sent a new message instead.", via="cancelled")
            return True
        driver = self._drivers.get(run_id)
        if driver is not None:
            driver.request_cancel()
        else:
            await self.store.channel_set(_CANCEL_KEY.format(run_id=run_id), True, ttl=3600)
        return True

    def _spawn(
        self,
        run: RunRecord,
        agent: Agent,
        *,
        resume: bool,
        history: list[UserMessage | AssistantMessage | ToolMessage] | None = None,
    ) -> None:
        driver = RunDriver(self, run, agent, history=history)
        self._drivers[run.run_id] = driver

        async def drive_then_drain() -> RunStatus:
            status = await driver.drive(resume=resume)
            with detached():  # the next run is not in the trace this run was begun in
                await self._drain_quietly(run.thread_id)  # the next queued message, now the thread is free
            return status

        task = asyncio.create_task(drive_then_drain(), name=f"agora-run-{run.run_id}")
        self._tasks[run.run_id] = task

        def forget(done: asyncio.Task[RunStatus]) -> None:
            if self._tasks.get(run.run_id) is done:
                del self._tasks[run.run_id]
                self._drivers.pop(run.run_id, None)
            if not done.cancelled() and done.exception() is not None:
                logger.warning("run %s stopped: %r; it resumes when its lease lapses", run.run_id, done.exception())

        task.add_done_callback(forget)
        for observer in self.observers:
            observer.run_started(run)
        if self._maintenance is None and self._state is _State.OPEN:
            self._maintenance = asyncio.create_task(self._maintain(), name="agora-maintenance")

    async def wait(self, run_id: str, timeout: float | None = None) -> RunStatus:
        """Wait until the run is not running any more, and return how it stopped.

        The answer is ``completed``, ``awaiting-approval``, ``cancelled`` or ``failed``. A run
        parked on a sub-agent (``ask_``) is still working while that sub-agent works: the wait
        goes on until the sub-agent waits for a person too, or the run goes on and stops.

        Raises:
            RunNotFoundError: No such run.
            TimeoutError: ``timeout`` seconds passed first.
        """
        async with asyncio.timeout(timeout):
            parked_too = False
            while True:
                status = await self._wait_once(run_id, parked_too=parked_too)
                if status != "awaiting-approval" or not self.handoffs.enabled:
                    return status
                child = await self.handoffs.awaited_child(run_id)
                if child is None or child.status == "awaiting-approval":
                    return status  # it waits for a person
                if child.status == "running":
                    await self.wait(child.run_id)
                    parked_too = False
                else:  # the child ended: the run resumes (here or elsewhere) and stops again
                    parked_too = True

    async def _wait_once(self, run_id: str, *, parked_too: bool) -> RunStatus:
        """``wait`` for one stop; with ``parked_too`` a parked run's next stop, not its parking."""
        task = self._tasks.get(run_id)
        if task is not None:
            try:
                return await asyncio.shield(task)
            except StoreUnavailableError:
                pass
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise  # the waiter itself is being cancelled
                # The local driver stopped (lease lost, shutting down): ask the store.
        run = await self.store.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"No run {run_id!r}")
        after = await self.store.last_seq(run.thread_id)
        run = await self.store.get_run(run_id)
        if run is not None and run.status != "running" and not (parked_too and run.status == "awaiting-approval"):
            return run.status
        async for event in self.store.subscribe(run.thread_id if run else "", after):
            if isinstance(event, RunFinishedEvent) and event.run_id == run_id:
                return event.status
        raise RunNotFoundError(f"No run {run_id!r}")  # pragma: no cover - the subscription never ends

    # -- approvals ----------------------------------------------------------------------------------

    async def decide(
        self,
        tool_call_id: str,
        actor: Actor,
        approve: bool = True,
        reason: str | None = None,
        via: str = "api",
        *,
        remember: bool = False,
    ) -> ApprovalRecord:
        """Decide a pending approval as ``actor`` and resume its run (on this process).

        The flow's rules are in ``gateway._approvals``.

        Raises:
            ApprovalNotFoundError: No approval with that id (404).
            ApprovalForbiddenError: ``actor`` may not decide it (403).
            ApprovalSettledError: It was already decided (409).
            ApprovalExpiredError: It lapsed; the run is told it expired (410).
            ThreadBusyError: Its run is being driven right now (409; a retry gets the answer).
        """
        self._ensure_open()
        with log_scope(actor=actor.id):
            return await self.approvals.decide(
                tool_call_id, actor, approve=approve, reason=reason, via=via, remember=remember
            )

    async def pending_approvals(self, thread_id: str) -> list[ApprovalRecord]:
        """The thread's pending approvals, then those of the sub-agents a parked run of it waits for.

        A sub-agent's approval lives on its own thread (``gateway._handoffs``); it is listed here
        too, so the person of the thread sees and decides it where they talk.
        """
        own = await self.store.pending_approvals(thread_id)
        if not self.handoffs.enabled:
            return own
        return [*own, *await self.handoffs.children.pending_below(thread_id)]

    def _agent_of(self, run: RunRecord) -> Agent:
        agent = self.agents.get(run.agent)
        if agent is None:
            logger.error("run %s names agent %r, which this process does not serve", run.run_id, run.agent)
            return self.default_agent
        return agent

    def _resume_claimed(self, run: RunRecord) -> None:
        """Drive a run this process just claimed, from its journal."""
        self._spawn(run, self._agent_of(run), resume=True)

    def resume_claimed(self, run: RunRecord) -> None:
        """Drive a run this process just claimed, from its journal (a parent its child's end woke)."""
        self._resume_claimed(run)

    async def _end_claimed(self, run: RunRecord, reason: str) -> RunStatus:
        """End a claimed parked run: its unsettled calls denied with ``reason``."""
        status = await RunDriver(self, run, self._agent_of(run)).supersede(reason)
        await self._drain_quietly(run.thread_id)
        return status

    # -- cancellation -------------------------------------------------------------------------------

    async def cancel(self, run_id: str, actor: Actor) -> None:
        """Stop a run.

        A running run stops at its next safe point (a tool in flight is cancelled); a parked
        one ends at once (its pending actions are rejected).

        Raises:
            RunNotFoundError: No such run.
            ThreadForbiddenError: Someone else's run.
            RunNotActiveError: The run already ended.
        """
        run = await self.get_run(run_id)
        thread = await self.store.get_thread(run.thread_id)
        if thread is None or not thread.owned_by(actor):  # only the owner stops a run
            raise ThreadForbiddenError(f"Run {run_id!r} belongs to another actor")
        if run.status in ENDED_STATUSES:
            raise RunNotActiveError(f"The run already ended ({run.status})")
        await self.stop_run(run, "The person stopped the run.")

    async def stop_run(self, run: RunRecord, reason: str) -> None:
        """Stop a run that has not ended, whoever drives it (no access check: ``cancel`` checks)."""
        if run.status == "awaiting-approval":
            await self.approvals.end_parked(run.run_id, reason, via="cancelled")
            return
        driver = self._drivers.get(run.run_id)
        if driver is not None:
            driver.request_cancel()
        else:
            # Driven by another process: it sees the flag on its next maintenance pass.
            await self.store.channel_set(_CANCEL_KEY.format(run_id=run.run_id), True, ttl=3600)
