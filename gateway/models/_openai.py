"""``OpenAIModel``: the ``Model`` protocol over any OpenAI-compatible ``/v1/chat/completions`` server.

The ``openai`` package is an optional extra (``agora-gateway[openai]``): it is imported when a
model is built, never when ``gateway`` is.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from tools import AgoraError, ToolDefinition, UserError

from ..events import Usage
from ._base import AssistantMessage, ModelChunk, ModelRequest, TextChunk, ToolCallRequest, ToolMessage, UserMessage
from ._failures import model_error
from ._sdk_model import SdkModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI, AsyncStream
    from openai.types.chat import (
        ChatCompletionChunk,
        ChatCompletionContentPartParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
    )
    from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall

__all__ = ["OpenAIModel"]

logger = logging.getLogger("gateway.models.openai")

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"


def _sdk() -> ModuleType:
    try:
        import openai
    except ImportError as exc:
        raise UserError("OpenAIModel needs the openai package: pip install 'agora-gateway[openai]'") from exc
    return openai


class OpenAIModel(SdkModel):
    """A model served by an OpenAI-compatible chat-completions endpoint, streamed.

    Text is yielded as it arrives; tool calls are assembled from their fragments and yielded,
    complete, when the stream ends (``args`` is a dict when the model wrote a JSON object, its raw
    text otherwise); then one ``Usage``.

    Failures raise ``ModelError`` with one of these codes:

    - ``model_rate_limited`` (429) and ``model_unavailable`` (5xx, connection failures): retryable,
      and retried here with exponential backoff and jitter (or the server's ``Retry-After``), up
      to ``max_retries`` times, but only while nothing was yielded: streamed text is never
      repeated.
    - ``model_timeout``: the server did not answer, or paused mid-stream, for ``timeout`` seconds.
      Retryable, not retried here.
    - ``model_auth`` (401, 403) and ``model_error`` (other 4xx, an error inside the stream, a
      malformed stream): not retryable; the message carries the server's.

    The model owns the SDK client it builds and closes it in ``aclose()`` (or ``async with``); a
    client passed in stays the caller's to close.
    """

    kind = "OpenAIModel"
    key_env = API_KEY_ENV
    base_env = BASE_URL_ENV
    log = logger

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: AsyncOpenAI | None = None,
        timeout: float | None = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        name: str | None = None,
    ) -> None:
        """Configure the model; the environment is read here, once.

        Args:
            model: The model's name on the server (``gpt-4o-mini``...).
            api_key: The bearer token; ``OPENAI_API_KEY`` when omitted.
            base_url: The API root (``http://localhost:8000/v1``); ``OPENAI_BASE_URL`` when omitted,
                else OpenAI's.
            client: A ready ``openai.AsyncOpenAI``, used instead of building one (then ``api_key``
                and ``base_url`` must be omitted). Its own retries are turned off: retries are ours.
            timeout: Seconds to wait for the response to start, and for each next piece of the
                stream; ``None`` waits forever.
            max_retries: Retries after a rate limit, a server error or a connection failure.
            backoff: The first retry's wait in seconds, doubled at each retry, with jitter.
            temperature: Sampling temperature; the server's default when ``None``.
            extra_body: Extra JSON fields sent with every request (server-specific options).
            name: The model's name in the gateway; ``openai:<model>`` by default.

        Raises:
            UserError: The ``openai`` package is missing, no API key is given or set in
                ``OPENAI_API_KEY``, or an argument is out of range.
        """
        sdk = _sdk()
        self._configure(
            model,
            name=name,
            prefix="openai",
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            temperature=temperature,
            extra_body=extra_body,
        )
        self._connect(client, api_key, base_url, sdk.AsyncOpenAI)

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Yield the model's text pieces, then its complete tool calls, then one ``Usage``.

        Raises:
            ModelError: The server failed (after the retries allowed), see the class docstring.
            RuntimeError: The model was closed.
        """
        self._check_open()
        params = self._params(request, await _image_urls(request))
        async with contextlib.aclosing(self._retried(params)) as chunks:
            async for chunk in chunks:
                yield chunk

    def _params(self, request: ModelRequest, images: Mapping[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "messages": _chat_messages(request, images or {}),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = _chat_tools(request.tools)
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.extra_body:
            params["extra_body"] = self.extra_body
        return params

    async def _attempt(self, params: dict[str, Any]) -> AsyncGenerator[ModelChunk, None]:
        """One request: text as it comes, then the assembled tool calls and the usage."""
        # Each await gets its own timeout scope; none spans a ``yield``, else the timeout would
        # cancel whatever the consumer is doing between two chunks.
        with self._mapped_errors():
            async with asyncio.timeout(self.timeout):
                stream: AsyncStream[ChatCompletionChunk] = await self.client.chat.completions.create(**params)
        calls: dict[int, _PendingCall] = {}
        usage = Usage(model_calls=1)
        try:
            while True:
                with self._mapped_errors():
                    async with asyncio.timeout(self.timeout):
                        chunk = await anext(stream, None)
                if chunk is None:
                    break
                if chunk.usage is not None:
                    usage = Usage(
                        input_tokens=chunk.usage.prompt_tokens or 0,
                        output_tokens=chunk.usage.completion_tokens or 0,
                        model_calls=1,
                    )
                # The SDK does not validate chunks, and some servers leave out fields its types
                # call required (a final chunk's ``delta``, a tool call's ``index``): hence the casts.
                delta = cast("ChoiceDelta | None", chunk.choices[0].delta) if chunk.choices else None
                if delta is None:
                    continue
                # A refusal is what the model says instead of an answer: the person should read it.
                for text in (delta.content, delta.refusal):
                    if text:
                        yield TextChunk(text)
                for fragment in delta.tool_calls or ():
                    calls.setdefault(_slot(calls, fragment), _PendingCall()).add(fragment)
        finally:
            await stream.close()
        for index in sorted(calls):
            yield calls[index].request()
        yield usage

    @contextlib.contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Translate the SDK's errors (and our timeout) into ``ModelError``s."""
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
            message = f"{self.name} answered {status}: {_server_message(exc)}"
            if status in (401, 403):
                raise model_error(message, "model_auth") from exc
            if status == 429:
                raise model_error(message, "model_rate_limited") from exc
            if status >= 500:
                raise model_error(message, "model_unavailable") from exc
            raise model_error(message, "model_error") from exc
        except sdk.OpenAIError as exc:
            # An ``error`` object inside the stream, or a response the SDK could not read.
            raise model_error(f"{self.name} failed: {exc}", "model_error") from exc
        except json.JSONDecodeError as exc:
            raise model_error(f"{self.name} sent a malformed stream: {exc}", "model_error") from exc


@dataclass(kw_only=True)
class _PendingCall:
    """A tool call being streamed: its id and name come first, its arguments in fragments."""

    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add(self, fragment: ChoiceDeltaToolCall) -> None:
        # Some servers repeat the id and name in every fragment: the first ones win.
        self.id = self.id or fragment.id
        if fragment.function is not None:
            self.name = self.name or fragment.function.name or ""
            if fragment.function.arguments:
                self.arguments.append(fragment.function.arguments)

    def request(self) -> ToolCallRequest:
        text = "".join(self.arguments)
        if not text.strip():
            return ToolCallRequest(name=self.name, args={}, id=self.id)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        # Anything but a JSON object goes through as text: the loop tells the model the call failed.
        return ToolCallRequest(name=self.name, args=parsed if isinstance(parsed, dict) else text, id=self.id)


def _slot(calls: dict[int, _PendingCall], fragment: ChoiceDeltaToolCall) -> int:
    """The call a fragment belongs to: its ``index``; without one, a new id starts a new call."""
    index = cast("int | None", fragment.index)
    if index is not None:
        return index
    last = max(calls, default=None)
    if last is None:
        return 0
    return last + 1 if fragment.id and calls[last].id not in (None, fragment.id) else last


_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Attachments sent to the model inline as image parts; other files are named in a text part."""


async def _image_urls(request: ModelRequest) -> dict[str, str]:
    """``data:`` URLs of the images attached to the request's messages, by attachment id.

    An image no longer kept (expired, erased) is left out: the model is told its name instead.
    """
    read = request.read_attachment
    if read is None:
        return {}
    urls: dict[str, str] = {}
    for message in request.messages:
        if not isinstance(message, UserMessage):
            continue
        for attachment in message.attachments:
            if attachment.mime in _IMAGE_TYPES and attachment.id not in urls:
                try:
                    data = await read(attachment)
                except AgoraError as exc:
                    logger.info("attachment %s is not sent to the model: %s", attachment.id, exc)
                    continue
                urls[attachment.id] = f"data:{attachment.mime};base64,{base64.b64encode(data).decode('ascii')}"
    return urls


def _user_content(message: UserMessage, images: Mapping[str, str]) -> str | list[ChatCompletionContentPartParam]:
    """A person's message: its text alone, or content parts when files came with it."""
    if not message.attachments:
        return message.content
    parts: list[ChatCompletionContentPartParam] = [{"type": "text", "text": message.content}] if message.content else []
    for attachment in message.attachments:
        url = images.get(attachment.id)
        if url is not None:
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            name = attachment.name or "unnamed"
            parts.append(
                {"type": "text", "text": f"[attached file: {name} ({attachment.mime}, {attachment.size} bytes)]"}
            )
    return parts


def _chat_messages(request: ModelRequest, images: Mapping[str, str]) -> list[ChatCompletionMessageParam]:
    """Our history as chat-completions messages, after a system message with the instructions."""
    messages: list[ChatCompletionMessageParam] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    for message in request.messages:
        match message:
            case UserMessage():
                messages.append({"role": "user", "content": _user_content(message, images)})
            case AssistantMessage(content=content, tool_calls=[]):
                messages.append({"role": "assistant", "content": content or ""})
            case AssistantMessage(content=content, tool_calls=calls):
                messages.append(
                    {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [
                            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                            for c in calls
                        ],
                    }
                )
            case ToolMessage(tool_call_id=call_id, content=content):
                messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return messages


def _chat_tools(tools: Sequence[ToolDefinition]) -> list[ChatCompletionFunctionToolParam]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _server_message(exc: Any) -> str:
    """The message of an error response: ``error.message`` in JSON, else the body's text."""
    body = exc.body
    if isinstance(body, Mapping) and isinstance(body.get("message"), str) and body["message"]:
        return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:500]
    return str(exc.message)
