"""Guardrails on what a person sends and what the model answers: ``InputGuard`` / ``OutputGuard``.

Not to be confused with ``gateway._guard`` (request guards of the HTTP server: sizes, timeouts).

A guard looks at a text and answers a ``GuardVerdict``:

============  ==========================================================================
``allow``     the text goes on (``None`` means the same)
``refuse``    the turn (input) or the step's text (output) stops: the run ends ``failed``
              with ``input_refused`` / ``output_refused``, which each channel words for
              its person; ``reason`` is for the log, ``message`` (optional) for the person
``rewrite``   ``text`` replaces what the guard saw (a redaction, a normalisation)
``flag``      the text goes on; a ``guard-flagged`` event and a metric record ``reason``
============  ==========================================================================

An agent's guards run in order, each on the text the one before left; the first refusal stops
them. Every verdict is counted (``agora_guard_verdicts_total{direction, guard, verdict}``).

Where they run, and why there:

- **Input** guards run once per turn, when the run begins (``Runtime`` calls ``screen_input``
  before the store begins the run), on the person's message. What they decide is what the
  store receives: a rewritten message is the one written to the thread's history (so the model
  of this turn and of every later turn reads the rewrite, a redacted number is never stored and
  never makes a thread's title), and a refused message is not written to the history at all
  (a later turn's model never reads it); the run records the refusal and its driver ends it at
  step 0 without calling the model. A run resumed from its journal never screens again: the
  decision is in the store already. A queued message is screened when its run begins (an
  attempt to begin it on a thread that turns out busy asks the guards too; only the run that
  begins writes their events and counts their verdicts: a guard should depend on the text only).
- **Output** guards run on each model step's text before the person sees any of it: while an
  agent has output guards its text deltas are held until the step's text is complete, then
  guarded, then written (one delta and the ``text-end``). The journaled step holds the guarded
  text, so a resume replays what the person saw; a refused step is journaled without its text
  or calls (its model ran: its tokens are charged and costed). Without output guards streaming
  is unchanged.

A guard that raises, or takes longer than ``Agent.guard_timeout``, refuses with a generic message;
the error is logged as one line (no traceback). A text is never passed on unguarded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from tools import Actor

from ._logs import log_scope
from ._unicode import valid_text
from .events import GuardFlaggedEvent, RunEvent, TextDeltaEvent, Turn, now_iso

if TYPE_CHECKING:
    from ._agents import Agent
    from ._driver import RunDriver

__all__ = [
    "GUARD_TIMEOUT",
    "INPUT_REFUSED",
    "OUTPUT_REFUSED",
    "GuardContext",
    "GuardDirection",
    "GuardOutcome",
    "GuardVerdict",
    "GuardedText",
    "InputGuard",
    "OutputGuard",
    "ScreenedTurn",
    "VerdictKind",
    "flag_events",
    "guard_name",
    "guard_output",
    "run_guards",
    "screen_input",
]

logger = logging.getLogger("gateway.guards")

GUARD_TIMEOUT = 5.0
"""Seconds a guard may take by default (``Agent.guard_timeout``); past them the text is refused."""

INPUT_REFUSED = "Sorry, I can't help with that message."
"""What a person is told of a refused message when the guard gives no message of its own (push
channels say their own language's sentence instead)."""

OUTPUT_REFUSED = "Sorry, I can't share that answer."
"""What a person is told of a refused answer when the guard gives no message of its own."""

GuardDirection = Literal["input", "output"]
"""What a guard looked at: the person's message (``input``) or the model's text (``output``)."""

VerdictKind = Literal["allow", "refuse", "rewrite", "flag"]
"""The four answers of a guard (see ``GuardVerdict``)."""

_REASON_CHARS = 500
"""A reason is cut to this many characters (it is logged and carried by an event)."""


@dataclass(frozen=True, kw_only=True)
class GuardContext:
    """What a guard knows of the text besides the text itself."""

    actor: Actor
    """Who the turn is for (the person; for an output guard, the person the answer goes to)."""
    agent: str
    """The agent's name."""
    thread_id: str
    channel: str
    """``web``, ``whatsapp``, ``ag-ui``, ``a2a``, ``api``..."""
    run_id: str
    direction: GuardDirection
    step: int | None = None
    """The model step of an output guard's text (``None`` for input)."""


@dataclass(frozen=True, kw_only=True)
class GuardVerdict:
    """A guard's answer; build one with ``allow()``, ``refuse()``, ``rewrite()`` or ``flag()``.

    Attributes:
        kind: ``allow``, ``refuse``, ``rewrite`` or ``flag``.
        reason: Why (``refuse``, ``flag``; optional for ``rewrite``): logged, counted with
            ``flag``'s event. Never shown to the person by the gateway itself, but a
            ``guard-flagged`` event is in the thread's log, which its owner can read.
        message: ``refuse`` only: what the person is told instead of the gateway's own sentence.
        text: ``rewrite`` only: the text that goes on in place of the one checked.
    """

    kind: VerdictKind
    reason: str | None = None
    message: str | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if self.kind == "rewrite" and not isinstance(self.text, str):
            raise TypeError("a rewrite verdict needs its text")
        for name in ("reason", "message", "text"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"GuardVerdict.{name} must be a str")

    @classmethod
    def allow(cls) -> GuardVerdict:
        """The text goes on as it is."""
        return cls(kind="allow")

    @classmethod
    def refuse(cls, reason: str, *, message: str | None = None) -> GuardVerdict:
        """Stop here: ``reason`` for the log, ``message`` for the person (the channel's words when ``None``)."""
        return cls(kind="refuse", reason=reason, message=message)

    @classmethod
    def rewrite(cls, text: str, *, reason: str | None = None) -> GuardVerdict:
        """``text`` goes on in place of the text checked."""
        return cls(kind="rewrite", text=text, reason=reason)

    @classmethod
    def flag(cls, reason: str) -> GuardVerdict:
        """The text goes on; an event and a metric record ``reason``."""
        return cls(kind="flag", reason=reason)


@runtime_checkable
class InputGuard(Protocol):
    """Checks a person's message before the model reads it (``Agent(input_guards=[...])``)."""

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict | None:
        """The verdict on ``text`` (``None``: allow)."""
        ...


@runtime_checkable
class OutputGuard(Protocol):
    """Checks a model step's text before the person sees it (``Agent(output_guards=[...])``)."""

    async def check_output(self, text: str, ctx: GuardContext) -> GuardVerdict | None:
        """The verdict on ``text`` (``None``: allow)."""
        ...


def guard_name(guard: object) -> str:
    """A guard's name in events, metrics and logs: its ``name`` attribute, else its class's name."""
    name = getattr(guard, "name", None)
    return name if isinstance(name, str) and name else type(guard).__name__


@dataclass(kw_only=True)
class GuardOutcome:
    """What an agent's guards made of one text, once all of them ran (or one refused)."""

    text: str
    """The text that goes on (rewritten, or as it was)."""
    refusal: str | None = None
    """Set when a guard refused: what the person is told."""
    flags: list[tuple[str, str]] = field(default_factory=list)
    """``(guard, reason)`` of each ``flag`` verdict, in order."""
    verdicts: list[tuple[str, VerdictKind]] = field(default_factory=list)
    """``(guard, verdict)`` of each guard that answered, for the metric."""

    @property
    def refused(self) -> bool:
        """Whether a guard refused the text."""
        return self.refusal is not None


Check = Callable[[str, GuardContext], Awaitable["GuardVerdict | None"]]
"""A guard's bound ``check_input`` or ``check_output``."""


async def run_guards(
    checks: Sequence[tuple[str, Check]], text: str, ctx: GuardContext, *, timeout: float
) -> GuardOutcome:
    """Run ``checks`` in order on ``text``; a guard that fails refuses (never passes the text on).

    Args:
        checks: ``(name, check)`` of an agent's input or output guards (``ctx.direction`` says which).
        text: The text checked first; a rewrite changes what the next guard sees.
        ctx: What the guards know of it.
        timeout: Seconds each guard may take.
    """
    default = INPUT_REFUSED if ctx.direction == "input" else OUTPUT_REFUSED
    outcome = GuardOutcome(text=text)
    for name, check in checks:
        try:
            async with asyncio.timeout(timeout):
                verdict = await check(outcome.text, ctx)
            if verdict is None:
                verdict = GuardVerdict.allow()
            elif not isinstance(verdict, GuardVerdict):
                raise TypeError(f"returned {type(verdict).__name__}, not a GuardVerdict")
        except Exception as exc:  # a CancelledError (a Stop, a shutdown) passes through
            story = "timed out" if isinstance(exc, TimeoutError) else f"raised {type(exc).__name__}: {exc}"
            logger.error("%s guard %s %s; the text is refused", ctx.direction, name, _cut(story))
            outcome.verdicts.append((name, "refuse"))
            outcome.refusal = default
            return outcome
        outcome.verdicts.append((name, verdict.kind))
        match verdict.kind:
            case "refuse":
                logger.info("%s guard %s refused: %s", ctx.direction, name, _cut(verdict.reason or ""))
                outcome.refusal = valid_text(verdict.message) if verdict.message else default
                return outcome
            case "rewrite":
                outcome.text = valid_text(verdict.text or "")
            case "flag":
                reason = _cut(valid_text(verdict.reason or ""))
                logger.info("%s guard %s flagged: %s", ctx.direction, name, reason)
                outcome.flags.append((name, reason))
            case _:
                pass
    return outcome


def _cut(text: str) -> str:
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def flag_events(outcome: GuardOutcome, direction: GuardDirection, *, thread_id: str, run_id: str) -> list[RunEvent]:
    """A ``guard-flagged`` event per flag of ``outcome``."""
    return [
        GuardFlaggedEvent(
            thread_id=thread_id, run_id=run_id, at=now_iso(), direction=direction, guard=name, reason=reason
        )
        for name, reason in outcome.flags
    ]


@dataclass(kw_only=True)
class ScreenedTurn:
    """A turn after its agent's input guards: what the store receives."""

    turn: Turn
    """The turn to begin: its text rewritten, or emptied when refused (a refused message is not kept)."""
    outcome: GuardOutcome | None = None
    """``None`` when the agent has no input guards (or the run is a direct call)."""
    events: list[RunEvent] = field(default_factory=list)
    """``guard-flagged`` events, written with the run's first events."""

    @property
    def refusal(self) -> str | None:
        """What the person is told when a guard refused (``None`` otherwise)."""
        return self.outcome.refusal if self.outcome is not None else None


async def screen_input(agent: Agent, turn: Turn, run_id: str) -> ScreenedTurn:
    """Run ``agent``'s input guards on ``turn``'s message (see the module's docstring)."""
    guards = agent.input_guards
    if not guards:
        return ScreenedTurn(turn=turn)
    ctx = GuardContext(
        actor=turn.actor,
        agent=agent.name,
        thread_id=turn.thread_id,
        channel=turn.channel,
        run_id=run_id,
        direction="input",
    )
    checks = [(guard_name(guard), guard.check_input) for guard in guards]
    with log_scope(run_id=run_id):  # the run begins with this id: the guards' lines name it
        outcome = await run_guards(checks, turn.text, ctx, timeout=agent.guard_timeout)
        text = "" if outcome.refused else outcome.text
        try:
            # Validated as the channel's turn was: a rewrite holds no NUL, fits a turn's length.
            screened = turn if text == turn.text else Turn.model_validate({**turn.model_dump(), "text": text})
        except ValidationError:
            logger.error("input guards rewrote the message to %d characters, more than a turn holds", len(text))
            outcome.refusal, outcome.text = INPUT_REFUSED, ""
            screened = turn.model_copy(update={"text": ""})
    events = flag_events(outcome, "input", thread_id=turn.thread_id, run_id=run_id)
    return ScreenedTurn(turn=screened, outcome=outcome, events=events)


@dataclass(kw_only=True)
class GuardedText:
    """A model step's text after its agent's output guards: what is written."""

    text: str | None
    """The text the person sees and the journal keeps (``None`` when refused)."""
    events: list[RunEvent]
    """The step's text events, in place of the held deltas: flags, then one delta of ``text``."""
    refusal: str | None = None
    """Set when a guard refused: what the person is told (the run ends ``output_refused``)."""


async def guard_output(driver: RunDriver, step: int, message_id: str, text: str) -> GuardedText:
    """Run the driver's agent's output guards on a step's complete text (see the module's docstring)."""
    agent, run = driver.agent, driver.run
    ctx = GuardContext(
        actor=run.turn.actor,
        agent=agent.name,
        thread_id=run.thread_id,
        channel=run.turn.channel,
        run_id=run.run_id,
        direction="output",
        step=step,
    )
    checks = [(guard_name(guard), guard.check_output) for guard in agent.output_guards]
    outcome = await run_guards(checks, text, ctx, timeout=agent.guard_timeout)
    driver.host.observe_guards(run, "output", outcome)
    events = flag_events(outcome, "output", thread_id=run.thread_id, run_id=run.run_id)
    if outcome.refused:
        return GuardedText(text=None, events=events, refusal=outcome.refusal)
    if outcome.text:
        events.append(driver.event(TextDeltaEvent, message_id=message_id, delta=outcome.text))
    return GuardedText(text=outcome.text or None, events=events)
