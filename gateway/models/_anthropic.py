"""``AnthropicModel``: the ``Model`` protocol over Anthropic's Messages API (``/v1/messages``), streamed.

The ``anthropic`` package is an optional extra (``agora-gateway[anthropic]``): it is imported when
a model is built, never when ``gateway`` is.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import sys
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tools import AgoraError, ToolDefinition, UserError

from ..events import Usage
from ._base import AssistantMessage, ModelChunk, ModelRequest, TextChunk, ToolCallRequest, ToolMessage, UserMessage
from ._failures import model_error
from ._sdk_model import SdkModel

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic, AsyncStream
    from anthropic.types import RawMessageStreamEvent

__all__ = ["AnthropicModel"]

logger = logging.getLogger("gateway.models.anthropic")

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"

_ERROR_TYPES = {
    "authentication_error": "model_auth",
    "permission_error": "model_auth",
    "rate_limit_error": "model_rate_limited",
    "overloaded_error": "model_unavailable",
    "api_error": "model_unavailable",
}
"""The ``error.type`` of an ``error`` event inside a stream, as our codes (else ``model_error``)."""


def _sdk() -> ModuleType:
    try:
        import anthropic
    except ImportError as exc:
        raise UserError("AnthropicModel needs the anthropic package: pip install 'agora-gateway[anthropic]'") from exc
    return anthropic


class AnthropicModel(SdkModel):
    """A Claude model on Anthropic's Messages API (or a server speaking it), streamed.

    Text is yielded as it arrives; tool calls (``tool_use`` blocks, their input streamed as JSON
    fragments) are yielded, complete, when the message ends (``args`` is a dict when the model
    wrote a JSON object, its raw text otherwise); then one ``Usage``. Images attached to the
    person's messages go inline as base64 ``image`` blocks, PDFs as ``document`` blocks; other
    files are named in a text block.

    Failures raise ``ModelError`` with one of these codes:

    - ``model_rate_limited`` (429) and ``model_unavailable`` (5xx, 529 overloaded, connection
      failures, a stream cut before ``message_stop``): retryable, and retried here with
      exponential backoff and jitter (or the server's ``Retry-After``), up to ``max_retries``
      times, but only while nothing was yielded: streamed text is never repeated. An ``error``
      event inside the stream counts by its type (``overloaded_error``: unavailable...).
    - ``model_timeout``: the server did not answer, or paused mid-stream, for ``timeout`` seconds.
      Retryable, not retried here.
    - ``model_auth`` (401, 403) and ``model_error`` (other 4xx, a malformed stream): not
      retryable; the message carries the server's.

    The model owns the SDK client it builds and closes it in ``aclose()`` (or ``async with``); a
    client passed in stays the caller's to close.
    """

    kind = "AnthropicModel"
    key_env = API_KEY_ENV
    base_env = BASE_URL_ENV
    log = logger

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncAnthropic | None = None,
        max_tokens: int = 4096,
        timeout: float | None = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        """Configure the model; the environment is read here, once.

        Args:
            model: The model's name on the server (``claude-sonnet-4-5``...).
            api_key: The API key (sent as ``x-api-key``); ``ANTHROPIC_API_KEY`` when omitted.
            base_url: The API root, without ``/v1`` (``http://localhost:8080``);
                ``ANTHROPIC_BASE_URL`` when omitted, else Anthropic's.
            client: A ready ``anthropic.AsyncAnthropic``, used instead of building one (then
                ``api_key`` and ``base_url`` must be omitted). Its own retries are turned off:
                retries are ours.
            max_tokens: The most tokens one step may write (the API requires a bound).
            timeout: Seconds to wait for the response to start, and for each next piece of the
                stream; ``None`` waits forever.
            max_retries: Retries after a rate limit, an overload, a server error or a connection failure.
            backoff: The first retry's wait in seconds, doubled at each retry, with jitter.
            temperature: Sampling temperature; the server's default when ``None`` (some newer
                models refuse it).
            extra_body: Extra JSON fields sent with every request (``thinking``, ``metadata``...).
            name: The model's name in the gateway; ``anthropic:<model>`` by default.

        Raises:
            UserError: The ``anthropic`` package is missing, no API key is given or set in
                ``ANTHROPIC_API_KEY``, or an argument is out of range.
        """
        sdk = _sdk()
        self._configure(
            model,
            name=name,
            prefix="anthropic",
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            temperature=temperature,
            extra_body=extra_body,
        )
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise UserError("AnthropicModel: max_tokens must be an int >= 1")
        self.max_tokens = max_tokens
        self._connect(client, api_key, base_url, sdk.AsyncAnthropic)

    async def __aenter__(self) -> AnthropicModel:
        return self

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Yield the model's text pieces, then its complete tool calls, then one ``Usage``.

        Raises:
            ModelError: The server failed (after the retries allowed), see the class docstring.
            RuntimeError: The model was closed.
        """
        self._check_open()
        params = self._params(request, await _sources(request))
        async with contextlib.aclosing(self._retried(params)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _params(self, request: ModelRequest, sources: Mapping[str, dict[str, str]] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": _messages(request, sources or {}),
            "stream": True,
        }
        if request.instructions:
            params["system"] = request.instructions
        if request.tools:
            params["tools"] = _tools(request.tools)
        # Sent as body fields: newer SDKs dropped the ``temperature`` argument (newer models
        # refuse it), older ones lack the newest fields; the API itself takes both.
        extra = dict(self.extra_body or {})
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        if extra:
            params["extra_body"] = extra
        return params

    async def _attempt(self, params: dict[str, Any]) -> AsyncGenerator[ModelChunk, None]:
        """One request: text as it comes, then the assembled tool calls and the usage."""
        # Each await gets its own timeout scope; none spans a ``yield``, else the timeout would
        # cancel whatever the consumer is doing between two chunks.
        with self._mapped_errors():
            async with asyncio.timeout(self.timeout):
                stream: AsyncStream[RawMessageStreamEvent] = await self.client.messages.create(**params)
        calls: dict[int, _PendingCall] = {}
        input_tokens = output_tokens = 0
        stopped = False
        try:
            while not stopped:
                with self._mapped_errors():
                    async with asyncio.timeout(self.timeout):
                        event = await anext(stream, None)
                if event is None:
                    break
                match event.type:
                    case "message_start":
                        used = event.message.usage
                        input_tokens = _input_tokens(used) or input_tokens
                        output_tokens = used.output_tokens or output_tokens
                    case "content_block_start":
                        block = event.content_block
                        if block.type == "text" and block.text:
                            yield TextChunk(block.text)
                        elif block.type == "tool_use":
                            calls[event.index] = _PendingCall(id=block.id, name=block.name)
                    case "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and delta.text:
                            yield TextChunk(delta.text)
                        elif delta.type == "input_json_delta" and event.index in calls:
                            calls[event.index].fragments.append(delta.partial_json)
                    case "message_delta":
                        # Counts here are cumulative: the newest wins.
                        input_tokens = _input_tokens(event.usage) or input_tokens
                        output_tokens = event.usage.output_tokens or output_tokens
                        if event.delta.stop_reason == "max_tokens":
                            logger.info("%s stopped at max_tokens=%d", self.name, self.max_tokens)
                    case "message_stop":
                        stopped = True
        finally:
            await stream.close()
        if not stopped:
            raise model_error(f"{self.name}'s stream ended before message_stop", "model_unavailable")
        for index in sorted(calls):
            yield calls[index].request()
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens, model_calls=1)

    @contextlib.contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Translate the SDK's errors (and our timeout, and a cut connection) into ``ModelError``s."""
        sdk = _sdk()
        try:
            yield
        except (TimeoutError, sdk.APITimeoutError) as exc:
            raise model_error(f"{self.name} did not answer within {self.timeout}s", "model_timeout") from exc
        except sdk.APIConnectionError as exc:
            story = f"connection to {self.name} at {self.client.base_url} failed: {exc.__cause__ or exc}"
            raise model_error(story, "model_unavailable") from exc
        except sdk.APIStatusError as exc:
            status: int = exc.status_code
            kind, message = _server_error(exc.body)
            if status < 400:
                # An ``error`` event inside a stream that had started well: its type tells.
                code = _ERROR_TYPES.get(kind, "model_error")
                raise model_error(f"{self.name} failed mid-stream ({kind or 'error'}): {message}", code) from exc
            story = f"{self.name} answered {status}: {message or exc.message}"
            if status in (401, 403):
                raise model_error(story, "model_auth") from exc
            if status == 429:
                raise model_error(story, "model_rate_limited") from exc
            if status >= 500:
                raise model_error(story, "model_unavailable") from exc
            raise model_error(story, "model_error") from exc
        except sdk.AnthropicError as exc:
            raise model_error(f"{self.name} failed: {exc}", "model_error") from exc
        except json.JSONDecodeError as exc:
            raise model_error(f"{self.name} sent a malformed stream: {exc}", "model_error") from exc
        except _transport_errors() as exc:
            # The HTTP library's own errors, not wrapped by the SDK: a connection cut mid-stream.
            raise model_error(f"connection to {self.name} broke mid-stream: {exc!r}", "model_unavailable") from exc


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The transport errors of the HTTP library the SDK uses (``httpx``, ``httpx2`` in newer SDKs)."""
    errors: list[type[BaseException]] = [OSError]
    for library in ("httpx", "httpx2"):
        module = sys.modules.get(library)
        error = getattr(module, "TransportError", None)
        if isinstance(error, type) and issubclass(error, BaseException):
            errors.append(error)
    return tuple(errors)


def _input_tokens(used: Any) -> int:
    """All input tokens of a usage object: uncached, written to the cache, read from it."""
    counts = (
        getattr(used, name, None) for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return sum(count for count in counts if isinstance(count, int))


def _server_error(body: object) -> tuple[str, str]:
    """The ``error.type`` and ``error.message`` of an error body (``{"type": "error", "error": {...}}``)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            kind, message = inner.get("type"), inner.get("message")
            return (kind if isinstance(kind, str) else ""), (message if isinstance(message, str) else "")
        if isinstance(body.get("message"), str):
            return "", str(body["message"])
    if isinstance(body, str) and body.strip():
        return "", body.strip()[:500]
    return "", ""


@dataclass(kw_only=True)
class _PendingCall:
    """A ``tool_use`` block being streamed: its id and name first, its input in JSON fragments."""

    id: str
    name: str
    fragments: list[str] = field(default_factory=list)

    def request(self) -> ToolCallRequest:
        text = "".join(self.fragments)
        if not text.strip():
            return ToolCallRequest(name=self.name, args={}, id=self.id)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        # Anything but a JSON object goes through as text: the loop tells the model the call failed.
        return ToolCallRequest(name=self.name, args=parsed if isinstance(parsed, dict) else text, id=self.id)


_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Attachments sent inline as ``image`` blocks."""
_DOCUMENT_TYPES = frozenset({"application/pdf"})
"""Attachments sent inline as ``document`` blocks; other files are named in a text block."""


async def _sources(request: ModelRequest) -> dict[str, dict[str, str]]:
    """Base64 sources of the images and PDFs attached to the request's messages, by attachment id.

    A file no longer kept (expired, erased) is left out: the model is told its name instead.
    """
    read = request.read_attachment
    if read is None:
        return {}
    sources: dict[str, dict[str, str]] = {}
    for message in request.messages:
        if not isinstance(message, UserMessage):
            continue
        for attachment in message.attachments:
            if attachment.mime not in _IMAGE_TYPES | _DOCUMENT_TYPES or attachment.id in sources:
                continue
            try:
                data = await read(attachment)
            except AgoraError as exc:
                logger.info("attachment %s is not sent to the model: %s", attachment.id, exc)
                continue
            encoded = base64.b64encode(data).decode("ascii")
            sources[attachment.id] = {"type": "base64", "media_type": attachment.mime, "data": encoded}
    return sources


def _user_blocks(message: UserMessage, sources: Mapping[str, dict[str, str]]) -> list[dict[str, Any]]:
    """A person's message as content blocks: its text, then a block per attached file."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    for attachment in message.attachments:
        source = sources.get(attachment.id)
        if source is not None:
            kind = "image" if attachment.mime in _IMAGE_TYPES else "document"
            blocks.append({"type": kind, "source": source})
        else:
            name = attachment.name or "unnamed"
            blocks.append(
                {"type": "text", "text": f"[attached file: {name} ({attachment.mime}, {attachment.size} bytes)]"}
            )
    return blocks


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _block_id(call_id: str) -> str:
    """A tool call's id as the API accepts it (``^[A-Za-z0-9_-]+$``), the same for use and result."""
    return _ID_UNSAFE.sub("_", call_id) or "call"


def _tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as the ``input`` object of a ``tool_use`` block.

    ``{}`` when they are not a JSON object: the tool's result tells the model what was wrong.
    """
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _messages(request: ModelRequest, sources: Mapping[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Our history as Messages API turns: content blocks, consecutive same-role turns merged.

    A tool's result is a ``tool_result`` block in a user turn (the API has no tool role), so the
    results of one step and the person's next words share one user turn, results first.
    """
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        match message:
            case UserMessage():
                role, blocks = "user", _user_blocks(message, sources)
            case AssistantMessage(content=content, tool_calls=calls):
                role = "assistant"
                blocks = [{"type": "text", "text": content}] if content else []
                blocks += [
                    {"type": "tool_use", "id": _block_id(c.id), "name": c.name, "input": _tool_input(c.arguments)}
                    for c in calls
                ]
            case ToolMessage(tool_call_id=call_id, content=content):
                role = "user"
                blocks = [{"type": "tool_result", "tool_use_id": _block_id(call_id), "content": content}]
        if not blocks:
            continue  # the API refuses empty turns and empty text blocks
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
