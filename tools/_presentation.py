"""How a chat words a tool: presentation templates, result views and confirmations.

A tool's name is an identifier, not copy. ``ToolPresentation`` declares the words a channel uses
instead; the server fills them so every channel, WhatsApp included, words a call the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter

from ._models import PositionalModel
from ._template import fill_template, read_path

__all__ = [
    "DEFAULT_CONFIRM_VERB",
    "DEFAULT_DONE_TEXT",
    "DEFAULT_RUNNING_TEXT",
    "ConfirmTemplate",
    "Confirmation",
    "ElsewhereView",
    "LogView",
    "MetricsView",
    "NoteView",
    "ResultField",
    "ResultView",
    "TableView",
    "ToolPresentation",
    "fill_result_view",
    "humanize_tool_name",
    "narrate_done",
    "narrate_running",
    "resolve_confirmation",
]

DEFAULT_CONFIRM_VERB = "Approve"
"""The approve button's word when a tool declares none."""
DEFAULT_RUNNING_TEXT = "Working"
"""Narration of a running call whose tool declares no ``running`` template."""
DEFAULT_DONE_TEXT = "Done"
"""Narration of a finished call whose tool declares no ``done`` template."""

_MAX_RESULT_ROWS = 50
_MAX_LOG_LINES = 200


class _Strict(PositionalModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfirmTemplate(_Strict):
    """The approval prompt of an action, as templates over the call's input."""

    title: StrictStr
    """E.g. ``"Purge {key}?"``."""
    verb: StrictStr = DEFAULT_CONFIRM_VERB
    """The approve button's word, e.g. ``"Purge"``."""
    detail: StrictStr | None = None
    """One more line under the title."""


class Confirmation(_Strict):
    """A filled approval prompt: what a person reads before deciding."""

    title: str
    verb: str = DEFAULT_CONFIRM_VERB
    detail: str | None = None


class ResultField(_Strict):
    """One facet of a result: a dotted ``path`` into the output and its ``label``."""

    path: StrictStr
    label: StrictStr
    unit: StrictStr | None = None


class MetricsView(_Strict):
    """One result, several facets: ``Evicted: 3``."""

    kind: Literal["metrics"] = "metrics"
    fields: list[ResultField]


class TableView(_Strict):
    """A list in the output shown as a table: ``rows`` is the path to the list."""

    kind: Literal["table"] = "table"
    columns: list[ResultField]
    rows: StrictStr
    empty: StrictStr | None = None


class LogView(_Strict):
    """Lines of text: ``lines`` is the path to a list of strings."""

    kind: Literal["log"] = "log"
    lines: StrictStr


class NoteView(_Strict):
    """One sentence, a template over the output."""

    kind: Literal["note"] = "note"
    text: StrictStr


class ElsewhereView(_Strict):
    """The result is drawn elsewhere already (a component); say nothing more."""

    kind: Literal["elsewhere"] = "elsewhere"


ResultView = Annotated[MetricsView | TableView | LogView | NoteView | ElsewhereView, Field(discriminator="kind")]
"""How a tool's output reads, filled on the server into ``tool-completed.result``."""


class ToolPresentation(BaseModel):
    """The words a chat uses for a tool; never shown to the model.

    ``running``, ``done`` and the ``confirm`` texts are templates over the call's input;
    ``result`` reads the output.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: StrictStr | None = None
    """Noun phrase for headings and counts: ``"Cache purge"``."""
    running: StrictStr | None = None
    """While the call runs: ``"Purging {key}"``."""
    done: StrictStr | None = None
    """Once it settled: ``"Purged {key}"``."""
    icon: StrictStr | None = None
    """A key into the client's own glyph map."""
    detail: StrictStr | None = None
    """One line naming what the tool reaches."""
    tone: Literal["neutral", "destructive"] | None = None
    """``destructive`` earns the warning treatment on the approval prompt."""
    confirm: ConfirmTemplate | None = None
    """The approval prompt of an action call."""
    result: ResultView | None = None
    """How the output reads."""


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def humanize_tool_name(name: str) -> str:
    """Turn an identifier into words: ``refund_order`` and ``refundOrder`` -> ``"Refund order"``.

    Acronyms keep their capitals (``SQLQuery`` -> ``"SQL query"``).
    """
    if not isinstance(name, str):
        raise TypeError(f"humanize_tool_name() needs a str, not {type(name).__name__}")
    words = [w for w in re.split(r"[_\-\s.]+", _CAMEL_BOUNDARY.sub(" ", name)) if w]
    if not words:
        return name
    out = [w if (w.isupper() and len(w) > 1) else w.lower() for w in words]
    out[0] = out[0][:1].upper() + out[0][1:]
    return " ".join(out)


_CONFIRMATION = TypeAdapter(Confirmation)
_RESULT_VIEW: TypeAdapter[MetricsView | TableView | LogView | NoteView | ElsewhereView] = TypeAdapter(ResultView)


def _preflight_confirmation(preflight: Any) -> Confirmation | None:
    if preflight is None:
        return None
    if isinstance(preflight, Confirmation):
        return preflight
    confirmation = getattr(preflight, "confirmation", None)
    if confirmation is None and isinstance(preflight, Mapping):
        confirmation = preflight.get("confirmation", preflight if "title" in preflight else None)
    if confirmation is None:
        return None
    if isinstance(confirmation, Confirmation):
        return confirmation
    return _CONFIRMATION.validate_python(confirmation)


def _as_presentation(value: object, where: str) -> ToolPresentation | None:
    # The catalog hands presentations out as dicts; accept that form, refuse anything else clearly.
    if value is None or isinstance(value, ToolPresentation):
        return value
    if isinstance(value, Mapping):
        return ToolPresentation.model_validate(value)
    raise TypeError(f"{where}: presentation must be a ToolPresentation, its dict form or None, not {value!r}")


def resolve_confirmation(
    tool_name: str,
    input: Any,
    presentation: ToolPresentation | Mapping[str, Any] | None = None,
    preflight: Any = None,
) -> Confirmation:
    """The words of an approval prompt for one call.

    Priority: a preflight's confirmation (plain strings, used as given); else the tool's
    ``confirm`` templates filled from ``input``; else ``"<label>?"``; else ``"<humanized name>?"``.
    The verb defaults to ``DEFAULT_CONFIRM_VERB``.

    Args:
        tool_name: The tool's identifier.
        input: The call's (validated) input.
        presentation: The tool's presentation (or its dict form), if any.
        preflight: A ``PreflightReady`` (or its dict form, or a ``Confirmation``) from the prepare
            phase; its confirmation wins when present.

    Raises:
        TypeError: ``tool_name`` is not a str, or ``presentation`` is not a presentation.
    """
    if not isinstance(tool_name, str):
        raise TypeError(f"resolve_confirmation() needs a str tool_name, not {tool_name!r}")
    presentation = _as_presentation(presentation, "resolve_confirmation()")
    from_preflight = _preflight_confirmation(preflight)
    if from_preflight is not None:
        return from_preflight
    fallback_title = f"{presentation.label}?" if presentation and presentation.label else None
    fallback_title = fallback_title or f"{humanize_tool_name(tool_name)}?"
    if presentation is not None and presentation.confirm is not None:
        confirm = presentation.confirm
        title = fill_template(confirm.title, input) or fallback_title
        verb = fill_template(confirm.verb, input) or DEFAULT_CONFIRM_VERB
        detail = fill_template(confirm.detail, input) if confirm.detail is not None else None
        return Confirmation(title=title, verb=verb, detail=detail or None)
    return Confirmation(title=fallback_title, verb=DEFAULT_CONFIRM_VERB)


def narrate_running(presentation: ToolPresentation | Mapping[str, Any] | None, input: Any) -> str:
    """The line shown while a call runs: the filled ``running`` template, else ``"Working"``."""
    presentation = _as_presentation(presentation, "narrate_running()")
    if presentation is not None and presentation.running:
        return fill_template(presentation.running, input) or DEFAULT_RUNNING_TEXT
    return DEFAULT_RUNNING_TEXT


def narrate_done(presentation: ToolPresentation | Mapping[str, Any] | None, input: Any) -> str:
    """The line shown once a call settled: the filled ``done`` template, else ``"Done"``."""
    presentation = _as_presentation(presentation, "narrate_done()")
    if presentation is not None and presentation.done:
        return fill_template(presentation.done, input) or DEFAULT_DONE_TEXT
    return DEFAULT_DONE_TEXT


def _cell(value: Any, unit: str | None) -> str:
    text = fill_template("{v}", {"v": value})
    return f"{text} {unit}" if text and unit else text


def _as_result_view(view: object) -> MetricsView | TableView | LogView | NoteView | ElsewhereView | None:
    # Anything unknown used to fall through to "elsewhere", silently hiding the result.
    if view is None or isinstance(view, MetricsView | TableView | LogView | NoteView | ElsewhereView):
        return view
    if isinstance(view, Mapping):
        return _RESULT_VIEW.validate_python(view)
    raise TypeError(f"fill_result_view() needs a result view, not {type(view).__name__}")


def fill_result_view(view: ResultView | Mapping[str, Any] | None, output: Any) -> dict[str, Any] | None:
    """Fill a result view over a tool's output into plain JSON a channel can show.

    Shapes: ``{"kind": "metrics", "items": [{"label", "value"}]}``,
    ``{"kind": "table", "columns": [...], "rows": [[...]], "more": n, "empty": str | None}``,
    ``{"kind": "log", "lines": [...]}``, ``{"kind": "note", "text": str}``,
    ``{"kind": "elsewhere"}``; ``None`` without a view. Never raises on odd output.

    Raises:
        TypeError: ``view`` is neither a result view nor its dict form.
        pydantic.ValidationError: ``view`` is a dict that is not a valid result view.
    """
    match _as_result_view(view):
        case None:
            return None
        case MetricsView(fields=fields):
            items = [{"label": f.label, "value": _cell(read_path(output, f.path), f.unit)} for f in fields]
            return {"kind": "metrics", "items": items}
        case TableView(columns=columns, rows=rows_path, empty=empty):
            rows = read_path(output, rows_path)
            if not isinstance(rows, Sequence) or isinstance(rows, str | bytes):
                rows = []
            body = [[_cell(read_path(row, c.path), c.unit) for c in columns] for row in rows[:_MAX_RESULT_ROWS]]
            return {
                "kind": "table",
                "columns": [c.label for c in columns],
                "rows": body,
                "more": max(0, len(rows) - _MAX_RESULT_ROWS),
                "empty": empty if not body else None,
            }
        case LogView(lines=lines_path):
            lines = read_path(output, lines_path)
            if not isinstance(lines, Sequence) or isinstance(lines, str | bytes):
                lines = [lines] if isinstance(lines, str) else []
            return {"kind": "log", "lines": [_cell(line, None) for line in lines[:_MAX_LOG_LINES]]}
        case NoteView(text=text):
            return {"kind": "note", "text": fill_template(text, output)}
        case _:
            return {"kind": "elsewhere"}
