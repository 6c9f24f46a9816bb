"""The generic rule: drive any app's tools from the words of a message, offline.

The demo model knows the demo's phrasings; an app's own tools it only knows as the model sees
them (``ToolDefinition``: a name, a description, a JSON schema, a kind). So it matches words:

1. **Which tool.** The words of the message (stop words left out, a plural read as its
   singular) against the words of each tool's name, split on ``_``: the most words in common
   wins, a ``read`` tool before an ``action`` on a tie, then the first offered. No word in
   common, no tool. The presentation label would add words, but it never reaches a model
   (``ToolPresentation`` is for people), so the name in words stands for it, here and in the
   greeting.
2. **Which arguments**, from the schema's required properties, in schema order:

   | property                                 | taken from                                       |
   |------------------------------------------|--------------------------------------------------|
   | ``integer`` / ``number``                 | the next unused number of the message            |
   | string named ``…id`` / ``…number``       | the next unused token with a digit in it         |
   | ``enum`` (required or optional)          | a word of the message equal to one of its values |
   | any other string                         | the rest of the text after the matched words     |

   Optional properties are left out (but an enum value the person said is used). A required
   one that cannot be filled is asked for in words: "Which order id?".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools import ToolDefinition, humanize_tool_name

from ..models import ToolCallRequest

__all__ = ["QUESTION", "plan_tool_call"]

QUESTION = re.compile(r"^Which [^?\n]{1,80}\?")
"""How every question of this model for a missing value starts: the next message may answer it."""

_WORD = re.compile(r"[^\W\d_]+")
_TOKEN = re.compile(r"\S+")
_EDGE = ".,;:!?()[]{}<>\"'#*"
_INTEGER = re.compile(r"[-+]?\d+")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_STOP = frozenset(
    """
    a an the my me i you your we our us it its this that these those there here
    is are was were be been am do does did can could would will should shall may might must
    of for to in on at by with from into about as and or but so if then than just also
    what whats which who how when where why please thanks thank some any want need like let
    hi hello hey help olá ola oi yes no ok okay
    """.split()
)


def _stem(word: str) -> str:
    """A word's singular, roughly: ``orders`` -> ``order``, ``entries`` -> ``entry``."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text: str) -> set[str]:
    # One letter is never a tool's word: the "s" of "what's", the "m" of "I'm".
    return {_stem(w) for w in (m.lower() for m in _WORD.findall(text)) if len(w) > 1 and w not in _STOP}


def _name_words(tool: ToolDefinition) -> set[str]:
    return _words(humanize_tool_name(tool.name))


def _best_tool(text: str, tools: Iterable[ToolDefinition]) -> tuple[ToolDefinition, set[str]] | None:
    said = _words(text)
    best: tuple[ToolDefinition, set[str]] | None = None
    best_key = (0, False)
    for tool in tools:
        hits = said & _name_words(tool)
        key = (len(hits), tool.kind == "read")
        if hits and key > best_key:  # strictly better: the first offered wins a full tie
            best, best_key = (tool, hits), key
    return best


# -- the schema ------------------------------------------------------------------------------------


def _shape(prop: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """``(type, enum values)`` of a JSON schema property; ``Optional[X]`` reads as ``X``."""
    if isinstance(prop.get("enum"), list):
        return "enum", list(prop["enum"])
    if "const" in prop:
        return "enum", [prop["const"]]
    for branch in prop.get("anyOf") or prop.get("oneOf") or ():
        if isinstance(branch, Mapping) and branch.get("type") != "null":
            return _shape(branch)
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return (kind if isinstance(kind, str) else "other"), []


def _properties(schema: Mapping[str, Any]) -> tuple[dict[str, Mapping[str, Any]], set[str]]:
    props = schema.get("properties")
    required = schema.get("required")
    return (
        {k: v for k, v in props.items() if isinstance(v, Mapping)} if isinstance(props, Mapping) else {},
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set(),
    )


def _is_id(name: str) -> bool:
    return name.lower().endswith(("id", "number"))


# -- filling the arguments -------------------------------------------------------------------------


@dataclass
class _Tokens:
    """The message's whitespace tokens, each used for one argument at most."""

    text: str
    tokens: list[str] = field(init=False)
    used: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.tokens = [t.strip(_EDGE) for t in _TOKEN.findall(self.text)]

    def take(self, wanted: re.Pattern[str] | None) -> str | None:
        """The next unused token that ``wanted`` matches whole (any with a digit when ``None``)."""
        for index, token in enumerate(self.tokens):
            if index in self.used or not token:
                continue
            if wanted.fullmatch(token) if wanted is not None else any(c.isdigit() for c in token):
                self.used.add(index)
                return token
        return None

    def take_enum(self, values: Sequence[Any]) -> Any:
        """The enum value an unused token names (case and a plural aside), else ``None``."""
        by_word = {_stem(str(v).lower()): v for v in values}
        for index, token in enumerate(self.tokens):
            value = by_word.get(_stem(token.lower()), _NOTHING)
            if index not in self.used and value is not _NOTHING:
                self.used.add(index)
                return value
        return None

    def rest_after(self, hits: set[str]) -> str:
        """The text after the last matched word, without the tokens other arguments took."""
        end = 0
        for match in _WORD.finditer(self.text):
            if _stem(match.group().lower()) in hits:
                end = match.end()
        # Token offsets, to drop the used ones from what follows the matched words.
        kept = []
        for index, match in enumerate(_TOKEN.finditer(self.text)):
            if match.end() > end and index not in self.used:
                kept.append(self.text[max(match.start(), end) : match.end()])
        while kept and kept[0].strip(_EDGE).lower() in _STOP:
            kept.pop(0)
        return " ".join(kept).strip(" \t\n" + _EDGE)


_NOTHING = object()


def _question(name: str, prop: Mapping[str, Any]) -> str:
    words = humanize_tool_name(name).lower()
    kind, values = _shape(prop)
    if kind == "enum" and values:
        options = [str(v) for v in values]
        listed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
        return f"Which {words}: {listed}?"
    return f"Which {words}?"


def _fill(tool: ToolDefinition, text: str, hits: set[str]) -> dict[str, Any] | str:
    """The arguments for ``tool`` from ``text``, or the question for the first one missing."""
    props, required = _properties(tool.parameters)
    tokens = _Tokens(text)
    args: dict[str, Any] = {}
    from_rest: list[str] = []
    for name, prop in props.items():
        kind, values = _shape(prop)
        if kind == "enum":
            value = tokens.take_enum(values)
            if value is not None:
                args[name] = value
        elif name not in required:
            continue
        elif kind == "integer" and (number := tokens.take(_INTEGER)) is not None:
            args[name] = int(number)
        elif kind == "number" and (number := tokens.take(_NUMBER)) is not None:
            args[name] = float(number) if "." in number else int(number)
        elif kind == "string" and _is_id(name):
            if (token := tokens.take(None)) is not None:
                args[name] = token
        elif kind == "string":
            from_rest.append(name)
    # Last, so the rest is what the numbers, ids and enum values left over.
    if from_rest and (rest := tokens.rest_after(hits)):
        args[from_rest[0]] = rest
    for name, prop in props.items():
        if name in required and name not in args:
            return _question(name, prop)
    return args


def plan_tool_call(text: str, tools: Sequence[ToolDefinition]) -> ToolCallRequest | str | None:
    """The call of the offered tool ``text`` names best, the question for a missing value, or ``None``."""
    found = _best_tool(text, tools)
    if found is None:
        return None
    tool, hits = found
    args = _fill(tool, text, hits)
    if isinstance(args, str):
        return args
    return ToolCallRequest(name=tool.name, args=args)
