"""A2A parts and messages for what a run shows: text, components, approval prompts."""

from __future__ import annotations

import logging
from typing import Any

from a2a.types import Message, Part, Role

from gateway import ChannelServices
from gateway.events import ApprovalRequestedEvent, UiEvent
from tools import UiCapabilities

from ._inbound import OutputModes
from ._proto import json_struct, json_value

__all__ = ["JSON_MEDIA_TYPE", "UiParts", "agent_message", "approval_message", "data_part", "struct"]

logger = logging.getLogger("channels.a2a")

JSON_MEDIA_TYPE = "application/json"


def struct(values: dict[str, Any]) -> Any:
    """A protobuf ``Struct`` of a JSON object (``None`` values dropped)."""
    return json_struct({k: v for k, v in values.items() if v is not None})


def data_part(data: Any) -> Part:
    """A data part of JSON ``data`` (``mediaType`` ``application/json``)."""
    return Part(data=json_value(data), media_type=JSON_MEDIA_TYPE)


def agent_message(message_id: str, task_id: str, context_id: str, parts: list[Part]) -> Message:
    """A message from the agent on a task."""
    return Message(message_id=message_id, task_id=task_id, context_id=context_id, role=Role.ROLE_AGENT, parts=parts)


def approval_message(event: ApprovalRequestedEvent, task_id: str, context_id: str) -> Message:
    """The prompt of an approval: the filled confirmation as text and as a data part.

    The caller answers with a message on the same task: ``{"approved": true|false}`` or yes / no.
    """
    confirmation = event.confirmation
    lines = [confirmation.title]
    if confirmation.detail:
        lines.append(confirmation.detail)
    lines.append(f"Reply yes to {confirmation.verb.lower()}, or no.")
    data = {
        "type": "approval-requested",
        "toolCallId": event.tool_call_id,
        "tool": event.tool,
        "input": event.input,
        "confirmation": confirmation.model_dump(exclude_none=True),
        "tone": event.tone,
        "approver": event.approver,
        "expiresAt": event.expires_at,
    }
    parts = [Part(text="\n".join(lines)), data_part({k: v for k, v in data.items() if v is not None})]
    return agent_message(f"approval-{event.tool_call_id}", task_id, context_id, parts)


class UiParts:
    """Turns ``ui`` events into parts for one caller's output modes.

    Components are data parts (their props) plus a PNG or PDF file part when the caller accepts
    it; a caller that takes no JSON gets the component's text. Rendered media URLs are kept in
    the store's channel state for half their lifetime, so reading a task again renders nothing.
    """

    def __init__(self, services: ChannelServices, *, media: bool) -> None:
        self.services = services
        self.media = media

    def modes(self, accepted: list[str]) -> OutputModes:
        """The output modes of a caller's ``acceptedOutputModes``."""
        return OutputModes.parse(accepted, media=self.media)

    async def parts(self, event: UiEvent, modes: OutputModes) -> list[Part]:
        """The parts of one ``ui`` event."""
        parts: list[Part] = []
        if modes.json:
            parts.append(data_part(event.props))
        else:
            parts.append(Part(text=await self.services.ui_text(event)))
        for item in await self._files(event, modes):
            parts.append(Part(url=item["url"], media_type=item["mime"], filename=item.get("filename", "")))
        return parts

    async def _files(self, event: UiEvent, modes: OutputModes) -> list[dict[str, str]]:
        if not modes.formats:
            return []
        key = f"a2a:ui:{event.thread_id}:{event.seq}:{'+'.join(modes.formats)}"
        store = self.services.state("a2a")
        cached = await store.get(key) if event.seq else None
        if isinstance(cached, list):
            return cached
        delivered = await self.services.deliver_ui(event, UiCapabilities(formats=[*modes.formats, "text"]))
        files: list[dict[str, str]] = delivered.wire().get("media", [])
        if event.seq:
            await store.set(key, files, ttl=self.services.settings.media_ttl / 2)
        return files
