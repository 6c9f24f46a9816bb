"""Markdown (what models write) to each text channel's formatting, and splitting long text.

``to_whatsapp`` writes WhatsApp's markup; ``to_plain`` drops the markup for channels that show
text as it is; Telegram's MarkdownV2 is ``to_telegram`` (``gateway._push._mdv2``). ``split_message``
cuts any of them into messages of a channel's length.

WhatsApp reads ``*bold*``, ``_italic_``, ``~strike~``, inline ```code``` with backticks, code
blocks between triple backticks, ``- `` bullets, ``1. `` numbered lists and ``> `` quotes. It has
no headings, links with labels or tables, so those become bold lines, ``label (url)`` and
``a · b`` rows.
"""

from __future__ import annotations

import re

__all__ = ["split_message", "to_plain", "to_whatsapp"]

_CODE = re.compile(r"```[^\n`]*\n?(?P<block>[\s\S]*?)```|`(?P<inline>[^`\n]+)`")
_HOLD = "\x00{}\x00"
_HELD = re.compile(r"\x00(\d+)\x00")

_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<url>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_LINK = re.compile(r"\[(?P<label>[^\]]+)\]\((?P<url>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_AUTOLINK = re.compile(r"<(?P<url>(?:https?|mailto):[^>\s]+)>")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.*?)\s*#*\s*$")
RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
QUOTE = re.compile(r"^\s{0,3}>\s?(?P<text>.*)$")
BLANKS = re.compile(r"\n{3,}")
SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
"""The block rules every target shares (its converter uses them through ``block_line``)."""
_BULLET = re.compile(r"^(?P<indent>\s*)[*+]\s+")
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(?P<t>.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(?P<t>.+?)(?<=\S)\*\*|(?<!\w)__(?=\S)(?P<u>.+?)(?<=\S)__(?!\w)")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)(?P<t>[^*\n]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(?P<t>.+?)(?<=\S)~~")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!~|>])")
_BOLD_MARK = "\x01"


def to_whatsapp(markdown: str) -> str:
    """Convert Markdown to WhatsApp formatting. Code spans and blocks are kept verbatim."""
    held: list[str] = []

    def hold(match: re.Match[str]) -> str:
        if match.group("block") is not None:
            held.append("```" + match.group("block").rstrip("\n") + "```")
        else:
            held.append("`" + match.group("inline") + "`")
        return _HOLD.format(len(held) - 1)

    text = _CODE.sub(hold, markdown.replace("\r\n", "\n"))
    lines = [block_line(line, bold=_BOLD_MARK, bullet=_BULLET, bullet_mark="- ") for line in text.split("\n")]
    text = "\n".join(line for line in lines if line is not None)
    text = _inline(text)
    text = BLANKS.sub("\n\n", text).strip()
    return _HELD.sub(lambda m: held[int(m.group(1))], text)


def block_line(
    line: str, *, bold: str, bullet: re.Pattern[str], bullet_mark: str, quote: str | None = None
) -> str | None:
    """Block-level conversion of one Markdown line; ``None`` drops it.

    Headings become ``bold``-marked lines, rules blank lines, table rows ``a · b`` (their rule
    lines dropped), bullets that ``bullet`` matches ``bullet_mark``; with ``quote``, a ``> ``
    quote is marked with it.
    """
    line = line.rstrip()
    if "|" in line and TABLE_RULE.match(line):
        return None
    if RULE.match(line):
        return ""
    if heading := HEADING.match(line):
        title = heading.group("text").replace("**", "").replace("__", "")
        return f"{bold}{title}{bold}" if title else ""
    if quote is not None and (quoted := QUOTE.match(line)):
        return f"{quote}{quoted.group('text')}"
    stripped = line.strip()
    if stripped.startswith("|") and stripped.endswith("|") and stripped.count("|") >= 2:
        cells = [cell.strip() for cell in stripped.strip("|").split("|")]
        return " · ".join(cell for cell in cells if cell)
    return bullet.sub(lambda m: f"{m.group('indent')}{bullet_mark}", line)


def _inline(text: str) -> str:
    text = _IMAGE.sub(lambda m: f"{m.group('alt')} ({m.group('url')})" if m.group("alt") else m.group("url"), text)
    text = _LINK.sub(_link, text)
    text = _AUTOLINK.sub(lambda m: m.group("url"), text)
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group('t')}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group('t') or m.group('u')}{_BOLD_MARK}", text)
    text = _ITALIC.sub(lambda m: f"_{m.group('t')}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group('t')}~", text)
    text = _ESCAPE.sub(lambda m: m.group(1), text)
    return text.replace(_BOLD_MARK, "*")


def to_plain(markdown: str) -> str:
    """Markdown as plain text: WhatsApp's form without the marks around words and code."""
    pieces = _CODE_OUT.split(to_whatsapp(markdown))
    for index, piece in enumerate(pieces):
        if index % 2:
            pieces[index] = piece.strip("`")
        else:
            pieces[index] = _MARKS.sub(lambda m: m.group("t"), piece)
    return "".join(pieces)


_CODE_OUT = re.compile(r"(```[\s\S]*?```|`[^`\n]+`)")
_MARKS = re.compile(r"(?<!\w)([*_~])(?=\S)(?P<t>[^\n]+?)(?<=\S)\1(?!\w)")


def _link(match: re.Match[str]) -> str:
    label, url = match.group("label").strip(), match.group("url")
    bare = url.removeprefix("mailto:")
    if label in (url, bare) or label.rstrip("/") == url.split("://", 1)[-1].rstrip("/"):
        return url
    return f"{label} ({url})"


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into bodies of at most ``limit`` characters.

    Breaks at paragraphs first, then lines, then sentences, then words; a single word longer
    than ``limit`` is cut. Pieces are packed greedily, so the number of messages stays small.
    Empty text gives no messages.
    """
    if limit < 1:
        raise ValueError("limit must be positive")
    text = text.strip()
    if not text:
        return []
    return [piece for piece in (p.strip() for p in _split(text, limit, 0)) if piece]


_SEPARATORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\n\s*\n"), "\n\n"),
    (re.compile(r"\n"), "\n"),
    (SENTENCE_END, " "),
    (re.compile(r"\s+"), " "),
]


def _split(text: str, limit: int, level: int) -> list[str]:
    if len(text) <= limit:
        return [text]
    if level >= len(_SEPARATORS):
        return [text[i : i + limit] for i in range(0, len(text), limit)]
    pattern, joiner = _SEPARATORS[level]
    units: list[str] = []
    for unit in pattern.split(text):
        units.extend(_split(unit, limit, level + 1) if len(unit) > limit else [unit])
    pieces: list[str] = []
    current = ""
    for unit in units:
        if not unit:
            continue
        candidate = f"{current}{joiner}{unit}" if current else unit
        if len(candidate) <= limit:
            current = candidate
        else:
            pieces.append(current)
            current = unit
    if current:
        pieces.append(current)
    return pieces
