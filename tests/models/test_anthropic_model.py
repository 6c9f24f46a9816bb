"""``AnthropicModel`` against a fake of the Messages API on loopback, through the real ``anthropic`` SDK."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from typing import Any

import anthropic
import pytest
from aiohttp.test_utils import unused_port

from gateway import AttachmentNotFoundError, ModelError
from gateway.events import Attachment, Usage
from gateway.models import (
    AnthropicModel,
    AssistantMessage,
    Model,
    ModelChunk,
    ModelRequest,
    TextChunk,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from tests.models.conftest import MakeAnthropic
from tests.models.fake_anthropic import (
    FakeAnthropic,
    delta,
    end,
    error,
    json_delta,
    message,
    start,
    stop,
    stream_error,
    text_delta,
    text_start,
    tool_start,
)
from tools import ToolDefinition, UserError

WATCHDOG = 5.0
"""Seconds any test waits for the model before failing (nothing legitimate takes this long)."""

WEATHER = ToolDefinition(
    name="get_weather",
    description="The weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    kind="read",
)


def ask(
    content: str = "Hello?",
    *,
    instructions: str = "You help.",
    history: list[UserMessage | AssistantMessage | ToolMessage] | None = None,
    tools: list[ToolDefinition] | None = None,
) -> ModelRequest:
    return ModelRequest(
        agent="default",
        instructions=instructions,
        messages=[*(history or []), UserMessage(content=content)],
        tools=tools or [],
    )


async def collect(model: AnthropicModel, request: ModelRequest | None = None) -> list[ModelChunk]:
    async with asyncio.timeout(WATCHDOG):
        return [chunk async for chunk in model.stream(request or ask())]


async def collect_until_error(model: AnthropicModel) -> tuple[list[ModelChunk], ModelError]:
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as raised:
        async with asyncio.timeout(WATCHDOG):
            async for chunk in model.stream(ask()):
                chunks.append(chunk)
    return chunks, raised.value


# -- streaming -----------------------------------------------------------------------------------


async def test_a_text_turn_streams_its_pieces_then_usage(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(fake_anthropic.sse(*message("Hello", ", ", "Ana.", input_tokens=12, output_tokens=4)))
    chunks = await collect(make_anthropic(), ask("Hi, I am Ana", instructions=""))
    assert chunks == [
        TextChunk("Hello"),
        TextChunk(", "),
        TextChunk("Ana."),
        Usage(input_tokens=12, output_tokens=4, model_calls=1),
    ]
    [sent] = fake_anthropic.requests
    assert sent.api_key == "test-key"
    assert "anthropic-version" in sent.headers
    # No instructions, no tools: neither key is sent.
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi, I am Ana"}]}],
        "stream": True,
    }


async def test_text_is_yielded_while_the_server_still_streams(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    gate = asyncio.Event()
    fake_anthropic.script(
        fake_anthropic.sse(start(3), text_start(0), text_delta(0, "first"), gate, text_delta(0, " second"), stop(0))
    )
    stream = make_anthropic().stream(ask())
    async with asyncio.timeout(WATCHDOG):
        assert await anext(stream) == TextChunk("first")  # before the server sent the rest
        gate.set()
        assert await anext(stream) == TextChunk(" second")
    await stream.aclose()


async def test_a_tool_call_streams_its_input_in_fragments(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(
            start(30),
            text_start(0),
            text_delta(0, "Let me look."),
            stop(0),
            tool_start(1, "toolu_01", "get_weather"),
            json_delta(1, ""),
            json_delta(1, '{"ci'),
            json_delta(1, 'ty": "Lis'),
            json_delta(1, 'bon"}'),
            stop(1),
            tool_start(2, "toolu_02", "get_time"),
            stop(2),
            delta("tool_use", 21),
            end(),
        )
    )
    assert await collect(make_anthropic(), ask(tools=[WEATHER])) == [
        TextChunk("Let me look."),
        ToolCallRequest(name="get_weather", args={"city": "Lisbon"}, id="toolu_01"),
        ToolCallRequest(name="get_time", args={}, id="toolu_02"),
        Usage(input_tokens=30, output_tokens=21, model_calls=1),
    ]


async def test_input_that_is_not_a_json_object_passes_through_as_text(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(
            start(1), tool_start(0, "toolu_1", "get_weather"), json_delta(0, '["Lisbon"'), stop(0), end()
        )
    )
    chunks = await collect(make_anthropic())
    assert chunks[0] == ToolCallRequest(name="get_weather", args='["Lisbon"', id="toolu_1")


async def test_cached_input_tokens_count_as_input(fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic) -> None:
    fake_anthropic.script(fake_anthropic.sse(start(5, cache_read=100), text_start(0), delta("end_turn", 2), end()))
    assert await collect(make_anthropic()) == [Usage(input_tokens=105, output_tokens=2, model_calls=1)]


async def test_the_request_maps_system_history_tool_results_and_tools(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(fake_anthropic.sse(*message("Porto is cloudy.")))
    history: list[UserMessage | AssistantMessage | ToolMessage] = [
        UserMessage(content="Weather in Lisbon"),
        UserMessage(content="and Porto?"),  # two user messages in a row: one user turn
        AssistantMessage(
            content="Looking.",
            tool_calls=[
                ToolCall(id="run1:0:a", name="get_weather", arguments='{"city":"Lisbon"}'),
                ToolCall(id="run1:0:b", name="get_weather", arguments='{"city":"Porto"}'),
            ],
        ),
        ToolMessage(tool_call_id="run1:0:a", name="get_weather", content='{"sky":"sunny"}'),
        ToolMessage(tool_call_id="run1:0:b", name="get_weather", content='{"sky":"cloudy"}'),
        AssistantMessage(content=None),  # an empty step: left out, the API refuses empty turns
    ]
    model = make_anthropic(temperature=0.2, max_tokens=512, extra_body={"top_k": 5})
    await collect(model, ask("Thanks!", history=history, tools=[WEATHER]))

    [sent] = fake_anthropic.requests
    assert sent.body == {
        "model": "claude-test",
        "max_tokens": 512,
        "system": "You help.",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather in Lisbon"}, {"type": "text", "text": "and Porto?"}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    # The API allows only [A-Za-z0-9_-] in ids: the same id for the use and its result.
                    {"type": "tool_use", "id": "run1_0_a", "name": "get_weather", "input": {"city": "Lisbon"}},
                    {"type": "tool_use", "id": "run1_0_b", "name": "get_weather", "input": {"city": "Porto"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "run1_0_a", "content": '{"sky":"sunny"}'},
                    {"type": "tool_result", "tool_use_id": "run1_0_b", "content": '{"sky":"cloudy"}'},
                    {"type": "text", "text": "Thanks!"},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER.parameters}],
        "stream": True,
        "temperature": 0.2,
        "top_k": 5,
    }


# -- attachments ---------------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
PDF = b"%PDF-1.4\n%fake\n"


async def test_images_and_pdfs_go_inline_other_files_by_name(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(fake_anthropic.sse(*message("A cat.")))
    image = Attachment(id="m_img", name="cat.png", mime="image/png", size=len(PNG))
    pdf = Attachment(id="m_pdf", name="bill.pdf", mime="application/pdf", size=len(PDF))
    sheet = Attachment(id="m_csv", name="data.csv", mime="text/csv", size=9)
    gone = Attachment(id="m_gone", name="old.jpg", mime="image/jpeg", size=3)
    stored = {"m_img": PNG, "m_pdf": PDF}
    read: list[str] = []

    async def read_attachment(attachment: Attachment) -> bytes:
        read.append(attachment.id)
        if attachment.id not in stored:
            raise AttachmentNotFoundError("that file is no longer kept")
        return stored[attachment.id]

    request = ModelRequest(
        agent="default",
        instructions="",
        messages=[UserMessage(content="What is this?", attachments=[image, pdf, sheet, gone])],
        read_attachment=read_attachment,
    )
    await collect(make_anthropic(), request)

    assert read == ["m_img", "m_pdf", "m_gone"]  # a CSV is never read for the model
    [sent] = fake_anthropic.requests
    assert sent.body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
                },
                {
                    "type": "document",
                    "source": {
                        "type": "base64",
                        "media_type": "application/pdf",
                        "data": base64.b64encode(PDF).decode(),
                    },
                },
                {"type": "text", "text": "[attached file: data.csv (text/csv, 9 bytes)]"},
                {"type": "text", "text": "[attached file: old.jpg (image/jpeg, 3 bytes)]"},
            ],
        }
    ]


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_not_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic, status: int
) -> None:
    fake_anthropic.script(
        error(status, "authentication_error", "invalid x-api-key"), fake_anthropic.sse(*message("no"))
    )
    _, exc = await collect_until_error(make_anthropic())
    assert (exc.code, exc.retryable) == ("model_auth", False)
    assert "invalid x-api-key" in str(exc) and "invalid x-api-key" not in exc.public
    assert len(fake_anthropic.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(429, "rate_limit_error"), (529, "overloaded_error")])
async def test_rate_limits_and_overloads_are_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic, status: int, kind: str
) -> None:
    fake_anthropic.script(error(status, kind, "busy"), error(status, kind, "busy"), fake_anthropic.sse(*message("ok")))
    assert await collect(make_anthropic()) == [TextChunk("ok"), Usage(input_tokens=10, output_tokens=5, model_calls=1)]
    assert len(fake_anthropic.requests) == 3


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [(429, "rate_limit_error", "model_rate_limited"), (529, "overloaded_error", "model_unavailable")],
)
async def test_rate_limits_and_overloads_beyond_max_retries_fail_retryable(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic, status: int, kind: str, code: str
) -> None:
    fake_anthropic.script(*[error(status, kind, "Overloaded")] * 3, fake_anthropic.sse(*message("never")))
    _, exc = await collect_until_error(make_anthropic(max_retries=2))
    assert (exc.code, exc.retryable) == (code, True)
    assert f"answered {status}: Overloaded" in str(exc)
    assert isinstance(exc.__cause__, anthropic.APIStatusError)
    assert len(fake_anthropic.requests) == 3


async def test_a_rate_limit_waits_for_the_servers_retry_after(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        error(429, "rate_limit_error", "slow down", headers={"retry-after": "0"}), fake_anthropic.sse(*message("ok"))
    )
    # A computed backoff would wait 30 s and trip the watchdog: only Retry-After makes this quick.
    assert (await collect(make_anthropic(backoff=60.0)))[0] == TextChunk("ok")
    assert len(fake_anthropic.requests) == 2


async def test_a_bad_request_fails_at_once_with_the_servers_message(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(error(400, "invalid_request_error", "max_tokens: must be at most 8192"))
    _, exc = await collect_until_error(make_anthropic())
    assert (exc.code, exc.retryable) == ("model_error", False)
    assert "max_tokens: must be at most 8192" in str(exc)
    assert len(fake_anthropic.requests) == 1


async def test_an_overload_event_before_any_output_is_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(start(3), stream_error("overloaded_error", "Overloaded")), fake_anthropic.sse(*message("ok"))
    )
    assert (await collect(make_anthropic()))[0] == TextChunk("ok")
    assert len(fake_anthropic.requests) == 2


async def test_an_error_event_after_text_is_not_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(
            start(3), text_start(0), text_delta(0, "Hel"), stream_error("overloaded_error", "Overloaded")
        ),
        fake_anthropic.sse(*message("never")),
    )
    chunks, exc = await collect_until_error(make_anthropic())
    assert chunks == [TextChunk("Hel")]
    assert (exc.code, exc.retryable) == ("model_unavailable", True)
    assert "Overloaded" in str(exc)
    assert len(fake_anthropic.requests) == 1


async def test_a_stream_cut_midway_after_text_is_not_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    received = asyncio.Event()
    fake_anthropic.script(
        fake_anthropic.sse(start(3), text_start(0), text_delta(0, "Hel"), received, drop=True),
        fake_anthropic.sse(*message("never")),
    )
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as raised:
        async with asyncio.timeout(WATCHDOG):
            async for chunk in make_anthropic().stream(ask()):
                chunks.append(chunk)
                received.set()  # cut only once "Hel" reached us
    assert chunks == [TextChunk("Hel")]
    # Retryable for the caller (the step can be redone), but never retried here: "Hel" was shown.
    assert (raised.value.code, raised.value.retryable) == ("model_unavailable", True)
    assert len(fake_anthropic.requests) == 1


async def test_a_stream_cut_inside_a_tool_call_is_retried(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    # Half a tool call was streamed, but nothing reached the consumer yet: retrying is safe.
    fake_anthropic.script(
        fake_anthropic.sse(start(3), tool_start(0, "toolu_1", "get_weather"), json_delta(0, '{"ci'), drop=True),
        fake_anthropic.sse(*message("ok")),
    )
    assert (await collect(make_anthropic()))[0] == TextChunk("ok")
    assert len(fake_anthropic.requests) == 2


async def test_a_stream_that_ends_without_message_stop_is_unavailable(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    truncated = fake_anthropic.sse(start(3), tool_start(0, "toolu_1", "get_weather"), json_delta(0, '{"city": "Lis'))
    fake_anthropic.script(truncated, truncated)
    _, exc = await collect_until_error(make_anthropic(max_retries=1))
    assert (exc.code, exc.retryable) == ("model_unavailable", True)
    assert "before message_stop" in str(exc)
    assert len(fake_anthropic.requests) == 2  # retried once: no half tool call ever reaches the loop


async def test_a_stream_that_stalls_midway_times_out(
    fake_anthropic: FakeAnthropic, make_anthropic: MakeAnthropic
) -> None:
    never = asyncio.Event()
    fake_anthropic.script(fake_anthropic.sse(start(3), text_start(0), text_delta(0, "Hi"), never))
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as raised:
        async with asyncio.timeout(WATCHDOG):
            async for chunk in make_anthropic(timeout=0.3).stream(ask()):
                chunks.append(chunk)
    assert chunks == [TextChunk("Hi")]
    assert (raised.value.code, raised.value.retryable) == ("model_timeout", True)


async def test_connection_refused_is_model_unavailable() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}"
    async with AnthropicModel("claude-test", api_key="k", base_url=base_url, max_retries=1, backoff=0.01) as model:
        _, exc = await collect_until_error(model)
    assert (exc.code, exc.retryable) == ("model_unavailable", True)
    assert "anthropic:claude-test" not in exc.public


# -- construction --------------------------------------------------------------------------------


async def test_key_and_base_url_fall_back_to_the_environment(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    fake_anthropic.script(fake_anthropic.sse(*message("ok")))
    async with AnthropicModel("claude-test") as model:
        assert (await collect(model))[0] == TextChunk("ok")
    assert fake_anthropic.requests[0].api_key == "env-key"


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-test")


def test_a_missing_anthropic_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(UserError, match=r"agora-gateway\[anthropic\]"):
        AnthropicModel("claude-test", api_key="k")


def test_gateway_imports_without_the_anthropic_package() -> None:
    code = "import sys; sys.modules['anthropic'] = None; import gateway, gateway.models, gateway.app; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "options",
    [{"max_retries": -1}, {"max_retries": True}, {"max_tokens": 0}, {"timeout": 0}, {"backoff": -1.0}],
    ids=str,
)
def test_bad_arguments_are_user_errors(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        AnthropicModel("claude-test", api_key="k", **options)


async def test_name_and_protocol() -> None:
    async with AnthropicModel("claude-test", api_key="k") as model:
        assert model.name == "anthropic:claude-test"
        assert isinstance(model, Model)
    async with AnthropicModel("claude-test", api_key="k", name="support-claude") as named:
        assert named.name == "support-claude"


async def test_a_given_client_is_used_without_its_retries_and_left_open(fake_anthropic: FakeAnthropic) -> None:
    client = anthropic.AsyncAnthropic(api_key="client-key", base_url=fake_anthropic.base_url, max_retries=5)
    fake_anthropic.script(error(529, "overloaded_error", "Overloaded"))
    async with AnthropicModel("claude-test", client=client, max_retries=0) as model:
        _, exc = await collect_until_error(model)
    assert exc.code == "model_unavailable"
    assert len(fake_anthropic.requests) == 1  # the client's own 5 retries were off
    assert not client.is_closed()
    await client.close()
    with pytest.raises(UserError):
        AnthropicModel("claude-test", client=client, api_key="k")


async def test_a_closed_model_refuses_to_stream() -> None:
    model = AnthropicModel("claude-test", api_key="k")
    await model.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await anext(model.stream(ask()))
