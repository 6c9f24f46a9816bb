"""The built-in guards: ``MaxInputLength``, ``BlockedPatterns`` and ``PiiRedactor``, and their settings.

``Agent(input_guards=[...], output_guards=[...])`` takes them as any guard. A deployer can turn
them on without code (``guards_from_settings``, applied by ``Gateway.runtime`` to every agent):
``AGORA_GUARD_MAX_INPUT_CHARS``, ``AGORA_GUARD_BLOCKED_PATTERNS`` (input and output) and
``AGORA_REDACT_PII`` (what reaches the model, and log lines: ``configure_logging``).
"""

from __future__ import annotations

import dataclasses
import importlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tools import UserError

from ._guards import GuardContext, GuardVerdict, InputGuard, OutputGuard
from ._pii import MAX_SCAN_CHARS, fold_text, redact_pii

if TYPE_CHECKING:
    from ._agents import Agent
    from ._settings import Settings

__all__ = ["BlockedPatterns", "MaxInputLength", "PiiRedactor", "guards_from_settings"]

_MAX_PATTERN_CHARS = 1000
_re_parser: Any = importlib.import_module("re._parser")  # an expression's tree (no typeshed stub)
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT"}
_ATOMIC = {"ATOMIC_GROUP", "POSSESSIVE_REPEAT"}  # they never backtrack into what they matched


def _variable_repeat_inside(items: Any, *, under_repeat: bool) -> bool:
    """Whether ``items`` (a parsed expression) holds a variable repetition inside another one."""
    for op, av in items:
        name = str(op)
        if name in _ATOMIC:
            continue
        if name in _REPEATS:
            low, high, sub = av
            variable = high != low
            if variable and under_repeat:
                return True
            if _variable_repeat_inside(sub, under_repeat=under_repeat or (variable and high > 1)):
                return True
        elif name == "SUBPATTERN":
            if _variable_repeat_inside(av[3], under_repeat=under_repeat):
                return True
        elif name == "BRANCH":
            if any(_variable_repeat_inside(branch, under_repeat=under_repeat) for branch in av[1]):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            if _variable_repeat_inside(av[1], under_repeat=under_repeat):
                return True
        elif name == "GROUPREF_EXISTS":
            if any(_variable_repeat_inside(b, under_repeat=under_repeat) for b in av[1:] if b is not None):
                return True
    return False


def nests_repetition(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` repeats a part that itself repeats a variable number of times (``(a+)+``).

    Such a pattern can backtrack exponentially on a text that almost matches (forty characters
    hold the event loop for hours). An atomic group ``(?>...)`` or a possessive quantifier
    ``a++`` does not backtrack and is allowed.
    """
    return _variable_repeat_inside(_re_parser.parse(pattern.pattern, pattern.flags), under_repeat=False)


class MaxInputLength:
    """Refuses a person's message longer than ``chars`` characters (an input guard).

    Args:
        chars: The longest message let through.
        message: What the person is told (the channel's own words when ``None``).
    """

    name = "max_input_length"

    def __init__(self, chars: int, *, message: str | None = None) -> None:
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise UserError("MaxInputLength: chars must be a positive int")
        self.chars = chars
        self.message = message

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        """Refuse ``text`` when it is too long."""
        if len(text) > self.chars:
            return GuardVerdict.refuse(f"{len(text)} characters, over {self.chars}", message=self.message)
        return GuardVerdict.allow()


_NESTED = (
    "BlockedPatterns: pattern {index} ({pattern!r}) repeats a part that repeats itself, which can take"
    " exponential time on a short text: make the inner part atomic ((?>...)) or possessive (a++)"
)


class BlockedPatterns:
    r"""Refuses a text that matches one of ``patterns`` (an input and an output guard).

    Patterns are regular expressions (Python's ``re``), compiled once here, searched anywhere in
    the text as written and folded (``fold_text``: NFKC, zero-width and other format characters
    dropped, so ``pass\u200bword`` or a full-width ``ｐａｓｓｗｏｒｄ`` match ``password``; look-alike
    letters of other scripts are not folded). The reason logged names the pattern's index, never
    the text it matched. A text longer than ``max_chars`` is refused unread: a pattern is never
    left to run on an input of any size (Python's ``re`` has no time limit, and holds the event
    loop while it searches), and a pattern that nests repetition (``(a+)+``, ``(\w+\s?)*``) is
    refused here: its search can take exponential time on a short text (make the inner part
    atomic, ``(?>\w+)``, or possessive, ``\w++``).

    Args:
        patterns: Expressions (strings or compiled patterns).
        ignore_case: Match string patterns without regard to case.
        message: What the person is told (the channel's own words when ``None``).
        max_chars: The longest text searched.

    Raises:
        UserError: A pattern is not a valid expression (or not a string), nests repetition, or
            there are none.
    """

    name = "blocked_patterns"

    def __init__(
        self,
        patterns: Sequence[str | re.Pattern[str]],
        *,
        ignore_case: bool = True,
        message: str | None = None,
        max_chars: int = MAX_SCAN_CHARS,
    ) -> None:
        if isinstance(patterns, (str, re.Pattern)) or not isinstance(patterns, Sequence) or not patterns:
            raise UserError("BlockedPatterns: give a non-empty list of regular expressions")
        compiled: list[re.Pattern[str]] = []
        for index, pattern in enumerate(patterns):
            if isinstance(pattern, re.Pattern):
                if isinstance(pattern.pattern, str) and nests_repetition(pattern):
                    raise UserError(_NESTED.format(index=index, pattern=pattern.pattern))
                compiled.append(pattern)
                continue
            if not isinstance(pattern, str) or not pattern or len(pattern) > _MAX_PATTERN_CHARS:
                raise UserError(f"BlockedPatterns: pattern {index} must be a non-empty str of at most 1000 characters")
            try:
                compiled.append(re.compile(pattern, re.IGNORECASE if ignore_case else 0))
            except re.error as exc:
                raise UserError(
                    f"BlockedPatterns: pattern {index} ({pattern!r}) is not a valid expression: {exc}"
                ) from None
            if nests_repetition(compiled[-1]):
                raise UserError(_NESTED.format(index=index, pattern=pattern))
        self.patterns = tuple(compiled)
        self.message = message
        self.max_chars = max_chars

    def _verdict(self, text: str) -> GuardVerdict:
        if len(text) > self.max_chars:
            return GuardVerdict.refuse(f"{len(text)} characters: too long to search", message=self.message)
        folded = fold_text(text)
        for index, pattern in enumerate(self.patterns):
            if pattern.search(text) is not None or (folded != text and pattern.search(folded) is not None):
                return GuardVerdict.refuse(f"matched blocked pattern {index}", message=self.message)
        return GuardVerdict.allow()

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        """Refuse a person's message that matches."""
        return self._verdict(text)

    async def check_output(self, text: str, ctx: GuardContext) -> GuardVerdict:
        """Refuse a model's text that matches."""
        return self._verdict(text)


class PiiRedactor:
    """Replaces e-mail addresses, phone numbers and card numbers with ``[email]``, ``[phone]``, ``[card]``.

    An input guard (the model, the thread's history and its title get the redacted message) and
    an output guard (the person gets the redacted answer). The patterns are those of
    ``gateway._pii``: card numbers must pass the Luhn check, and dates, prices and order
    numbers are left alone.

    Args:
        emails: Redact e-mail addresses.
        phones: Redact phone numbers.
        cards: Redact card numbers.
    """

    name = "pii_redactor"

    def __init__(self, *, emails: bool = True, phones: bool = True, cards: bool = True) -> None:
        if not (emails or phones or cards):
            raise UserError("PiiRedactor: nothing to redact (emails, phones and cards are all off)")
        self.emails, self.phones, self.cards = emails, phones, cards

    def _verdict(self, text: str) -> GuardVerdict:
        done = redact_pii(text, emails=self.emails, phones=self.phones, cards=self.cards)
        if done.text == text:
            return GuardVerdict.allow()
        found = ", ".join(
            f"{n} {kind}" for kind, n in (("email", done.emails), ("phone", done.phones), ("card", done.cards)) if n
        )
        return GuardVerdict.rewrite(done.text, reason=f"redacted {found or 'a text too long to scan'}")

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict:
        """The person's message, redacted."""
        return self._verdict(text)

    async def check_output(self, text: str, ctx: GuardContext) -> GuardVerdict:
        """The model's text, redacted."""
        return self._verdict(text)


def guards_from_settings(agents: Sequence[Agent], settings: Settings) -> list[Agent]:
    """``agents`` with the built-in guards ``settings`` turn on placed before their own.

    ``guard_max_input_chars`` adds ``MaxInputLength`` (input), ``guard_blocked_patterns`` adds
    ``BlockedPatterns`` (input and output) and ``redact_pii`` adds ``PiiRedactor`` (input), in
    that order: a message is measured and searched as the person wrote it, then redacted.
    """
    before: list[InputGuard] = []
    after: list[OutputGuard] = []
    if settings.guard_max_input_chars is not None:
        before.append(MaxInputLength(settings.guard_max_input_chars))
    if settings.guard_blocked_patterns:
        blocked = BlockedPatterns(settings.guard_blocked_patterns)
        before.append(blocked)
        after.append(blocked)
    if settings.redact_pii:
        before.append(PiiRedactor())
    if not before and not after:
        return list(agents)
    return [
        dataclasses.replace(
            agent,
            input_guards=(*before, *agent.input_guards),
            output_guards=(*after, *agent.output_guards),
        )
        for agent in agents
    ]
