"""Markdown -> Telegram MarkdownV2: every special character escaped outside the spans Telegram reads."""

from __future__ import annotations

import re

import pytest

from gateway._push._mdv2 import MAX_TELEGRAM_TEXT, split_telegram, telegram_length, to_telegram

SPECIAL = "_*[]()~`>#+-=|{}.!"


def unescaped(text: str) -> list[str]:
    """Special characters not preceded by a backslash (outside code), i.e. markers Telegram reads."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in SPECIAL:
            out.append(c)
        i += 1
    return out


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("Refund €129.00 for order 1042?", "Refund €129\\.00 for order 1042?"),
        ("**Total**: 3 + 4 = 7!", "*Total*: 3 \\+ 4 \\= 7\\!"),
        ("*soft* and _also_ and ~~gone~~", "_soft_ and _also_ and ~gone~"),
        ("***both***", "*_both_*"),
        ("call `a_b*c` now", "call `a_b*c` now"),
        ("`back\\slash` and `tick`", "`back\\\\slash` and `tick`"),
        ("see [the docs](https://example.com/a_(b))", "see [the docs](https://example.com/a_(b\\))"),
        ("[x](https://e.com/p?q=1)", "[x](https://e.com/p?q=1)"),
        ("[rel](/local)", "rel \\(/local\\)"),
        ("# Title\nbody.", "*Title*\nbody\\."),
        ("- one\n- two", "• one\n• two"),
        ("1. first", "1\\. first"),
        ("> quoted (yes)", ">quoted \\(yes\\)"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "a · b\n1 · 2"),
        ("5 * 3 and a lone ** here", "5 \\* 3 and a lone \\*\\* here"),
        ("snake_case_name", "snake\\_case\\_name"),
        ("\\*not italic\\*", "\\*not italic\\*"),
        ("back\\slash", "back\\\\slash"),
        ("```python\nx = a_b * 2 # `q`\n```", "```python\nx = a_b * 2 # \\`q\\`\n```"),
        ("<https://example.com/x>", "https://example\\.com/x"),
        ("", ""),
    ],
)
def test_conversion(markdown: str, expected: str) -> None:
    assert to_telegram(markdown) == expected


def test_url_escapes_parenthesis_and_backslash() -> None:
    assert to_telegram("[a](https://e.com/x\\y)") == "[a](https://e.com/x\\\\y)"
    assert to_telegram("[a](https://e.com/x)y)") == "[a](https://e.com/x)y\\)"


def test_placeholder_characters_in_input_do_not_leak() -> None:
    assert to_telegram("a\x00 0\x00 b\x01c") == "a 0 bc"


def test_every_special_character_alone_is_escaped() -> None:
    for char in SPECIAL + "\\":
        converted = to_telegram(f"x {char} y")
        assert converted == f"x \\{char} y", (char, converted)


def test_short_text_is_one_message_and_empty_none() -> None:
    assert split_telegram("hello.") == ["hello\\."]
    assert split_telegram("   ") == []


def test_long_text_splits_at_paragraphs_within_the_limit() -> None:
    paragraph = "Word. " * 300  # 1800 characters, 2100 after escaping the dots
    pieces = split_telegram("\n\n".join([paragraph.strip()] * 5))
    assert len(pieces) == 5
    assert all(telegram_length(p) <= MAX_TELEGRAM_TEXT for p in pieces)
    assert all(p == to_telegram(paragraph.strip()) for p in pieces)


def test_a_cut_never_splits_an_escape_and_keeps_every_character() -> None:
    text = "." * 10_000  # every dot escaped: 20000 units
    pieces = split_telegram(text)
    assert all(telegram_length(p) <= MAX_TELEGRAM_TEXT for p in pieces)
    assert all(re.fullmatch(r"(?:\\\.)+", p) for p in pieces)
    assert sum(p.count(".") for p in pieces) == 10_000


def test_utf16_units_are_counted() -> None:
    emoji = "😀" * 3000  # 6000 UTF-16 units, 3000 code points
    pieces = split_telegram(emoji)
    assert len(pieces) == 2 and all(telegram_length(p) <= MAX_TELEGRAM_TEXT for p in pieces)
    assert "".join(pieces) == emoji


def test_bold_spans_survive_a_split_at_lines() -> None:
    line = "**bold** text with a dot."
    pieces = split_telegram("\n".join([line] * 400), limit=1000)
    assert len(pieces) > 1
    for piece in pieces:
        assert telegram_length(piece) <= 1000
        assert unescaped(piece).count("*") % 2 == 0


def test_a_long_code_block_is_fenced_again_in_each_piece() -> None:
    code = "\n".join(f"print({i})  # `{i}`" for i in range(600))
    pieces = split_telegram(f"Intro.\n\n```python\n{code}\n```\n\nOutro.", limit=2000)
    fenced = [p for p in pieces if p.startswith("```python\n")]
    assert len(fenced) >= 2
    for piece in fenced:
        assert piece.endswith("\n```") and telegram_length(piece) <= 2000
    assert pieces[0] == "Intro\\." and pieces[-1] == "Outro\\."
