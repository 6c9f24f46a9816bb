"""Reading a ``POST /agent/ag-ui`` body: a ``RunAgentInput``, and the turn or resume it asks for.

Everything here runs before the answer's stream starts and has no side effect, so a bad body is
an HTTP error (400, 413, 415) and nothing was written anywhere.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    DocumentPart,
    ImagePart,
    InputContentDataSource,
    ResumeEntry,
    RunAgentInput,
    TextPart,
    UserMessage,
)
from aiohttp import web
from pydantic import ValidationError

from gateway import GatewayError, parse_json
from tools import UiCapabilities

__all__ = [
    "AG_UI_DEFAULT_CAPABILITIES",
    "MAX_BODY",
    "AgUiRequest",
    "AgUiRequestError",
    "parse_run_input",
    "read_run_input",
]

MAX_BODY = 1024 * 1024
"""Bytes in one request body. AG-UI clients send the whole conversation every time, hence 1 MiB."""

MAX_TEXT = 32_000
"""Characters in the user message that becomes the turn (the runtime's own limit)."""

AG_UI_DEFAULT_CAPABILITIES = UiCapabilities(formats=["text"])
"""What an AG-UI client gets when ``forwardedProps.uiCapabilities`` declares nothing.

Every ``ui`` event carries its props anyway (an AG-UI client may draw what it knows); the
server-rendered form on top of them is the text form.
"""

_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_JSON_TYPE = re.compile(r"^application/([a-z0-9.+-]+\+)?json$")


class AgUiRequestError(GatewayError):
    """The body is not a usable ``RunAgentInput``: answered 400 before any stream starts."""

    status = 400

    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True, kw_only=True)
class AgUiRequest:
    """What one ``RunAgentInput`` asks of the gateway."""

    thread_id: str
    """The conversation, continued or created (owned by the caller)."""
    run_id: str
    """The client's ``runId``, echoed on ``RUN_STARTED`` and ``RUN_FINISHED``."""
    text: str | None
    """The last user message's text: the turn. ``None`` when there is none."""
    resume: list[ResumeEntry] | None
    """Answers to the open interrupts; ``None`` (or an empty list in the body) for a new turn."""
    agent: str | None = None
    """``forwardedProps.agent``: the agent to talk to (the default one when absent)."""
    persona: str | None = None
    """``forwardedProps.persona``: the persona to speak as (else the thread's pin, else the default)."""
    page_context: dict[str, Any] = field(default_factory=dict)
    """``forwardedProps.pageContext``: free-form context from the client's page."""
    capabilities: UiCapabilities | None = None
    """``forwardedProps.uiCapabilities`` as declared; ``None`` when absent."""
    files: tuple[tuple[str, str, bytes], ...] = ()
    """The last user message's image and document parts with inline data (``source.type``
    ``data``), as ``(name, mime type, bytes)``: the turn's attachments. URL sources are never fetched."""


async def read_run_input(request: web.Request, *, max_body: int = MAX_BODY) -> RunAgentInput:
    """Read and validate the request body as a ``RunAgentInput``.

    Lenient with 0.x clients: unknown fields are kept and ignored, optional ones may be missing
    or ``null``, and the 0.x ``binary`` content parts (removed in 1.0) are dropped, as the
    gateway reads only the text of a message.

    Raises:
        web.HTTPRequestEntityTooLarge: The body is larger than ``max_body`` (413).
        AgUiRequestError: Not JSON (415 for another content type, 400 for malformed JSON) or
            not a ``RunAgentInput`` (400).
    """
    if request.content_length is not None and request.content_length > max_body:
        raise web.HTTPRequestEntityTooLarge(max_size=max_body, actual_size=request.content_length)
    if not _JSON_TYPE.match(request.content_type):
        raise AgUiRequestError("unsupported_media_type", "Send the RunAgentInput as application/json", status=415)
    # read(n) returns what has arrived (up to n), not n bytes: read to the end, counting.
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > max_body:
            raise web.HTTPRequestEntityTooLarge(max_size=max_body, actual_size=size)
        chunks.append(chunk)
    try:
        body = parse_json(b"".join(chunks))
    except ValueError as exc:
        raise AgUiRequestError("invalid_json", f"The body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise AgUiRequestError("invalid_request", "The body must be a RunAgentInput object")
    try:
        return RunAgentInput.model_validate(_drop_legacy_parts(body))
    except ValidationError as exc:
        raise AgUiRequestError("invalid_request", f"Not a RunAgentInput: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])


def _drop_legacy_parts(body: dict[str, Any]) -> dict[str, Any]:
    """The body without 0.x ``{"type": "binary"}`` parts in user messages."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    cleaned = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            kept = [p for p in content if not (isinstance(p, dict) and p.get("type") == "binary")]
            message = {**message, "content": kept}
        cleaned.append(message)
    return {**body, "messages": cleaned}


def parse_run_input(run_input: RunAgentInput) -> AgUiRequest:
    """What ``run_input`` asks: the thread, the turn's text or the resume, and forwarded props.

    Raises:
        AgUiRequestError: A bad thread id, run id or forwarded prop (400).
    """
    if not _ID.match(run_input.thread_id):
        raise AgUiRequestError("invalid_thread_id", "threadId must be 1-200 letters, digits or '_.:-'")
    if not run_input.run_id or len(run_input.run_id) > 200:
        raise AgUiRequestError("invalid_run_id", "runId must be 1-200 characters")
    text = _last_user_text(run_input)
    if text is not None and len(text) > MAX_TEXT:
        raise AgUiRequestError("text_too_long", f"The user message is limited to {MAX_TEXT} characters")
    if run_input.forwarded_props is not None and not isinstance(run_input.forwarded_props, dict):
        raise AgUiRequestError("invalid_forwarded_props", "forwardedProps must be an object")
    props = run_input.forwarded_props or {}
    agent = props.get("agent")
    if agent is not None and not (isinstance(agent, str) and _ID.match(agent)):
        raise AgUiRequestError("invalid_forwarded_props", "forwardedProps.agent must be an agent name")
    persona = props.get("persona")
    if persona is not None and not (isinstance(persona, str) and _ID.match(persona) and len(persona) <= 64):
        raise AgUiRequestError("invalid_forwarded_props", "forwardedProps.persona must be a persona id")
    page_context = _prop(props, "pageContext", "page_context")
    if page_context is not None and not isinstance(page_context, dict):
        raise AgUiRequestError("invalid_forwarded_props", "forwardedProps.pageContext must be an object")
    declared = _prop(props, "uiCapabilities", "ui_capabilities")
    try:
        capabilities = None if declared is None else UiCapabilities.model_validate(declared)
    except ValidationError as exc:
        raise AgUiRequestError("invalid_ui_capabilities", f"forwardedProps.uiCapabilities: {_describe(exc)}") from None
    return AgUiRequest(
        files=_last_user_files(run_input),
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        text=text,
        resume=list(run_input.resume) if run_input.resume else None,
        agent=agent,
        persona=persona,
        page_context=page_context or {},
        capabilities=capabilities,
    )


def _last_user_files(run_input: RunAgentInput) -> tuple[tuple[str, str, bytes], ...]:
    """The inline images and documents of the last user message.

    Raises:
        AgUiRequestError: A data source that is not base64 (400).
    """
    for message in reversed(run_input.messages):
        if not isinstance(message, UserMessage):
            continue
        if isinstance(message.content, str):
            return ()
        files: list[tuple[str, str, bytes]] = []
        for part in message.content:
            if not isinstance(part, ImagePart | DocumentPart) or not isinstance(part.source, InputContentDataSource):
                continue
            try:
                data = base64.b64decode(part.source.value, validate=True)
            except (binascii.Error, ValueError):
                raise AgUiRequestError("invalid_content", "an inline image or document is not base64") from None
            name = part.metadata.get("filename") if isinstance(part.metadata, dict) else None
            files.append((name if isinstance(name, str) else "", part.source.mime_type, data))
        return tuple(files)
    return ()


def _prop(props: dict[str, Any], camel: str, snake: str) -> Any:
    return props[camel] if camel in props else props.get(snake)


def _last_user_text(run_input: RunAgentInput) -> str | None:
    """The text of the last user message (its text parts joined), ``None`` when it has none."""
    for message in reversed(run_input.messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                text = message.content
            else:
                text = "\n".join(part.text for part in message.content if isinstance(part, TextPart))
            return text if text.strip() else None
    return None
