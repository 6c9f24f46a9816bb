"""Finding e-mail addresses, phone numbers and card numbers in text, and redacting them.

Precision first: a redaction that eats a date, an order number or a price breaks the
conversation, so each pattern asks for the shape people write these in, and card numbers must
pass the Luhn check.

- **E-mail**: ``local@domain.tld`` (a dotted domain with a two-letter or longer top level).
- **Phone**: an international number (``+`` and 8 to 15 digits, spaces, dots, dashes or a
  parenthesised area code between groups: ``+1 (555) 123-4567``, ``+55 11 91234-5678``,
  ``+351912345678``), or a national one with its area code in parentheses (``(555) 123-4567``,
  ``(11) 91234-5678``) or in the ``555-123-4567`` / ``555.123.4567`` shape. A bare run of digits
  is not taken for a phone number (it is as often an order number).
- **Card**: 13 to 19 digits, in groups separated by single spaces or dashes, passing Luhn
  (``4111 1111 1111 1111``); random digit runs fail it nine times in ten.

Each match becomes ``[email]``, ``[phone]`` or ``[card]``. Texts are scanned up to
``MAX_SCAN_CHARS`` characters; past that the rest is replaced by ``[…]`` rather than passed on
unread. Every pattern is linear: no nested quantifier can backtrack on a long input.

A text is also read folded (``fold_text``: NFKC, format characters such as zero-width spaces
dropped): when the folded form shows something the text as written hides
(``bob\u200b@example.com``, full-width ``＋１ ４１５ ５５５ ０１２３``), the folded form is redacted.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._logs import _FIELDS

__all__ = ["MAX_SCAN_CHARS", "PiiLogFilter", "PiiRedaction", "fold_text", "luhn_valid", "redact_pii"]

MAX_SCAN_CHARS = 100_000
"""Characters of one text scanned at most (a longer one is cut there, marked ``[…]``)."""

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![\w-])")
_PHONE = re.compile(
    r"(?<![\w+])(?:"
    r"\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{2,5}){1,5}"  # +1 (555) 123-4567, +55 11 91234-5678
    r"|\(\d{2,4}\)[ .-]?\d{3,5}[ .-]?\d{4}"  # (555) 123-4567, (11) 91234-5678
    r"|\d{3}[.-]\d{3}[.-]\d{4}"  # 555-123-4567
    r")(?![\w-]|[.,]\d)"
)
_CARD = re.compile(r"(?<![\w.,-])\d{4}(?:[ -]?\d{1,4}){2,4}(?:[ -]?\d{1,3})?(?![\w-]|[.,]\d)")


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check (card numbers do)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def fold_text(text: str) -> str:
    """``text`` as a reader sees it: NFKC (full-width and compatibility forms) without format characters.

    Format characters (Unicode category ``Cf``: zero-width spaces and joiners, soft hyphens,
    bidirectional controls) are invisible, so they can split a word a pattern looks for.
    """
    folded = unicodedata.normalize("NFKC", text)
    if not any(unicodedata.category(c) == "Cf" for c in folded):
        return folded
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


@dataclass(frozen=True, kw_only=True)
class PiiRedaction:
    """What ``redact_pii`` did to one text."""

    text: str
    emails: int = 0
    phones: int = 0
    cards: int = 0

    @property
    def count(self) -> int:
        """Everything redacted."""
        return self.emails + self.phones + self.cards


def redact_pii(text: str, *, emails: bool = True, phones: bool = True, cards: bool = True) -> PiiRedaction:
    """``text`` with its e-mail addresses, phone numbers and card numbers replaced (see the module)."""
    done = _redact(text, emails=emails, phones=phones, cards=cards)
    folded = fold_text(done.text)
    if folded == done.text:
        return done
    again = _redact(folded, emails=emails, phones=phones, cards=cards)
    if not again.count:  # nothing hidden: the text stays as written
        return done
    return PiiRedaction(
        text=again.text,
        emails=done.emails + again.emails,
        phones=done.phones + again.phones,
        cards=done.cards + again.cards,
    )


def _redact(text: str, *, emails: bool, phones: bool, cards: bool) -> PiiRedaction:
    if len(text) > MAX_SCAN_CHARS:
        text = text[:MAX_SCAN_CHARS] + "[…]"
    counts = {"card": 0, "phone": 0, "email": 0}

    def card(match: re.Match[str]) -> str:
        digits = _digits(match.group())
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            counts["card"] += 1
            return "[card]"
        return match.group()

    def phone(match: re.Match[str]) -> str:
        if 8 <= len(_digits(match.group())) <= 15:
            counts["phone"] += 1
            return "[phone]"
        return match.group()

    def email(match: re.Match[str]) -> str:
        counts["email"] += 1
        return "[email]"

    # Cards first: a card number in groups of four could read as a phone number's groups.
    if cards and any(c.isdigit() for c in text):
        text = _CARD.sub(card, text)
    if phones and any(c.isdigit() for c in text):
        text = _PHONE.sub(phone, text)
    if emails and "@" in text:
        text = _EMAIL.sub(email, text)
    return PiiRedaction(text=text, emails=counts["email"], phones=counts["phone"], cards=counts["card"])


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_pii(value).text
    if isinstance(value, Mapping):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item) for item in value]
    return value


class PiiLogFilter(logging.Filter):
    """Redacts e-mail addresses, phone numbers and card numbers in what a log line says.

    The message (its arguments merged in), the record's own fields (``extra={"log_fields":
    {...}}``), the work's fields (``log_scope``: a client's thread id), a traceback's text and a
    stack are redacted before any formatter reads them.
    ``configure_logging`` installs one when ``AGORA_REDACT_PII`` is set.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; every record is kept."""
        if getattr(record, "agora_redacted", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit: logging reports it when it formats the line
            return True
        record.msg = redact_pii(message).text
        record.args = None
        fields = getattr(record, "log_fields", None)
        if isinstance(fields, Mapping):
            record.log_fields = _redacted(fields)
        # The work's fields (``log_scope``): a thread id is the client's to choose (``555-123-4567``).
        context = getattr(record, "agora_context", None)
        if context is None:
            context = _FIELDS.get()
        if context:
            record.agora_context = _redacted(context)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_pii(record.exc_text).text
        if record.stack_info:
            record.stack_info = redact_pii(record.stack_info).text
        record.agora_redacted = True
        return True
