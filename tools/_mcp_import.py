"""How a remote MCP tool becomes a governed ``Tool``, and how its results read for the model.

Kept apart from the connection (``_mcp.py``): names, kinds, schemas, presentation and results
are pure functions of what the server listed or answered. ``mcp`` and ``jsonschema`` are
imported when a toolset connects, never with ``tools`` (``mcp.types`` alone costs most of a
second).
"""

from __future__ import annotations

import base64
import copy
import json
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

from ._errors import UserError
from ._presentation import ToolPresentation, humanize_tool_name
from ._tool import ToolKind

if TYPE_CHECKING:
    from mcp import types as mcp_types

    from ._context import ToolContext

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "MCP_IDEMPOTENCY_KEY", "MCP_IMAGE_COMPONENT", "McpKind"]

MCP_IDEMPOTENCY_KEY = "io.agora/idempotency-key"
"""The ``_meta`` key of every ``tools/call`` that carries the call's ``ToolContext.idempotency_key``
(``"<run_id>:<tool_call_id>"``): a resumed run's retry of one call carries the same value."""

DEFAULT_MAX_RESULT_CHARS = 32_000
"""Characters of a remote result the model sees at most; the rest is cut with a note saying so."""

MCP_IMAGE_COMPONENT = "McpImage"
"""The ``ui`` component an image of a remote result becomes: props ``{mime_type, data}`` (base64)
for clients that declare it, its ``fallback_text`` for the others."""

McpKind = Literal["read", "action", "annotations"] | Callable[["mcp_types.Tool"], ToolKind]
"""How an imported tool's ``kind`` is chosen: fixed, from the remote ``readOnlyHint``
(``"annotations"``: read-only is ``read``, anything else an ``action``), or by a function."""

_NOT_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_MAX_ERRORS = 5
_MAX_ERROR_CHARS = 2_000


def _local_name(prefix: str | None, remote: str) -> str:
    """``<prefix>_<remote>`` made a valid tool name: other characters become ``_``, 64 at most."""
    joined = f"{prefix}_{remote}" if prefix else remote
    return (_NOT_NAME.sub("_", joined) or "tool")[:64]


def _choose_kind(kind: McpKind, remote: mcp_types.Tool) -> ToolKind:
    """The ``kind`` of an imported tool (see ``McpKind``).

    Raises:
        UserError: A kind function returned something else than ``"read"`` or ``"action"``.
    """
    if callable(kind):
        chosen = kind(remote)
        if chosen not in ("read", "action"):
            raise UserError(f"McpToolset kind function returned {chosen!r} for {remote.name!r}, not 'read'/'action'")
        return chosen
    if kind == "annotations":
        hints = remote.annotations
        return "read" if hints is not None and hints.readOnlyHint is True else "action"
    return kind


def _presentation_of(remote: mcp_types.Tool) -> ToolPresentation:
    """Words from the remote ``title`` (or its name): the label, ``running`` and ``done``."""
    title = remote.title or (remote.annotations.title if remote.annotations else None)
    # Braces would be read as placeholders of the call's input: a title is plain words.
    label = (title or humanize_tool_name(remote.name)).replace("{", "(").replace("}", ")").strip()
    return ToolPresentation(label=label, running=f"{label}…", done=f"{label}: done")


def _description_of(remote: mcp_types.Tool, server: str) -> str:
    """The remote description, or a sentence naming the tool and its server."""
    text = (remote.description or "").strip()
    return text or f"{remote.title or humanize_tool_name(remote.name)} (a tool of the MCP server {server})."


class _RemoteArguments(BaseModel):
    """The arguments of an imported tool: any JSON object its remote schema accepts.

    Each imported tool gets a subclass (``_arguments_model``) whose ``model_json_schema`` is the
    remote schema as listed, so the model sees it unchanged, and whose validation runs the
    remote schema through ``jsonschema`` before ``execute`` is reached.
    """

    model_config = ConfigDict(extra="allow")

    remote_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    remote_validator: ClassVar[Any] = None

    @model_validator(mode="before")
    @classmethod
    def _against_remote_schema(cls, data: Any) -> Any:
        validator = cls.remote_validator
        if validator is None:
            return data
        try:
            errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        except Exception as exc:  # an unresolvable $ref, say: the schema cannot be applied
            raise PydanticCustomError("json_schema", "the tool's schema could not be applied ({detail})", {
                "detail": f"{type(exc).__name__}: {exc}"[:200]
            }) from None  # fmt: skip
        if errors:
            lines = [
                (f"{'.'.join(map(str, e.absolute_path))}: " if e.absolute_path else "") + e.message[:300]
                for e in errors[:_MAX_ERRORS]
            ]
            if len(errors) > _MAX_ERRORS:
                lines.append(f"and {len(errors) - _MAX_ERRORS} more")
            raise PydanticCustomError("json_schema", "{detail}", {"detail": "; ".join(lines)})
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The remote schema as the server listed it (a copy)."""
        return copy.deepcopy(cls.remote_schema)


def _arguments_model(local: str, schema: Any) -> type[_RemoteArguments]:
    """A ``_RemoteArguments`` subclass for one remote tool.

    The schema is checked against its own metaschema (``$schema``, else Draft 2020-12).

    Raises:
        ValueError: The schema is not an object schema or not valid JSON Schema (the reason).
    """
    import jsonschema
    from referencing import Registry

    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("its inputSchema is not a JSON Schema of type object")
    with warnings.catch_warnings():
        # An unknown $schema warns and falls back to the default: Draft 2020-12, as MCP says.
        warnings.simplefilter("ignore", DeprecationWarning)
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"its inputSchema is not valid JSON Schema: {exc.message}") from None
    # An empty registry: $refs resolve inside the schema; nothing is fetched from the network.
    validator = validator_class(schema, registry=Registry())
    namespace = {"remote_schema": copy.deepcopy(schema), "remote_validator": validator, "__module__": __name__}
    return type(f"RemoteArguments_{local}", (_RemoteArguments,), namespace)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated: the result had {len(text)} characters; the first {limit} are shown]"


def _text_of(block: mcp_types.ContentBlock) -> str | None:
    from mcp import types as mcp_types

    match block:
        case mcp_types.TextContent(text=text):
            return text
        case mcp_types.EmbeddedResource(resource=mcp_types.TextResourceContents(text=text)):
            return text
        case mcp_types.EmbeddedResource(resource=resource):
            return f"[resource {resource.uri} ({resource.mimeType or 'binary'})]"
        case mcp_types.ResourceLink(uri=uri, name=name):
            return f"[{name}]({uri})"
        case mcp_types.AudioContent(mimeType=mime):
            return f"[audio ({mime})]"
    return None


def _error_text(result: mcp_types.CallToolResult) -> str:
    """The words of a remote ``isError`` result, cut short."""
    texts = [text for block in result.content if (text := _text_of(block)) is not None]
    return _cut("\n".join(texts).strip() or "the tool reported an error without a message", _MAX_ERROR_CHARS)


def _result_output(result: mcp_types.CallToolResult, ctx: ToolContext, *, limit: int, server: str) -> Any:
    """What the model sees of a successful remote result.

    ``structuredContent`` when given (its JSON text, cut, when longer than ``limit``), else the
    text of the content blocks joined by new lines, cut at ``limit`` characters. Each image is
    pushed as an ``MCP_IMAGE_COMPONENT`` ``ui`` component; the output then becomes
    ``{"text": ..., "images": [{"mime_type", "bytes", "ui_id"}]}`` so the model knows it was shown.
    """
    from mcp import types as mcp_types

    images: list[dict[str, Any]] = []
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.ImageContent):
            size = len(block.data) * 3 // 4
            try:
                size = len(base64.b64decode(block.data, validate=True))
            except ValueError:
                pass
            ui_id = ctx.emit_ui(
                MCP_IMAGE_COMPONENT,
                {"mime_type": block.mimeType, "data": block.data},
                fallback_text=f"An image from {server} ({block.mimeType}, {size} bytes).",
            )
            images.append({"mime_type": block.mimeType, "bytes": size, "ui_id": ui_id})
        elif (text := _text_of(block)) is not None:
            texts.append(text)
    if result.structuredContent is not None and not images:
        encoded = json.dumps(result.structuredContent, ensure_ascii=False)
        return result.structuredContent if len(encoded) <= limit else _cut(encoded, limit)
    text = _cut("\n".join(texts), limit)
    return {"text": text, "images": images} if images else text


def _check_roles(roles: Sequence[str]) -> tuple[str, ...]:
    """``roles`` as a tuple of str.

    Raises:
        UserError: ``roles`` is a bare string or holds something else than str.
    """
    if isinstance(roles, str) or not isinstance(roles, Sequence) or not all(isinstance(r, str) for r in roles):
        raise UserError(f"McpToolset(roles=...) must be a list of str, not {roles!r}")
    return tuple(roles)
