"""``Agent``, ``Handoff`` and ``Persona``: who answers, whom it may delegate to, how it speaks."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from tools import UserError

from ._errors import PersonaNotFoundError
from ._guards import GUARD_TIMEOUT, InputGuard, OutputGuard
from ._quotas import Quota
from .events import QueueMode

__all__ = ["MAX_HANDOFF_DEPTH", "Agent", "Handoff", "Persona", "PersonaContext"]

_AGENT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PERSONA_ID = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")

MAX_HANDOFF_DEPTH = 5
"""How deep runs may delegate: a run at this depth is refused another handoff."""


@dataclass(frozen=True)
class Handoff:
    """An agent this agent may hand work to: ``ask_<agent>`` (awaited) or ``start_<agent>`` (detached).

    Attributes:
        agent: The name of the agent that does the work.
        detached: ``start_<agent>``: the parent gets a receipt at once and the answer arrives
            later as its own assistant message in the thread. Otherwise ``ask_<agent>``: the
            parent waits for the sub-agent's final text, which is the tool's result.
        description: What the model reads about the tool (the sub-agent's description when empty).
    """

    agent: str
    detached: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.agent, str) or not _AGENT_NAME.fullmatch(self.agent):
            raise UserError(f"Handoff agent {self.agent!r} must match {_AGENT_NAME.pattern}")

    @property
    def tool_name(self) -> str:
        """``ask_<agent>`` or ``start_<agent>`` (cut to the 64 characters a tool name may have)."""
        return f"{'start' if self.detached else 'ask'}_{self.agent}"[:64]


@dataclass(frozen=True, kw_only=True)
class PersonaContext:
    """What a persona's instructions function sees, once per run."""

    base_instructions: str
    """The agent's own instructions."""
    agent: str
    persona: str
    actor: Any
    """The ``tools.Actor`` the run acts for."""
    channel: str
    thread_id: str


@dataclass(frozen=True)
class Persona:
    """A voice an agent may speak in: its own instructions and, optionally, a narrower tool list.

    Chosen per send (``Turn.persona``), else the thread's pinned persona, else the agent's
    ``default_persona``; resolved once per run and recorded on the run.

    Attributes:
        id: Identifier (``^[a-zA-Z0-9_.-]{1,64}$``), unique within the agent with its aliases.
        label: What a person sees in a picker.
        description: One line for catalogs (``GET /agent/agents``).
        instructions: Replaces the agent's instructions: a text, or ``fn(PersonaContext) -> str``.
            ``None`` keeps the agent's.
        allowed_tools: Narrows the agent's tools to these names (a gate like the others: the
            model is not offered the others and a call to one is refused). ``None``: no narrowing.
        aliases: Other ids that choose this persona.
    """

    id: str
    label: str
    description: str | None = None
    instructions: str | Callable[[PersonaContext], str] | None = None
    allowed_tools: Sequence[str] | None = None
    aliases: Sequence[str] = ()

    def __post_init__(self) -> None:
        for name in (self.id, *self.aliases):
            if not isinstance(name, str) or not _PERSONA_ID.fullmatch(name):
                raise UserError(f"Persona id or alias {name!r} must match {_PERSONA_ID.pattern}")
        if not isinstance(self.label, str) or not self.label.strip():
            raise UserError(f"Persona {self.id!r}: label must be a non-empty str")
        if self.instructions is not None and not (isinstance(self.instructions, str) or callable(self.instructions)):
            raise UserError(f"Persona {self.id!r}: instructions must be a str or a function")
        if self.allowed_tools is not None:
            if isinstance(self.allowed_tools, str) or not all(isinstance(t, str) for t in self.allowed_tools):
                raise UserError(f"Persona {self.id!r}: allowed_tools must be a list of tool names")
            object.__setattr__(self, "allowed_tools", tuple(self.allowed_tools))
        if isinstance(self.aliases, str):
            raise UserError(f"Persona {self.id!r}: aliases must be a list of ids")
        object.__setattr__(self, "aliases", tuple(self.aliases))


@dataclass(frozen=True)
class Agent:
    """An agent the gateway serves; one or more per gateway, the first is the default.

    Attributes:
        name: Identifier (``^[a-zA-Z0-9_-]{1,64}$``).
        instructions: The system instructions the model receives.
        tools: ``"*"`` for every registered tool, or the names this agent may offer.
        model: This agent's model; the runtime's model when ``None``.
        max_steps: Model steps per run before the run stops with ``max_steps``.
        description: One line for catalogs (A2A skills, the demo page).
        history_limit: The newest messages of the thread the model sees at most (``None``: the
            whole thread). The window starts at a person's message, so a tool result never
            arrives without the call it answers; a long thread (WhatsApp keeps one per sender)
            stays within a model's context and costs the same each turn.
        queue_mode: What a message that arrives while the thread has an active run does, unless
            its send says otherwise: ``queue`` (wait its turn, FIFO), ``interrupt`` (stop the
            active run at its next safe point, then run) or ``reject`` (``thread_busy``).
        queue_limit: Messages a thread's queue holds at most; one more is refused (``queue_full``).
        handoffs: Agents this one may hand work to: a name (``ask_<name>``, awaited) or a
            ``Handoff`` (``detached=True``: ``start_<name>``).
        personas: The personas this agent may speak as.
        default_persona: The persona of a run that names none and whose thread pins none
            (``None``: the agent's own instructions).
        roles: Who may talk to this agent: an actor with one of these roles (anyone when empty).
            Others are told there is no such agent (404), on every channel.
        input_guards: ``InputGuard`` objects run in order on each person's message before the
            model reads it (``gateway._guards``): they may refuse it, rewrite it or flag it.
        output_guards: ``OutputGuard`` objects run in order on each model step's text before the
            person sees it (the step's text is then held until it is complete, not streamed).
        guard_timeout: Seconds each guard may take; a guard that takes longer (or raises)
            refuses the text.
        quota: Token budgets of each actor using this agent (``Quota``), checked before each
            model step against the actor's totals across every agent and process; the
            runtime's default quota (``AGORA_QUOTA_DAY`` / ``_MONTH``) when ``None``.
    """

    name: str
    instructions: str = "You are a helpful assistant."
    tools: Literal["*"] | Sequence[str] = "*"
    model: Any = None
    max_steps: int = 8
    description: str = ""
    history_limit: int | None = 200
    queue_mode: QueueMode = "queue"
    queue_limit: int = 20
    handoffs: Sequence[str | Handoff] = ()
    personas: Sequence[Persona] = ()
    default_persona: str | None = None
    roles: Sequence[str] = field(default=())
    input_guards: Sequence[InputGuard] = ()
    output_guards: Sequence[OutputGuard] = ()
    guard_timeout: float = GUARD_TIMEOUT
    quota: Quota | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _AGENT_NAME.fullmatch(self.name):
            raise UserError(f"Agent name {self.name!r} must match {_AGENT_NAME.pattern}")
        if not isinstance(self.instructions, str):
            raise UserError(f"Agent {self.name!r}: instructions must be a str")
        if self.tools != "*":
            if isinstance(self.tools, str) or not all(isinstance(t, str) for t in self.tools):
                raise UserError(f"Agent {self.name!r}: tools must be '*' or a list of tool names")
            object.__setattr__(self, "tools", tuple(self.tools))
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise UserError(f"Agent {self.name!r}: max_steps must be a positive int")
        limit = self.history_limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise UserError(f"Agent {self.name!r}: history_limit must be a positive int or None")
        if self.queue_mode not in get_args(QueueMode):
            raise UserError(f"Agent {self.name!r}: queue_mode must be one of {', '.join(get_args(QueueMode))}")
        qlimit = self.queue_limit
        if isinstance(qlimit, bool) or not isinstance(qlimit, int) or qlimit < 1:
            raise UserError(f"Agent {self.name!r}: queue_limit must be a positive int")
        if self.quota is not None and not isinstance(self.quota, Quota):
            raise UserError(f"Agent {self.name!r}: quota must be a Quota or None")
        self._check_handoffs_and_personas()
        self._check_guards()

    def _check_guards(self) -> None:
        object.__setattr__(self, "input_guards", self._guard_list("input_guards", self.input_guards, InputGuard))
        object.__setattr__(self, "output_guards", self._guard_list("output_guards", self.output_guards, OutputGuard))
        timeout = self.guard_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise UserError(f"Agent {self.name!r}: guard_timeout must be a positive number of seconds")

    def _guard_list(self, attribute: str, guards: Any, kind: type) -> tuple[Any, ...]:
        method = "check_input" if kind is InputGuard else "check_output"
        if isinstance(guards, (str, bytes)) or not isinstance(guards, Sequence):
            raise UserError(f"Agent {self.name!r}: {attribute} must be a list of {kind.__name__} objects")
        for index, guard in enumerate(guards):
            if isinstance(guard, type):
                raise UserError(
                    f"Agent {self.name!r}: {attribute}[{index}] is the class {guard.__name__}, not an instance"
                )
            check = getattr(guard, method, None) if isinstance(guard, kind) else None
            if check is None or not inspect.iscoroutinefunction(check):
                raise UserError(
                    f"Agent {self.name!r}: {attribute}[{index}] ({type(guard).__name__}) is not an "
                    f"{kind.__name__}: it needs an async {method}(text, ctx) method"
                )
        return tuple(guards)

    def _check_handoffs_and_personas(self) -> None:
        if isinstance(self.handoffs, str):
            raise UserError(f"Agent {self.name!r}: handoffs must be a list")
        handoffs = tuple(h if isinstance(h, Handoff) else Handoff(h) for h in self.handoffs)
        names = [h.tool_name for h in handoffs]
        if len(set(names)) != len(names):
            raise UserError(f"Agent {self.name!r}: a handoff is listed twice")
        object.__setattr__(self, "handoffs", handoffs)
        if isinstance(self.personas, Persona) or not all(isinstance(p, Persona) for p in self.personas):
            raise UserError(f"Agent {self.name!r}: personas must be a list of Persona")
        object.__setattr__(self, "personas", tuple(self.personas))
        seen: set[str] = set()
        for persona in self.personas:
            for key in (persona.id, *persona.aliases):
                if key in seen:
                    raise UserError(f"Agent {self.name!r}: persona id or alias {key!r} is used twice")
                seen.add(key)
        if self.default_persona is not None and self.default_persona not in seen:
            raise UserError(f"Agent {self.name!r}: default_persona {self.default_persona!r} is not one of its personas")
        if isinstance(self.roles, str) or not all(isinstance(r, str) for r in self.roles):
            raise UserError(f"Agent {self.name!r}: roles must be a list of role names")
        object.__setattr__(self, "roles", tuple(self.roles))

    def persona(self, key: str | None) -> Persona | None:
        """The persona of that id or alias (``None`` for ``None``).

        Raises:
            PersonaNotFoundError: The agent has no such persona.
        """
        if key is None:
            return None
        for persona in self.personas:
            if key == persona.id or key in persona.aliases:
                return persona
        raise PersonaNotFoundError(f"Agent {self.name!r} has no persona {key!r}")

    def usable_by(self, actor: Any) -> bool:
        """Whether ``actor`` (a ``tools.Actor``) may talk to this agent (``roles``)."""
        return not self.roles or not set(self.roles).isdisjoint(actor.roles)
