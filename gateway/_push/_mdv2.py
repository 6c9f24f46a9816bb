r"""Markdown (what models write) to Telegram's MarkdownV2, and splitting it into messages.

MarkdownV2 reads ``*bold*``, ``_italic_``, ``~strike~``, inline ```code```, ````` ```pre``` `````,
``[label](url)`` and ``>`` quotes. Every other ``_*[]()~`>#+-=|{}.!`` and ``\`` in the text must be
escaped with a backslash, or Telegram refuses the whole message ("can't parse entities"). Inside
code and pre only ``\`` and ````` ` ````` are escaped; inside a link's URL only ``\`` and ``)``.

The conversion therefore never passes a marker through: it finds the Markdown spans it knows,
holds them, escapes every special character left, and puts the spans back. A marker it cannot
pair (``5 * 3``, a lone ``**``) is escaped and shows as written, so any input gives a message
Telegram parses. Headings become bold lines, ``- `` / ``* `` bullets ``•``, tables ``a · b`` rows.

Splitting works on the Markdown, not on the converted text: each piece is converted on its own
and measured after conversion (in UTF-16 code units, as Telegram counts), so a piece never ends
inside an escape or an entity; a fenced code block cut in two is closed and reopened.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._markdown import BLANKS, SENTENCE_END, block_line

__all__ = ["MAX_TELEGRAM_TEXT", "split_telegram", "telegram_length", "to_telegram"]

MAX_TELEGRAM_TEXT = 4096
"""Characters in one Telegram message's text (captions take 1024)."""

_SPECIAL = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_CODE_SPECIAL = re.compile(r"([`\\])")
_URL_SPECIAL = re.compile(r"([)\\])")

_FENCE = re.compile(r"```(?P<lang>[^\n`]*)\n?(?P<block>[\s\S]*?)```")
_INLINE_CODE = re.compile(r"`(?P<inline>[^`\n]+)`")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!~|>])")
_URL = r"(?P<url>(?:[^()\s]|\([^()\s]*\))+)"  # one level of balanced parentheses (Wikipedia links)
_IMAGE = re.compile(r"!\[(?P<alt>[^\]\n]*)\]\(" + _URL + r"(?:\s+\"[^\"\n]*\")?\)")
_LINK = re.compile(r"\[(?P<label>[^\]\n]+)\]\(" + _URL + r"(?:\s+\"[^\"\n]*\")?\)")
_AUTOLINK = re.compile(r"<(?P<url>(?:https?|mailto):[^>\s]+)>")
_BULLET = re.compile(r"^(?P<indent>\s*)[-*+]\s+")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(?P<t>[^\n]+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(?P<t>[^\n]+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(?P<u>[^\n]+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)(?P<t>[^*\n]+?)(?<=\S)\*(?![*\w])|(?<!\w)_(?=\S)(?P<u>[^_\n]+?)(?<=\S)_(?!\w)")
_STRIKE = re.compile(r"~~(?=\S)(?P<t>[^\n]+?)(?<=\S)~~")

# Placeholders, chosen from control characters Markdown text does not carry (stripped from input).
_HELD = re.compile(r"\x00(\d+)\x00")
_HELD_SPLIT = re.compile(r"(\x00\d+\x00)")
_BOLD_MARK, _ITALIC_MARK, _STRIKE_MARK, _QUOTE_MARK = "\x01", "\x02", "\x03", "\x04"
_MARKS = {_BOLD_MARK: "*", _ITALIC_MARK: "_", _STRIKE_MARK: "~", _QUOTE_MARK: ">"}
_PLACEHOLDERS = re.compile(r"[\x00-\x04]")


def escape_text(text: str) -> str:
    """``text`` as literal MarkdownV2 text: every special character escaped."""
    return _SPECIAL.sub(r"\\\1", text)


def to_telegram(markdown: str) -> str:
    """Convert Markdown to Telegram MarkdownV2 (``parse_mode="MarkdownV2"``); always parseable."""
    held: list[str] = []

    def hold(text: str) -> str:
        held.append(text)
        return f"\x00{len(held) - 1}\x00"

    text = _PLACEHOLDERS.sub("", markdown.replace("\r\n", "\n"))
    text = _FENCE.sub(lambda m: hold(_pre(m.group("lang"), m.group("block"))), text)
    text = _INLINE_CODE.sub(lambda m: hold("`" + _CODE_SPECIAL.sub(r"\\\1", m.group("inline")) + "`"), text)
    text = _MD_ESCAPE.sub(lambda m: hold(escape_text(m.group(1))), text)
    text = _IMAGE.sub(lambda m: hold(_link(m.group("alt") or m.group("url"), m.group("url"))), text)
    text = _LINK.sub(lambda m: hold(_link(m.group("label"), m.group("url"))), text)
    text = _AUTOLINK.sub(lambda m: hold(escape_text(m.group("url"))), text)
    lines = [_block(line) for line in text.split("\n")]
    text = "\n".join(line for line in lines if line is not None)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}{_ITALIC_MARK}{m.group('t')}{_ITALIC_MARK}{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group('t') or m.group('u')}{_BOLD_MARK}", text)
    text = _ITALIC.sub(lambda m: f"{_ITALIC_MARK}{m.group('t') or m.group('u')}{_ITALIC_MARK}", text)
    text = _STRIKE.sub(lambda m: f"{_STRIKE_MARK}{m.group('t')}{_STRIKE_MARK}", text)
    text = escape_text(BLANKS.sub("\n\n", text).strip())
    for mark, marker in _MARKS.items():
        text = text.replace(mark, marker)
    while _HELD.search(text):  # a link label may hold another span's placeholder: two rounds at most
        text = _HELD.sub(lambda m: held[int(m.group(1))], text)
    return text


def _pre(lang: str, block: str) -> str:
    body = _CODE_SPECIAL.sub(r"\\\1", block.rstrip("\n"))
    lang = lang.strip()
    return f"```{lang}\n{body}\n```" if re.fullmatch(r"[\w+-]{1,32}", lang) else f"```\n{body}\n```"


def _link(label: str, url: str) -> str:
    """A link; its label may hold placeholders of spans held before (kept, the rest escaped)."""
    label = "".join(part if _HELD.fullmatch(part) else escape_text(part) for part in _HELD_SPLIT.split(label.strip()))
    label = label or escape_text(url)
    if not re.match(r"(?:https?|mailto|tg):", url):
        return f"{label} {escape_text(f'({url})')}"  # Telegram refuses relative or odd URLs
    escaped_url = _URL_SPECIAL.sub(r"\\\1", url)
    return f"[{label}]({escaped_url})"


def _block(line: str) -> str | None:
    return block_line(line, bold=_BOLD_MARK, bullet=_BULLET, bullet_mark="• ", quote=_QUOTE_MARK)


def telegram_length(text: str) -> int:
    """``text``'s length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


_SEPARATORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\n[ \t]*\n"), "\n\n"),
    (re.compile(r"\n"), "\n"),
    (SENTENCE_END, " "),
    (re.compile(r"[ \t]+"), " "),
]


def split_telegram(markdown: str, limit: int = MAX_TELEGRAM_TEXT) -> list[str]:
    """``markdown`` as MarkdownV2 messages of at most ``limit`` UTF-16 units each (none when empty).

    Breaks at paragraphs first, then lines, sentences and words; a word longer than a message is
    cut. Pieces are packed greedily. A fenced code block is kept whole when it fits, else its
    lines are spread over messages, each piece fenced again.
    """
    if limit < 16:
        raise ValueError("limit must be at least 16")
    whole = to_telegram(markdown)
    if telegram_length(whole) <= limit:
        return [whole] if whole else []

    def fits(piece: str) -> bool:
        return telegram_length(to_telegram(piece)) <= limit

    pieces = _pack(_blocks(markdown.replace("\r\n", "\n")), "\n\n", fits, limit)
    return [converted for converted in (to_telegram(piece) for piece in pieces) if converted]


def _blocks(markdown: str) -> list[str]:
    """Paragraphs, with each fenced code block one unit (its blank lines do not split it)."""
    units: list[str] = []
    last = 0
    for fence in _FENCE.finditer(markdown):
        units.extend(_SEPARATORS[0][0].split(markdown[last : fence.start()]))
        units.append(fence.group(0))
        last = fence.end()
    units.extend(_SEPARATORS[0][0].split(markdown[last:]))
    return [unit.strip("\n") for unit in units if unit.strip()]


def _pack(units: list[str], joiner: str, fits: Callable[[str], bool], limit: int, level: int = 0) -> list[str]:
    pieces: list[str] = []
    current = ""
    for unit in units:
        candidate = f"{current}{joiner}{unit}" if current else unit
        if fits(candidate):
            current = candidate
            continue
        if current:
            pieces.append(current)
        if fits(unit):
            current = unit
        else:
            pieces.extend(_smaller(unit, fits, limit, level))
            current = ""
    if current:
        pieces.append(current)
    return pieces


def _smaller(unit: str, fits: Callable[[str], bool], limit: int, level: int) -> list[str]:
    """``unit`` (too long for one message) in pieces that fit."""
    fence = _FENCE.fullmatch(unit)
    if fence:
        lang = fence.group("lang").strip()
        lines = fence.group("block").rstrip("\n").split("\n")

        def wrap(body: str) -> str:
            return f"```{lang}\n{body}\n```"

        out: list[str] = []
        for line in lines:
            if out and fits(wrap(f"{out[-1]}\n{line}")):
                out[-1] = f"{out[-1]}\n{line}"
            elif fits(wrap(line)):
                out.append(line)
            else:
                out.extend(_cut(line, lambda part: fits(wrap(part))))
        return [wrap(body) for body in out]
    for next_level in range(max(level, 1), len(_SEPARATORS)):
        pattern, joiner = _SEPARATORS[next_level]
        parts = [part for part in pattern.split(unit) if part]
        if len(parts) > 1:
            return _pack(parts, joiner, fits, limit, next_level + 1)
    return _cut(unit, fits)


def _cut(text: str, fits: Callable[[str], bool]) -> list[str]:
    """Hard cuts of ``text``, each the longest prefix that fits (never after a lone backslash)."""
    pieces: list[str] = []
    while text:
        low, high = 1, len(text)
        while low < high:  # the longest prefix that fits: conversion only grows with length
            middle = (low + high + 1) // 2
            if fits(text[:middle]):
                low = middle
            else:
                high = middle - 1
        end = low
        while end > 1 and text[end - 1] == "\\":
            end -= 1
        pieces.append(text[:end])
        text = text[end:]
    return pieces
