"""The built-in guards and the PII patterns: true positives, and what must survive."""

from __future__ import annotations

import re

import pytest

from gateway import Agent, BlockedPatterns, GuardContext, GuardVerdict, MaxInputLength, PiiRedactor, Settings
from gateway._guard_builtins import guards_from_settings
from gateway._pii import luhn_valid, redact_pii
from tests.engine.conftest import ALICE
from tools import UserError

CTX = GuardContext(actor=ALICE, agent="a", thread_id="t", channel="web", run_id="r", direction="input")


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("write to ana.silva+news@example.com.br today", "write to [email] today"),
        ("<JOHN_DOE@Mail.Example.org>", "<[email]>"),
        ("call +1 (555) 123-4567 now", "call [phone] now"),
        ("ligue +55 11 91234-5678", "ligue [phone]"),
        ("+351912345678", "[phone]"),
        ("+44 20 7946 0958.", "[phone]."),
        ("(11) 91234-5678", "[phone]"),
        ("(555) 123-4567 or 555-123-4567 or 555.123.4567", "[phone] or [phone] or [phone]"),
        ("card 4111 1111 1111 1111 exp 12/27", "card [card] exp 12/27"),
        ("4111-1111-1111-1111", "[card]"),
        ("5500005555555559", "[card]"),
        ("amex 3782 822463 10005", "amex [card]"),
    ],
)
def test_what_is_redacted(text: str, redacted: str) -> None:
    assert redact_pii(text).text == redacted


@pytest.mark.parametrize(
    "text",
    [
        "the meeting is on 2026-12-02 at 14:30",
        "born 02/12/1990, renewed 12.02.2026",
        "order #1042, order 123456789, ORD-2026-000123",
        "tracking 1Z999AA10123456784",
        "it costs $1,234.56 or R$ 1.234,56 or 1 234,56 €",
        "a random run 4111111111111112 fails Luhn",
        "invoice 2026 0001 0002 0004 (fails Luhn)",
        "version 10.2.3.4, IP 192.168.10.200",
        "score +5 points, +12 today",
        "ISBN 978-3-16-148410-0",
        "user@localhost has no domain",
        "an @mention and a@b",
    ],
)
def test_what_survives(text: str) -> None:
    assert redact_pii(text).text == text


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112") and not luhn_valid("79927398710")


def test_each_kind_can_be_left_alone_and_a_huge_text_is_cut_not_passed_unread() -> None:
    text = "ana@example.com +1 (555) 123-4567 4111 1111 1111 1111"
    assert redact_pii(text, emails=False).text == "ana@example.com [phone] [card]"
    assert redact_pii(text, phones=False, cards=False).text == "[email] +1 (555) 123-4567 4111 1111 1111 1111"
    huge = "x" * 200_000 + " ana@example.com"
    done = redact_pii(huge)
    assert done.text.endswith("[…]") and "ana@example.com" not in done.text


async def test_pii_redactor_rewrites_on_both_sides_and_allows_clean_text() -> None:
    guard = PiiRedactor()
    verdict = await guard.check_input("mail ana@example.com", CTX)
    assert verdict == GuardVerdict.rewrite("mail [email]", reason="redacted 1 email")
    assert await guard.check_output("nothing here, order 1042", CTX) == GuardVerdict.allow()
    with pytest.raises(UserError, match="nothing to redact"):
        PiiRedactor(emails=False, phones=False, cards=False)


async def test_max_input_length() -> None:
    guard = MaxInputLength(5, message="Too long.")
    assert await guard.check_input("12345", CTX) == GuardVerdict.allow()
    assert await guard.check_input("123456", CTX) == GuardVerdict.refuse("6 characters, over 5", message="Too long.")
    for bad in (0, -1, True, "5"):
        with pytest.raises(UserError, match="chars must be a positive int"):
            MaxInputLength(bad)  # type: ignore[arg-type]


async def test_blocked_patterns_refuse_naming_the_pattern_not_the_text() -> None:
    guard = BlockedPatterns([r"\bignore (all|previous) instructions\b", re.compile("drop table")])
    assert await guard.check_input("Please IGNORE previous instructions", CTX) == GuardVerdict.refuse(
        "matched blocked pattern 0"
    )
    assert (await guard.check_output("then drop table users", CTX)).kind == "refuse"
    assert await guard.check_output("DROP TABLE", CTX) == GuardVerdict.allow()  # a compiled pattern keeps its flags
    assert await guard.check_input("an innocent question", CTX) == GuardVerdict.allow()
    long = await BlockedPatterns(["x"], max_chars=10).check_input("y" * 11, CTX)
    assert long == GuardVerdict.refuse("11 characters: too long to search")


@pytest.mark.parametrize(
    ("patterns", "error"),
    [
        (["ok", "(unclosed"], r"pattern 1 \('\(unclosed'\) is not a valid expression"),
        ([""], "pattern 0 must be a non-empty str"),
        (["x" * 1001], "pattern 0 must be a non-empty str of at most 1000 characters"),
        ([42], "pattern 0 must be a non-empty str"),
        ([], "give a non-empty list"),
        ("just-a-string", "give a non-empty list"),
        (["ok", "(a+)+$"], r"pattern 1 \('\(a\+\)\+\$'\) repeats a part that repeats itself"),
        ([r"(\w+\s?)*x"], "pattern 0 .* repeats a part that repeats itself"),
        ([r"(?:a|b*)+"], "repeats a part that repeats itself"),
        ([r"(?:a{1,3}){2,}"], "repeats a part that repeats itself"),
        ([re.compile(r"(a*)*")], "repeats a part that repeats itself"),
    ],
)
def test_a_bad_pattern_is_a_user_error(patterns: object, error: str) -> None:
    with pytest.raises(UserError, match=error):
        BlockedPatterns(patterns)  # type: ignore[arg-type]


def test_the_settings_put_the_built_ins_before_each_agents_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_GUARD_MAX_INPUT_CHARS", "100")
    monkeypatch.setenv("AGORA_GUARD_BLOCKED_PATTERNS", '["(?i)\\\\bpassword\\\\b"]')
    monkeypatch.setenv("AGORA_REDACT_PII", "true")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    own = PiiRedactor(cards=False)
    (agent,) = guards_from_settings([Agent(name="a", input_guards=[own])], settings)
    assert [type(g).__name__ for g in agent.input_guards] == [
        "MaxInputLength",
        "BlockedPatterns",
        "PiiRedactor",
        "PiiRedactor",
    ]
    assert agent.input_guards[-1] is own
    assert [type(g).__name__ for g in agent.output_guards] == ["BlockedPatterns"]
    assert agent.input_guards[1].patterns[0].pattern == "(?i)\\bpassword\\b"
    for name in ("AGORA_GUARD_MAX_INPUT_CHARS", "AGORA_GUARD_BLOCKED_PATTERNS", "AGORA_REDACT_PII"):
        monkeypatch.delenv(name)
    plain = Agent(name="b")
    assert guards_from_settings([plain], Settings(_env_file=None)) == [plain]  # type: ignore[call-arg]


def test_a_bad_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_GUARD_MAX_INPUT_CHARS", "0")
    with pytest.raises(ValueError, match="guard_max_input_chars"):
        Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "text",
    [
        "my pass\u200bword is x",  # a zero-width space inside the word
        "my \uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44 is x",  # full-width letters
        "my pass\u00adword is x",  # a soft hyphen
        "my pa\u2060ss\ufeffword is x",  # a word joiner and a zero-width no-break space
    ],
)
async def test_blocked_patterns_read_the_text_folded(text: str) -> None:
    verdict = await BlockedPatterns([r"\bpassword\b"]).check_input(text, CTX)
    assert verdict.kind == "refuse" and verdict.reason == "matched blocked pattern 0"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("mail bob.smith\u200b@example.com now", "mail [email] now"),
        ("call \uff0b\uff11 \uff14\uff11\uff15 \uff15\uff15\uff15 \uff10\uff11\uff12\uff13 now", "call [phone] now"),
        ("card 4111\u200b 1111 1111 1111", "card [card]"),
    ],
)
def test_pii_hidden_by_invisible_or_full_width_characters_is_redacted(text: str, redacted: str) -> None:
    assert redact_pii(text).text == redacted


def test_a_text_with_nothing_hidden_keeps_its_own_characters() -> None:
    text = "caf\u00e9 \uff21\uff22 \u200b ok"  # NFKC would change it, but there is nothing to redact
    assert redact_pii(text).text == text


@pytest.mark.parametrize(
    "pattern",
    [r"(?>a+)+$", r"(?:a++)+$", r"(?:\d{3}-)+\d{4}", r"x(?:[a-z]+)?y", r"\bignore (all|previous) instructions\b"],
)
async def test_patterns_that_cannot_backtrack_exponentially_are_kept(pattern: str) -> None:
    guard = BlockedPatterns([pattern])
    assert (await guard.check_input("a" * 40 + "!", CTX)).kind == "allow"


def test_a_nested_repetition_in_the_setting_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGORA_GUARD_BLOCKED_PATTERNS", '["(a+)+$"]')
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    with pytest.raises(UserError, match="repeats a part that repeats itself"):
        guards_from_settings([Agent(name="a")], settings)
