"""``Checklist`` (items done or not) and ``Timeline`` (dated events in order)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from renderers._formats import format_value
from renderers._props import ComponentProps, at_most
from renderers._textform import bold

__all__ = [
    "ChecklistItem",
    "ChecklistProps",
    "TimelineItem",
    "TimelineProps",
    "checklist_context",
    "checklist_text",
    "timeline_context",
    "timeline_text",
]

MAX_ITEMS = 200


class ChecklistItem(ComponentProps):
    """One line of a checklist."""

    text: str = Field(max_length=2_000)
    done: bool = False


class ChecklistProps(ComponentProps):
    """Props of ``Checklist``: ``{title?, items: [{text, done}]}``."""

    title: str | None = Field(default=None, max_length=300)
    items: Annotated[list[ChecklistItem], Field(min_length=1, max_length=MAX_ITEMS), at_most(MAX_ITEMS)]


def checklist_context(props: ChecklistProps) -> dict[str, Any]:
    """Template variables of ``Checklist``: how many are done, and the share as a percentage."""
    done = sum(1 for item in props.items if item.done)
    return {"done": done, "total": len(props.items), "percent": round(100 * done / len(props.items))}


def checklist_text(props: ChecklistProps) -> str:
    """Text form of ``Checklist``: ``[x]`` / ``[ ]`` lines under the title and the count."""
    context = checklist_context(props)
    head = f"{bold(props.title)} ({context['done']}/{context['total']})" if props.title else None
    lines = [f"[{'x' if item.done else ' '}] {item.text.strip()}" for item in props.items]
    return "\n".join([head, *lines] if head else lines)


class TimelineItem(ComponentProps):
    """One event: when, what, and optionally more words."""

    at: str = Field(max_length=100)
    """When: ISO dates and times are shown as ``Mar 5, 2024, 14:30``; other text as given."""
    title: str = Field(max_length=300)
    text: str | None = Field(default=None, max_length=5_000)


class TimelineProps(ComponentProps):
    """Props of ``Timeline``: ``{items: [{at, title, text?}]}``, in the order given."""

    title: str | None = Field(default=None, max_length=300)
    items: Annotated[list[TimelineItem], Field(min_length=1, max_length=MAX_ITEMS), at_most(MAX_ITEMS)]


def timeline_context(props: TimelineProps) -> dict[str, Any]:
    """Template variables of ``Timeline``: each ``at`` formatted."""
    return {"when": [format_value(item.at, "date") for item in props.items]}


def timeline_text(props: TimelineProps) -> str:
    """Text form of ``Timeline``: a bullet per event, its text indented below."""
    lines = [bold(props.title)] if props.title else []
    for item, when in zip(props.items, timeline_context(props)["when"], strict=True):
        lines.append(f"• {when} — {bold(item.title)}")
        if item.text and item.text.strip():
            lines.extend(f"  {line}" for line in item.text.strip().splitlines())
    return "\n".join(lines)
