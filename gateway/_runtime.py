"""``Runtime``: turns in, governed tools, durable runs and approvals, events out."""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from tools import Actor, RolesPolicy, ToolLike, ToolRegistry, Toolset, UiCapabilities, UserError

from ._agents import Agent
from ._approvals import ApprovalFlow, ApprovalPolicy
from ._attachments import AttachmentReader
from ._driver import RunDriver
from ._errors import (
    QueuedMessageNotFoundError,
    RunNotActiveError,
    RunNotFoundError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    ThreadParkedError,
    UnknownAgentError,
)
from ._guards import GuardDirection, GuardOutcome, ScreenedTurn, VerdictKind, screen_input
from ._handoffs import Handoffs, check_handoffs
from ._json import within_depth
from ._leases import Leases
from ._logs import log_scope
from ._personas import PersonaPins
from ._pricing import ModelPrice
from ._queue import Accepted, ThreadQueue
from ._quotas import Quota
from ._threads import Threads
from ._tracing import begin_context, detached
from ._unicode import valid_text, valid_tree
from ._usage import UsageMeter
from .events import (
    ENDED_STATUSES,
    MessageDequeuedEvent,
    QueueMode,
    RunEvent,
    RunFinishedEvent,
    RunStartedEvent,
    RunStatus,
    ToolOutcome,
    Turn,
    new_id,
)
from .models import AssistantMessage, Model, ToolMessage, UserMessage
from .stores import (
    ApprovalRecord,
    Batch,
    Begun,
    MemoryStore,
    ModelStepEntry,
    PlannedCall,
    RunRecord,
    Store,
    ThreadRecord,
)

__all__ = ["Runtime", "RuntimeObserver"]

logger = logging.getLogger("gateway.runtime")


_CANCEL_KEY = "agora-run-cancel:{run_id}"


class RuntimeObserver:
    """Receives what the runtime does, for metrics and logs. Override what you need."""

    def run_started(self, run: RunRecord) -> None:
        """A run started or resumed on this process."""

    def run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """A run ended or parked on this process after ``seconds`` of driving."""

    def tool_settled(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """A tool call settled (``completed``, ``failed``, ``denied`` or ``cancelled``)."""

    def model_step(self, run: RunRecord, seconds: float) -> None:
        """A model step finished."""

    def guard_verdict(self, run: RunRecord, direction: GuardDirection, guard: str, verdict: VerdictKind) -> None:
        """An input or output guard answered (``allow``, ``refuse``, ``rewrite`` or ``flag``)."""

    def usage_charged(self, run: RunRecord, step: ModelStepEntry) -> None:
        """A model step of ``run`` was charged to its actor's ledger (``step.usage``, ``step.cost_usd``)."""

    def quota_crossed(self, agent: str, period: str, outcome: str) -> None:
        """An actor of ``agent`` neared (``warning``) or used up (``exceeded``) a budget."""

    def events_written(self, thread_id: str, events: list[RunEvent]) -> None:
        """Events were written to the thread's log by this process (with their ``seq``).

        Called on the process that drives the run (or decides its approval), once per write:
        a channel that pushes to its clients (WhatsApp) delivers from here. Must not block:
        schedule the work.
        """


class _State(enum.Enum):
    OPEN = "open"
    CLOSED = "closed"


class Runtime:
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

    # -- observers ----------------------------------------------------------------------------------

    def observe_run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """Tell observers a run ended or parked."""
        for observer in self.observers:
            observer.run_finished(run, status, seconds)

    def observe_tool(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """Tell observers a tool call settled."""
        for observer in self.observers:
            observer.tool_settled(run, tool, status, seconds)

    def observe_model_step(self, run: RunRecord, seconds: float) -> None:
        """Tell observers a model step finished."""
        for observer in self.observers:
            observer.model_step(run, seconds)

    def observe_guards(self, run: RunRecord, direction: GuardDirection, outcome: GuardOutcome | None) -> None:
        """Tell observers what each guard of one text answered."""
        for guard, verdict in outcome.verdicts if outcome is not None else ():
            for observer in self.observers:
                observer.guard_verdict(run, direction, guard, verdict)

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

    def _checked(self, turn: Turn) -> tuple[Turn, Agent]:
        """The turn's agent (one its actor may use) and the turn with its persona's id (not an alias).

        Raises:
            UnknownAgentError: The agent is unknown, or not the actor's to use.
            PersonaNotFoundError: The agent has no such persona.
        """
        agent = self.agent_for(turn.agent, turn.actor)
        persona = agent.persona(turn.persona)
        if persona is not None and persona.id != turn.persona:
            turn = turn.model_copy(update={"persona": persona.id})
        return turn, agent

    async def send(self, turn: Turn, *, mode: QueueMode | None = None) -> Accepted:
        """Begin ``turn`` now if its thread is free, or queue it behind the thread's active run.

        ``mode`` (the agent's ``queue_mode`` when ``None``) says what a busy thread does:
        ``queue`` puts the message last in the thread's queue; ``interrupt`` puts it first and
        stops the active run at its next safe point, then it runs (a parked run ends as a cancel
        ends it only when this send asks for ``interrupt``: the agent's default never settles an
        approval by itself); ``reject`` raises ``ThreadBusyError``. A run parked for an approval is
        busy too under ``ApprovalPolicy.on_new_message="queue"`` (the approval stays pending
        and the message runs after the decision); under ``"supersede"`` the parked run is
        superseded and the message begins at once. A queued message keeps its whole turn
        (channel, actor, UI capabilities, attachments).

        Raises:
            UnknownAgentError: ``turn.agent`` names no agent its actor may use.
            PersonaNotFoundError: ``turn.persona`` names no persona of the agent (nothing is written).
            ThreadForbiddenError: The thread belongs to another actor.
            ThreadBusyError: ``reject`` and the thread has an active run or a queue.
            ThreadParkedError: ``reject`` and a run waits for an approval (policy ``queue``).
            QueueFullError: The thread's queue holds ``Agent.queue_limit`` messages already.
            QuotaExceededError: The actor used a token budget of the agent's quota (nothing is written).
        """
        self._ensure_open()
        with log_scope(thread_id=turn.thread_id, channel=turn.channel, actor=turn.actor.id, run_id=None):
            turn, agent = self._checked(turn)
            await self.usage.admit(turn.actor, agent)  # not even queued past its budget
            chosen, mode = mode, mode or agent.queue_mode
            if mode == "reject":
                return Accepted(run_id=await self._start_turn(turn))
            try:
                return Accepted(run_id=await self._start_turn(turn))
            except (ThreadBusyError, ThreadParkedError):
                pass  # the owner's (the store checked): it waits its turn
            item, position = await self.queue.put(turn, limit=agent.queue_limit, first=mode == "interrupt")
            # A parked run ends only for an interrupt this send asked for: the agent's default
            # mode never settles an approval by itself (``on_new_message``).
            end_parked = chosen == "interrupt" or self.approval_policy.on_new_message == "supersede"
            interrupting = mode == "interrupt" and await self._stop_active(turn.thread_id, end_parked=end_parked)
            began = await self._drain_head(turn.thread_id)  # the run may have ended meanwhile
            if began is not None and began[0] == item.message_id:
                return Accepted(run_id=began[1])  # it left the queue at once: answered as begun
            return Accepted(queued=item, position=position, interrupting=interrupting)

    async def start_turn(self, turn: Turn) -> str:
        """Start a run for ``turn`` and return its id; the run proceeds in the background.

        A busy thread is refused (``send`` queues instead). A run parked on the thread for an
        approval follows ``ApprovalPolicy.on_new_message``: ``supersede`` rejects its pending
        actions (the model is told the person moved on), ends it ``cancelled`` and begins the
        new run; ``queue`` (the default) refuses with ``ThreadParkedError``, since a new message
        never settles an approval by itself.

        Raises:
            UnknownAgentError: ``turn.agent`` names no agent its actor may use.
            PersonaNotFoundError: ``turn.persona`` names no persona of the agent (nothing is written).
            ThreadForbiddenError: The thread belongs to another actor.
            ThreadBusyError: A run is already running on the thread, or messages wait in its queue.
            ThreadParkedError: A run waits for an approval (policy ``queue``).
            QuotaExceededError: The actor used a token budget of the agent's quota.
        """
        self._ensure_open()
        with log_scope(thread_id=turn.thread_id, channel=turn.channel, actor=turn.actor.id, run_id=None):
            await self.usage.admit(turn.actor, self._checked(turn)[1])
            return await self._start_turn(turn)

    async def call_tool(
        self,
        actor: Actor,
        name: str,
        arguments: dict[str, Any],
        *,
        thread_id: str,
        channel: str = "mcp",
        agent: str | None = None,
        ui_capabilities: UiCapabilities | None = None,
    ) -> str:
        """Start a run that makes one tool call and no model step; return the run's id.

        The call is the run's step 0 (journaled as a model step without text), and it goes
        through everything a model's call goes through: the gates with ``agent``, validation,
        timeouts, narration, ``ui`` events, an action parked for approval. The run ends once
        the call settles; its events are the thread's, as any run's (``subscribe``). A busy or
        parked thread is refused as ``start_turn`` refuses it (MCP gives each call a thread).

        Raises:
            UnknownAgentError: ``agent`` names no agent ``actor`` may use.
            ThreadForbiddenError: The thread belongs to another actor.
            ThreadBusyError: A run is already running on the thread.
            ThreadParkedError: A run waits for an approval on the thread.
        """
        self._ensure_open()
        chosen = self.agent_for(agent, actor)
        turn = Turn(
            thread_id=thread_id,
            actor=actor,
            text="",
            ui_capabilities=ui_capabilities,
            channel=channel,
            agent=chosen.name,
        )
        # Journaled as a model's call is: nesting bounded (first: valid_tree recurses, and a client
        # can send 900 levels), strings made valid (``RunDriver._plan``).
        args = valid_tree(within_depth(dict(arguments)))
        call = PlannedCall(
            id=new_id("tc"),
            name=valid_text(name),
            arguments=json.dumps(args, separators=(",", ":"), ensure_ascii=False),
            args=args,
        )
        with log_scope(thread_id=thread_id, channel=channel, actor=actor.id, run_id=None):
            return await self._begin(turn, chosen, direct_call=call)

    async def _start_turn(self, turn: Turn) -> str:
        turn, agent = self._checked(turn)
        for _ in range(3):
            try:
                return await self._begin(turn, agent)
            except ThreadParkedError:
                if self.approval_policy.on_new_message != "supersede":
                    raise
                # The owner (the store checked) moved on while a run waited for an approval.
                await self.approvals.supersede_parked(turn.thread_id)
        raise ThreadBusyError(f"Thread {turn.thread_id!r} keeps waiting for an approval")

    async def _begin(
        self, turn: Turn, agent: Agent, *, dequeue: str | None = None, direct_call: PlannedCall | None = None
    ) -> str:
        if direct_call is None and self.approval_policy.on_new_message == "queue":
            if await self.handoffs.parked_on_child(turn.thread_id):
                raise ThreadParkedError(f"A run on thread {turn.thread_id!r} waits for a sub-agent's approval")
        # The persona, resolved once for the whole run (a resume reads it from the record). A
        # direct call speaks to no one: the agent's tools as its caller listed them, no persona.
        persona = None if direct_call else await self.persona_pins.resolve(agent, turn.thread_id, turn.persona)
        persona_id = persona.id if persona is not None else None
        run_id = new_id("run")
        # The person's message as its agent's input guards leave it (``gateway._guards``).
        screened = await screen_input(agent, turn, run_id) if direct_call is None else ScreenedTurn(turn=turn)
        turn = screened.turn
        run = RunRecord(
            run_id=run_id,
            thread_id=turn.thread_id,
            agent=agent.name,
            turn=turn,
            persona=persona_id,
            direct_call=direct_call,
            input_refusal=screened.refusal,
        )
        run.trace_context = begin_context(run)
        started = RunStartedEvent(thread_id=turn.thread_id, run_id=run.run_id, agent=agent.name, persona=persona_id)
        events: list[RunEvent] = [started, *screened.events]
        if dequeue is not None:
            dequeued = MessageDequeuedEvent(
                thread_id=turn.thread_id, run_id=run.run_id, message_id=dequeue, reason="started"
            )
            events.insert(0, dequeued)
        # A direct call has no person's message: its call and result are the thread's history.
        # A refused message is not kept either: no later turn's model reads it.
        said: list[UserMessage | AssistantMessage | ToolMessage] = []
        if direct_call is None and screened.refusal is None:
            said.append(UserMessage(content=turn.text, attachments=list(turn.attachments)))
        batch = Batch(events=events, messages=said)
        record = ThreadRecord(
            thread_id=turn.thread_id, owner_id=turn.actor.id, tenant_ref=turn.actor.tenant_ref, channel=turn.channel
        )
        # ``dequeue`` only when draining: a plain turn's call is the first wave's.
        queued: dict[str, str] = {"dequeue": dequeue} if dequeue is not None else {}
        begun = await self.store.begin_run(
            run,
            thread=record,
            batch=batch,
            lease_owner=self.instance_id,
            lease_ttl=self.lease_ttl,
            history_limit=agent.history_limit,
            **queued,
        )
        run.first_seq = begun.events[0].seq if begun.events else 0
        for observer in self.observers:
            observer.events_written(turn.thread_id, begun.events)
        self.observe_guards(run, "input", screened.outcome)
        self._spawn(run, agent, resume=False, history=begun.history)
        if turn.persona is not None and persona_id == turn.persona:
            await self._pin(turn.thread_id, agent.name, persona_id)
        return run.run_id

    async def _pin(self, thread_id: str, agent: str, persona: str) -> None:
        """Pin the persona a send named (after its run began: the store checked the thread is the sender's)."""
        try:
            await self.persona_pins.pin(thread_id, agent, persona)
        except Exception as exc:  # the run goes on; the next turn without a persona may not find this pin
            logger.warning("could not pin persona %r on thread %s: %s", persona, thread_id, exc)

    async def begin_child(self, run: RunRecord) -> None:
        """Begin a handoff's child run on its own thread and drive it here (``gateway._handoffs``)."""
        agent, turn = self.agents[run.agent], run.turn
        default = agent.persona(agent.default_persona)  # a sub-agent speaks as its default persona
        run.persona = default.id if default is not None else None
        started = RunStartedEvent(thread_id=turn.thread_id, run_id=run.run_id, agent=agent.name, persona=run.persona)
        batch = Batch(
            events=[started],
            messages=[UserMessage(content=turn.text)],
        )
        record = ThreadRecord(
            thread_id=turn.thread_id, owner_id=turn.actor.id, tenant_ref=turn.actor.tenant_ref, channel=turn.channel
        )
        begun = await self._begin_record(run, record, batch, agent.history_limit)
        self._spawn(run, agent, resume=False, history=begun.history)

    async def begin_prepared(self, run: RunRecord, *, thread: ThreadRecord, batch: Batch) -> None:
        """Begin a run whose journal ``batch`` already holds, and drive it from there (a handoff's answer)."""
        await self._begin_record(run, thread, batch, 1)
        self._spawn(run, self._agent_of(run), resume=True)

    async def _begin_record(
        self, run: RunRecord, thread: ThreadRecord, batch: Batch, history_limit: int | None
    ) -> Begun:
        run.trace_context = begin_context(run)
        begun = await self.store.begin_run(
            run,
            thread=thread,
            batch=batch,
            lease_owner=self.instance_id,
            lease_ttl=self.lease_ttl,
            history_limit=history_limit,
        )
        run.first_seq = begun.events[0].seq if begun.events else 0
        for observer in self.observers:
            observer.events_written(thread.thread_id, begun.events)
        return begun

    async def drain(self, thread_id: str) -> str | None:
        """Begin the thread's first queued message if the thread is free; answer its run id.

        ``None`` when the queue is empty or the thread is busy (a run running or parked, or
        another process began the message first): whoever frees the thread drains it again.
        """
        began = await self._drain_head(thread_id)
        return began[1] if began is not None else None

    async def _drain_head(self, thread_id: str) -> tuple[str, str] | None:
        """``drain``, answering which queued message began: ``(message_id, run_id)``."""
        if self._state is _State.CLOSED:
            return None
        queue = await self.store.queued_messages(thread_id)
        if not queue:
            return None
        head = queue[0]
        agent = self.agents.get(head.turn.agent, self.default_agent) if head.turn.agent else self.default_agent
        with log_scope(thread_id=thread_id, channel=head.turn.channel, actor=head.turn.actor.id, run_id=None):
            try:
                run_id = await self._begin(head.turn, agent, dequeue=head.message_id)
            except (ThreadBusyError, ThreadParkedError, QueuedMessageNotFoundError):
                return None
            logger.info("queued message %s began as run %s", head.message_id, run_id)
            return head.message_id, run_id

    async def _drain_quietly(self, thread_id: str) -> None:
        try:
            await self.drain(thread_id)
        except StoreUnavailableError:
            logger.warning("store unavailable; the queue of thread %s drains on the next sweep", thread_id)
        except Exception:
            logger.exception("draining the queue of thread %s failed", thread_id)

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

    async def events(self, thread_id: str, after_seq: int = 0, follow: bool = False) -> AsyncIterator[RunEvent]:
        """The thread's events after ``after_seq``; with ``follow`` keep yielding live ones."""
        if follow:
            async for event in self.store.subscribe(thread_id, after_seq):
                yield event
            return
        while True:
            page = await self.store.read_events(thread_id, after_seq, limit=500)
            for event in page:
                yield event
            if len(page) < 500:
                return
            after_seq = page[-1].seq

    async def read_events(self, thread_id: str, after_seq: int = 0, limit: int | None = None) -> list[RunEvent]:
        """The thread's events with ``seq > after_seq``, in order (at most ``limit``)."""
        return await self.store.read_events(thread_id, after_seq, limit=limit)

    async def last_seq(self, thread_id: str) -> int:
        """The newest ``seq`` of the thread (0 when it has none)."""
        return await self.store.last_seq(thread_id)

    def subscribe(self, thread_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """The thread's events after ``after_seq``, then its live ones as they are written."""
        return self.store.subscribe(thread_id, after_seq)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread record, or ``None`` (no access check: see ``check_thread_access``)."""
        return await self.store.get_thread(thread_id)

    async def ensure_thread(self, thread: ThreadRecord) -> ThreadRecord:
        """Reserve ``thread`` unless one of its id exists; the stored one is answered."""
        return await self.store.ensure_thread(thread)

    async def thread_runs(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, oldest first."""
        return await self.store.thread_runs(thread_id)

    async def get_approval(self, tool_call_id: str) -> ApprovalRecord | None:
        """The approval record, or ``None``."""
        return await self.store.get_approval(tool_call_id)

    async def get_run(self, run_id: str) -> RunRecord:
        """The run record.

        Raises:
            RunNotFoundError: No such run.
        """
        run = await self.store.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"No run {run_id!r}")
        return run

    async def check_thread_access(self, thread_id: str, actor: Actor) -> ThreadRecord:
        """The thread, when ``actor`` may read it.

        Its owner may (same id, same tenant); so may a member of a role that must decide one of
        the thread's pending approvals, in the requester's tenant, for as long as it is pending.

        Raises:
            ThreadNotFoundError: No such thread.
            ThreadForbiddenError: Someone else's thread.
        """
        thread = await self.store.get_thread(thread_id)
        if thread is None:
            raise ThreadNotFoundError(f"No thread {thread_id!r}")
        if thread.owned_by(actor):
            return thread
        if not self.approval_policy.approver_roles().isdisjoint(actor.roles):
            for approval in await self.store.pending_approvals(thread_id):
                if self.approval_policy.can_decide(actor, approval):
                    return thread
        raise ThreadForbiddenError(f"Thread {thread_id!r} belongs to another actor")

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

    # -- background work ----------------------------------------------------------------------------

    async def _maintain(self) -> None:
        delay = self.maintenance_interval
        while True:
            await asyncio.sleep(delay)
            delay = self.maintenance_interval
            try:
                await self.sweep()
            except StoreUnavailableError:
                # Soon again: once the store is back, the leases held here must be renewed
                # before another process's takeover grace runs out.
                delay = min(self.maintenance_interval, self.leases.retry_delay(1.0))
                logger.warning("store unavailable; maintenance retries in %.2f s", delay)
            except Exception:
                logger.exception("maintenance pass failed")

    async def sweep(self) -> None:
        """Run one background pass.

        It renews leases, honours remote Stops, resumes runs whose process died, expires
        lapsed approvals, begins queued messages left behind an idle thread and, with
        ``retention_days``, erases idle threads (at most once a minute). Runs every
        ``maintenance_interval``; tests may call it directly.
        """
        try:
            await self._sweep()
        except BaseException:
            self.leases.forget()  # a lapse seen before a failure gets the whole grace again
            raise

    async def _sweep(self) -> None:
        drivers = list(self._drivers.items())
        # One round trip for all: the store batches concurrent calls (a lease renewed late is a
        # run another process may take over).
        held = await asyncio.gather(*(self.leases.renew(driver.run) for _, driver in drivers))
        flags = await asyncio.gather(
            *(self.store.channel_get(_CANCEL_KEY.format(run_id=run_id)) for run_id, _ in drivers)
        )
        for (run_id, driver), still_held, cancel_flag in zip(drivers, held, flags, strict=True):
            task = self._tasks.get(run_id)
            if not still_held and task is not None and driver.run.status == "running":
                if await self.leases.reclaim(driver.run):
                    logger.info("took back the lease of run %s, which lapsed while the store was away", run_id)
                else:
                    logger.warning("lost the lease of run %s; stopping here", run_id)
                    task.cancel()
                    continue
            if cancel_flag and not driver.cancel_requested:
                driver.request_cancel()
        for run_id in await self.leases.due(set(self._tasks)):
            run = await self.leases.claim(run_id, expect=frozenset({"running"}))
            if run is not None:
                self._resume_claimed(run)
                logger.info("resumed run %s whose process stopped", run_id)
        await self.approvals.expire_lapsed()
        await self.handoffs.sweep()  # parents whose child ended, answers not delivered, left by a stopped process
        # A process stopped between a run's end and its drain leaves a queue behind an idle thread.
        for thread_id in await self.store.queued_threads():
            await self.drain(thread_id)
        await self.threads.sweep()
