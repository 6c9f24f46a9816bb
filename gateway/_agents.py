"""``Agent``: a named persona with instructions, a tool allow-list and optionally its own model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from tools import UserError

from .events import QueueMode

__all__ = ["Agent"]

_AGENT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


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

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _AGENT_NAME.match(self.name):
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
