"""Personas at run time: which one a run speaks as, the thread's pin, and what it changes.

Resolution, once per run as it begins (``Runtime``): the send's ``Turn.persona`` -> the persona
the thread pins for that agent -> the agent's ``default_persona`` -> none. The answer (the
persona's id, never an alias) is recorded in ``RunRecord.persona``, so a resume on any process
speaks as the same one.

A send that names a persona pins it: the thread's pins are one JSON value in the store's
channel state, ``agora-persona-pin:{thread_id}`` = ``{agent name: persona id}`` (persona ids are
an agent's own, so a thread that talks to two agents keeps a pin for each). It is written once
the run began (the store checked the thread is the sender's), and erased with the thread
(``Threads`` drops the key before the store erases the thread).

What a persona changes (``RunDriver``): its ``instructions`` replace the agent's, and its
``allowed_tools`` narrow the agent's tool list, a gate like the agent's own allow-list
(``persona_scope``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tools import AgentScope

from ._agents import Agent, Persona, PersonaContext
from ._errors import PersonaNotFoundError
from .stores import RunRecord, Store

__all__ = ["PIN_KEY", "PersonaPins", "PersonaToolScope", "persona_instructions", "persona_of", "persona_scope"]

logger = logging.getLogger("gateway.personas")

PIN_KEY = "agora-persona-pin:{thread_id}"
"""The channel-state key of a thread's pinned personas (``{agent name: persona id}``)."""


@dataclass(frozen=True)
class PersonaToolScope:
    """The agent as the tool registry sees it under a persona: its name, its tools narrowed."""

    name: str
    tools: Literal["*"] | Sequence[str]


_GONE = "removed"
"""The id a run's persona reads as when its agent no longer has it (see ``persona_of``)."""


def persona_scope(agent: Agent, persona: Persona | None) -> AgentScope:
    """What the registry gates by: the agent, its tool list narrowed by ``persona.allowed_tools``.

    Narrowing only removes: a persona cannot offer a tool its agent's list leaves out.
    """
    if persona is None or persona.allowed_tools is None:
        return agent
    allowed = tuple(persona.allowed_tools)
    if agent.tools == "*":
        return PersonaToolScope(name=agent.name, tools=allowed)
    return PersonaToolScope(name=agent.name, tools=tuple(t for t in agent.tools if t in allowed))


def persona_of(agent: Agent, run: RunRecord) -> Persona | None:
    """The persona the run was resolved to as it began (``None`` when none).

    A persona the agent no longer has (the app changed while the run waited for an approval)
    fails closed: the run goes on in the agent's own words with no tools at all, never with more
    tools than the persona allowed.
    """
    if run.persona is None:
        return None
    try:
        return agent.persona(run.persona)
    except PersonaNotFoundError:
        logger.warning(
            "run %s: agent %r has no persona %r any more; it goes on without tools", run.run_id, agent.name, run.persona
        )
        return Persona(id=_GONE, label=_GONE, allowed_tools=())


def persona_instructions(agent: Agent, persona: Persona | None, run: RunRecord) -> str:
    """The instructions the run gives the model: the persona's when it has some, else the agent's.

    Raises:
        Exception: Whatever a persona's instructions function raised.
        TypeError: The function returned something other than a str.
    """
    if persona is None or persona.instructions is None:
        return agent.instructions
    if isinstance(persona.instructions, str):
        return persona.instructions
    context = PersonaContext(
        base_instructions=agent.instructions,
        agent=agent.name,
        persona=persona.id,
        actor=run.turn.actor,
        channel=run.turn.channel,
        thread_id=run.thread_id,
    )
    text = persona.instructions(context)
    if not isinstance(text, str):
        raise TypeError(f"it returned {type(text).__name__}, not str")
    return text


class PersonaPins:
    """The personas threads pin, kept in the store's channel state (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def _read(self, thread_id: str) -> dict[str, Any]:
        value = await self.store.channel_get(PIN_KEY.format(thread_id=thread_id))
        return value if isinstance(value, dict) else {}

    async def get(self, thread_id: str, agent: str) -> str | None:
        """The persona id the thread pins for ``agent``, or ``None``."""
        pinned = (await self._read(thread_id)).get(agent)
        return pinned if isinstance(pinned, str) else None

    async def pin(self, thread_id: str, agent: str, persona: str) -> None:
        """Pin ``persona`` on the thread for ``agent`` (the thread's runs begin one at a time)."""
        pins = await self._read(thread_id)
        if pins.get(agent) == persona:
            return
        pins[agent] = persona
        await self.store.channel_set(PIN_KEY.format(thread_id=thread_id), pins)

    async def resolve(self, agent: Agent, thread_id: str, asked: str | None) -> Persona | None:
        """The persona a run of ``agent`` on the thread speaks as, ``asked`` being the send's.

        A pin (or an ask queued earlier) that names a persona the agent no longer has is passed
        over with a warning: the run goes on with the next in line.
        """
        if not agent.personas:
            return None
        if asked is not None:
            try:
                return agent.persona(asked)
            except PersonaNotFoundError:
                logger.warning("agent %r has no persona %r any more; the thread's pin applies", agent.name, asked)
        pinned = await self.get(thread_id, agent.name)
        if pinned is not None:
            try:
                return agent.persona(pinned)
            except PersonaNotFoundError:
                logger.warning("thread %s pins persona %r, which agent %r no longer has", thread_id, pinned, agent.name)
        return agent.persona(agent.default_persona)
