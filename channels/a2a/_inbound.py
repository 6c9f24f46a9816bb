"""What a caller's A2A message means: the text of a turn, or the answer to an approval."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a.types import Message
from a2a.utils.errors import InvalidParamsError

from tools import UiFormat

from ._proto import to_json

__all__ = ["MAX_TURN_TEXT", "Decision", "OutputModes", "inline_files", "read_decision", "turn_text"]

MAX_TURN_TEXT = 32_000

# Approval needs the whole message to be a yes ("Okay, what does it do?" is a question); a
# rejection may carry a reason after its first word ("no, not now").
_YES = re.compile(
    r"^\s*(yes|y|yep|ok|okay|sure|approve|approved|confirm|confirmed|go ahead|do it|sim)(\s+please)?\s*[.!]*\s*$",
    re.I,
)
_NO = re.compile(r"^\s*(no|n|nope|reject|rejected|deny|denied|cancel|stop|don'?t|não|nao)\b", re.I)


def _plain(value: Any) -> Any:
    """JSON from a protobuf ``Value`` with whole numbers as ints (``Value`` keeps every number a double)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def inline_files(message: Message) -> list[tuple[str, str, bytes]]:
    """The message's file parts with inline bytes (``raw``), as ``(filename, media type, bytes)``.

    They become the turn's attachments. A file by URL is never fetched: it stays a link in the text.
    """
    return [
        (part.filename, part.media_type, bytes(part.raw))
        for part in message.parts
        if part.WhichOneof("content") == "raw"
    ]


def turn_text(message: Message, *, files_attached: bool = False) -> str:
    """The text a message gives the agent: its text parts, data parts as JSON, files as links.

    With ``files_attached`` (its inline files are the turn's attachments) those files are left
    out of the text, and a message of files alone is accepted.

    Raises:
        InvalidParamsError: Nothing to say, or more than ``MAX_TURN_TEXT`` characters.
    """
    pieces: list[str] = []
    for part in message.parts:
        match part.WhichOneof("content"):
            case "text":
                pieces.append(part.text)
            case "data":
                pieces.append(json.dumps(_plain(to_json(part.data)), ensure_ascii=False, separators=(",", ":")))
            case "url":
                pieces.append(f"[{part.filename or 'file'}]({part.url})")
            case "raw" if not files_attached:
                pieces.append(f"[{part.filename or 'file'}: {part.media_type or 'bytes'}, not read]")
    text = "\n".join(p for p in pieces if p.strip())
    if not text.strip() and not files_attached:
        raise InvalidParamsError(message="The message has no text")
    if len(text) > MAX_TURN_TEXT:
        raise InvalidParamsError(message=f"The message is longer than {MAX_TURN_TEXT} characters")
    return text


@dataclass(frozen=True, kw_only=True)
class Decision:
    """A caller's answer to an approval."""

    approve: bool
    reason: str | None = None
    tool_call_id: str | None = None
    """Which approval, when the caller names it (the oldest pending one otherwise)."""
    remember: bool = False
    """Also approve later calls of the same tool in the context (``ApprovalPolicy.allow_remember``)."""


def read_decision(message: Message) -> Decision:
    """The answer a message gives: a data part ``{approved: bool}`` or a text yes / no.

    A data part may also carry ``reason``, ``toolCallId`` and ``remember`` (with an approval: also
    approve later calls of the tool in the context, where the policy allows it).

    Raises:
        InvalidParamsError: The message answers neither way.
    """
    texts: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "data":
            data = to_json(part.data)
            if isinstance(data, dict) and isinstance(data.get("approved"), bool):
                reason = data.get("reason")
                call = data.get("toolCallId", data.get("tool_call_id"))
                remember = data.get("remember", False)
                if not isinstance(remember, bool):
                    raise InvalidParamsError(message="remember, when given, is true or false")
                return Decision(
                    approve=data["approved"],
                    reason=reason[:500] if isinstance(reason, str) and reason else None,
                    tool_call_id=call if isinstance(call, str) and call else None,
                    remember=remember and data["approved"],
                )
        elif kind == "text":
            texts.append(part.text)
    text = " ".join(texts)
    if _YES.match(text):
        return Decision(approve=True)
    no = _NO.match(text)
    if no:
        # "no, not now" gives the reason "not now"; a bare "no" gives none (not the word "no").
        reason = text[no.end() :].strip(" \t\n,.;:-!")
        return Decision(approve=False, reason=reason[:500] or None)
    raise InvalidParamsError(
        message='The task waits for an approval: answer with a data part {"approved": true} or '
        '{"approved": false}, or the text yes or no'
    )


@dataclass(frozen=True, kw_only=True)
class OutputModes:
    """What a caller's ``acceptedOutputModes`` let us send.

    An empty list accepts text and JSON only: images and PDFs are sent to callers that ask.
    """

    json: bool
    """Components as data parts (else as their text form)."""
    formats: tuple[UiFormat, ...]
    """Rendered files besides: ``"image"`` (PNG) and ``"pdf"``."""

    @classmethod
    def parse(cls, modes: Sequence[str], *, media: bool) -> OutputModes:
        """Read ``acceptedOutputModes`` (media types, wildcards allowed)."""
        accepted = {m.split(";")[0].strip().lower() for m in modes}
        json_ok = not accepted or bool(accepted & {"application/json", "application/*", "*/*"})
        formats: list[UiFormat] = []
        if media and accepted & {"image/png", "image/*", "*/*"}:
            formats.append("image")
        if media and accepted & {"application/pdf", "application/*", "*/*"}:
            formats.append("pdf")
        return cls(json=json_ok, formats=tuple(formats))
