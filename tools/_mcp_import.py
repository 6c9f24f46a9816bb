"""How a remote MCP tool becomes a governed ``Tool``, and how its results read for the model.

Kept apart from the connection (``_mcp.py``): names, kinds, schemas, presentation and results
are pure functions of what the server listed or answered. ``mcp`` and ``jsonschema`` are
imported when a toolset connects, never with ``tools`` (``mcp.types`` alone costs most of a
second).
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import re
import unicodedata
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
_MAX_TOOLS = 128
"""Tools of one server imported at most (the first listed); a model is offered a few dozen well."""
_MAX_PAGES = 20
"""``tools/list`` pages read at most (a server whose cursors never end is cut there)."""
_MAX_SCHEMA_CHARS = 64_000
"""An ``inputSchema`` longer than this (as JSON) skips its tool: the model would read it every turn."""
_MAX_DESCRIPTION_CHARS = 4_000
_MAX_LABEL_CHARS = 80
_MAX_IMAGES = 8
"""Images of one result shown at most; the others are counted in the output."""
_MAX_IMAGE_BYTES = 1_000_000
"""An image larger than this is not shown (its bytes would sit in the thread's log)."""


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


def _words(text: str) -> str:
    """``text`` as one line of plain words for a person, at most 80 characters.

    Controls, format characters (bidi overrides...) and line breaks become spaces; braces
    become parentheses.
    """
    # Braces would be read as placeholders of the call's input: a title is plain words.
    cleaned = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text[: _MAX_LABEL_CHARS * 4])
    line = " ".join(cleaned.replace("{", "(").replace("}", ")").split())
    return line if len(line) <= _MAX_LABEL_CHARS else line[: _MAX_LABEL_CHARS - 1].rstrip() + "…"


def _presentation_of(remote: mcp_types.Tool, local: str) -> ToolPresentation:
    """Words from the remote ``title`` (or its name): the label, ``running`` and ``done``.

    The title is the server's: a person reads it in narration and in approval prompts, so it is
    made one short line of words (``_words``); a blank one reads as the humanized name.
    """
    title = remote.title or (remote.annotations.title if remote.annotations else None)
    label = _words(title or "") or _words(humanize_tool_name(remote.name)) or humanize_tool_name(local)
    return ToolPresentation(label=label, running=f"{label}…", done=f"{label}: done")


def _description_of(remote: mcp_types.Tool, server: str, label: str) -> str:
    """The remote description (cut at 4,000 characters), or a sentence naming the tool and its server."""
    text = (remote.description or "").strip()
    if len(text) > _MAX_DESCRIPTION_CHARS:
        text = text[: _MAX_DESCRIPTION_CHARS - 1] + "…"
    return text or f"{label} (a tool of the MCP server {server})."


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
    size = len(json.dumps(schema, ensure_ascii=False))
    if size > _MAX_SCHEMA_CHARS:
        raise ValueError(f"its inputSchema has {size} characters (at most {_MAX_SCHEMA_CHARS})")
    with warnings.catch_warnings():
        # An unknown $schema warns and falls back to the default: Draft 2020-12, as MCP says.
        warnings.simplefilter("ignore", DeprecationWarning)
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"its inputSchema is not valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise ValueError("its inputSchema is nested too deeply") from None
    risky = _risky_patterns(schema)
    if risky["patternProperties"]:
        raise ValueError(f"its patternProperties {risky['patternProperties'][0]!r} may backtrack for ever")
    # Python's re backtracks: a pattern like ^(a+)+$ would hold the event loop for minutes on one
    # argument. Such patterns are left to the server; the others are checked here.
    validator_class = jsonschema.validators.extend(validator_class, {"pattern": _pattern_keyword})
    # An empty registry: $refs resolve inside the schema; nothing is fetched from the network.
    validator = validator_class(schema, registry=Registry())
    namespace = {"remote_schema": copy.deepcopy(schema), "remote_validator": validator, "__module__": __name__}
    return type(f"RemoteArguments_{local}", (_RemoteArguments,), namespace)


def _parts(op: Any, av: Any, sre: Any) -> list[Any]:
    """The sub-patterns of one parsed item (``re._parser``'s shapes)."""
    if op is sre.SUBPATTERN:
        return [av[3]]
    if op is sre.BRANCH:
        return list(av[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [av[1]]
    if op is sre.ATOMIC_GROUP:
        return [av]
    if op is sre.GROUPREF_EXISTS:
        return [branch for branch in av[1:] if branch is not None]
    return []


@functools.lru_cache(maxsize=1024)
def _backtracks(pattern: str) -> bool:
    """Whether ``pattern`` may take exponential time in Python's ``re``.

    A repeat inside a repeat (``(a+)+``), an alternation inside a repeat (``(a|ab)*``) or a
    back-reference. Conservative: a pattern judged so is only not checked locally.
    """
    from re import _constants as sre  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]

    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # not a Python pattern: jsonschema says so when it is applied
        return False
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)}

    def walk(items: Any, in_repeat: bool) -> bool:
        for op, av in items:
            if op is sre.GROUPREF or (op is sre.BRANCH and in_repeat):
                return True
            if op in repeats:
                repeating = av[1] > 1
                if (repeating and in_repeat) or walk(av[2], in_repeat or repeating):
                    return True
            elif any(walk(part, in_repeat) for part in _parts(op, av, sre)):
                return True
        return False

    return walk(parsed, False)


def _risky_patterns(schema: Any) -> dict[str, list[str]]:
    """The ``pattern`` values and ``patternProperties`` keys of a schema that ``_backtracks``."""
    found: dict[str, list[str]] = {"pattern": [], "patternProperties": []}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            pattern = node.get("pattern")
            if isinstance(pattern, str) and _backtracks(pattern):
                found["pattern"].append(pattern)
            keyed = node.get("patternProperties")
            if isinstance(keyed, dict):
                found["patternProperties"].extend(k for k in keyed if isinstance(k, str) and _backtracks(k))
            stack.extend(node.values())
    return found


def _pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    """The ``pattern`` keyword, except for patterns that ``_backtracks`` (left to the server)."""
    import jsonschema

    if not validator.is_type(instance, "string") or _backtracks(pattern):
        return
    if re.search(pattern, instance) is None:
        yield jsonschema.ValidationError(f"{instance[:80]!r} does not match {pattern!r}")


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
    left_out = 0
    for block in result.content:
        if isinstance(block, mcp_types.ImageContent):
            size = len(block.data) * 3 // 4
            if len(images) >= _MAX_IMAGES or size > _MAX_IMAGE_BYTES + 3:
                left_out += 1  # neither shown nor kept: too many, or too large for the thread's log
                continue
            try:
                size = len(base64.b64decode(block.data, validate=True))
            except ValueError:
                pass
            if size > _MAX_IMAGE_BYTES:
                left_out += 1
                continue
            ui_id = ctx.emit_ui(
                MCP_IMAGE_COMPONENT,
                {"mime_type": block.mimeType, "data": block.data},
                fallback_text=f"An image from {server} ({block.mimeType}, {size} bytes).",
            )
            images.append({"mime_type": block.mimeType, "bytes": size, "ui_id": ui_id})
        elif (text := _text_of(block)) is not None:
            texts.append(text)
    if left_out:
        texts.append(
            f"[{left_out} image(s) not shown: at most {_MAX_IMAGES} of at most {_MAX_IMAGE_BYTES} bytes each are]"
        )
    if result.structuredContent is not None and not images and not left_out:
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
