"""``TurnStarts``: how a runtime begins runs: a person's turn, a direct tool call, a queued message.

A part of ``Runtime`` (``gateway._runtime``), kept apart for its size: the methods are the
runtime's own and read its state. A turn is checked (its agent, its persona), admitted against
the actor's budget, screened by the agent's input guards, then begun in the store with its first
events, or queued behind the thread's active run; a child or prepared run (``gateway._handoffs``)
begins here too.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from tools import Actor, UiCapabilities

from ._agents import Agent
from ._errors import QueuedMessageNotFoundError, StoreUnavailableError, ThreadBusyError, ThreadParkedError
from ._guards import ScreenedTurn, screen_input
from ._json import within_depth
from ._logs import log_scope
from ._queue import Accepted
from ._runtime_parts import RuntimeParts, _State
from ._tracing import begin_context
from ._unicode import valid_text, valid_tree
from .events import MessageDequeuedEvent, QueueMode, RunEvent, RunStartedEvent, Turn, new_id
from .models import AssistantMessage, ToolMessage, UserMessage
from .stores import Batch, Begun, PlannedCall, RunRecord, ThreadRecord

__all__ = ["TurnStarts"]

logger = logging.getLogger("gateway.runtime")


class TurnStarts:
    """The turn-beginning path of ``Runtime``."""

    def _checked(self: RuntimeParts, turn: Turn) -> tuple[Turn, Agent]:
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

    async def send(self: RuntimeParts, turn: Turn, *, mode: QueueMode | None = None) -> Accepted:
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

    async def start_turn(self: RuntimeParts, turn: Turn) -> str:
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
        self: RuntimeParts,
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
        # can send 900 levels), strings made valid (``gateway._driver_model._plan``).
        args = valid_tree(within_depth(dict(arguments)))
        call = PlannedCall(
            id=new_id("tc"),
            name=valid_text(name),
            arguments=json.dumps(args, separators=(",", ":"), ensure_ascii=False),
            args=args,
        )
        with log_scope(thread_id=thread_id, channel=channel, actor=actor.id, run_id=None):
            return await self._begin(turn, chosen, direct_call=call)

    async def _start_turn(self: RuntimeParts, turn: Turn) -> str:
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
        self: RuntimeParts,
        turn: Turn,
        agent: Agent,
        *,
        dequeue: str | None = None,
        direct_call: PlannedCall | None = None,
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

    async def _pin(self: RuntimeParts, thread_id: str, agent: str, persona: str) -> None:
        """Pin the persona a send named (after its run began: the store checked the thread is the sender's)."""
        try:
            await self.persona_pins.pin(thread_id, agent, persona)
        except Exception as exc:  # the run goes on; the next turn without a persona may not find this pin
            logger.warning("could not pin persona %r on thread %s: %s", persona, thread_id, exc)

    async def begin_child(self: RuntimeParts, run: RunRecord) -> None:
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

    async def begin_prepared(self: RuntimeParts, run: RunRecord, *, thread: ThreadRecord, batch: Batch) -> None:
        """Begin a run whose journal ``batch`` already holds, and drive it from there (a handoff's answer)."""
        await self._begin_record(run, thread, batch, 1)
        self._spawn(run, self._agent_of(run), resume=True)

    async def _begin_record(
        self: RuntimeParts, run: RunRecord, thread: ThreadRecord, batch: Batch, history_limit: int | None
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

    async def drain(self: RuntimeParts, thread_id: str) -> str | None:
        """Begin the thread's first queued message if the thread is free; answer its run id.

        ``None`` when the queue is empty or the thread is busy (a run running or parked, or
        another process began the message first): whoever frees the thread drains it again.
        """
        began = await self._drain_head(thread_id)
        return began[1] if began is not None else None

    async def _drain_head(self: RuntimeParts, thread_id: str) -> tuple[str, str] | None:
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

    async def _drain_quietly(self: RuntimeParts, thread_id: str) -> None:
        try:
            await self.drain(thread_id)
        except StoreUnavailableError:
            logger.warning("store unavailable; the queue of thread %s drains on the next sweep", thread_id)
        except Exception:
            logger.exception("draining the queue of thread %s failed", thread_id)
