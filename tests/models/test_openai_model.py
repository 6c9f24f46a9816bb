"""``OpenAIModel`` against a fake OpenAI-compatible server on loopback, through the real SDK."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from typing import Any

import openai
import pytest
from aiohttp.test_utils import unused_port

from gateway import ModelError
from gateway.events import Usage
from gateway.models import (
    AssistantMessage,
    Model,
    ModelChunk,
    ModelRequest,
    OpenAIModel,
    TextChunk,
    ToolCall,
    ToolCallRequest,
    ToolMessage,
    UserMessage,
)
from tests.models.conftest import MakeModel
from tests.models.fake_openai import FakeOpenAI, error, finish, role, text, tool, usage
from tools import ToolDefinition, UserError

WATCHDOG = 5.0
"""Seconds any test waits for the model before failing (nothing legitimate takes this long)."""


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


async def collect(model: OpenAIModel, request: ModelRequest | None = None) -> list[ModelChunk]:
    async with asyncio.timeout(WATCHDOG):
        return [chunk async for chunk in model.stream(request or ask())]


async def collect_until_error(model: OpenAIModel) -> tuple[list[ModelChunk], ModelError]:
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as raised:
        async with asyncio.timeout(WATCHDOG):
            async for chunk in model.stream(ask()):
                chunks.append(chunk)
    return chunks, raised.value


# -- streaming -----------------------------------------------------------------------------------


async def test_text_is_yielded_piece_by_piece_while_the_server_still_streams(
    fake: FakeOpenAI, make_model: MakeModel
) -> None:
    first_sent, second_sent = asyncio.Event(), asyncio.Event()
    fake.script(
        fake.sse(role(), text("Hel"), first_sent, text("lo"), second_sent, text(" world"), finish(), usage(5, 3))
    )
    model = make_model()
    async with contextlib.aclosing(model.stream(ask())) as chunks, asyncio.timeout(WATCHDOG):
        # The server is held before "lo": "Hel" can only have come from a live stream.
        assert await anext(chunks) == TextChunk("Hel")
        first_sent.set()
        assert await anext(chunks) == TextChunk("lo")
        second_sent.set()
        rest = [chunk async for chunk in chunks]
    assert rest == [TextChunk(" world"), Usage(input_tokens=5, output_tokens=3, model_calls=1)]


async def test_a_consumer_may_stop_early(fake: FakeOpenAI, make_model: MakeModel) -> None:
    never = asyncio.Event()
    fake.script(fake.sse(text("Hel"), never, text("lo")), fake.sse(text("again"), finish()))
    model = make_model()
    async with contextlib.aclosing(model.stream(ask())) as chunks, asyncio.timeout(WATCHDOG):
        assert await anext(chunks) == TextChunk("Hel")
    # The abandoned stream was closed and the client still works.
    assert await collect(model) == [TextChunk("again"), Usage(model_calls=1)]


async def test_tool_call_arguments_split_across_chunks(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(
        fake.sse(
            role(),
            text("Let me check."),
            tool(0, id="call_1", name="get_weather"),
            tool(0, args='{"ci'),
            tool(0, args='ty": "Lis'),
            tool(0, args='bon"}'),
            finish("tool_calls"),
            usage(12, 9),
        )
    )
    assert await collect(make_model()) == [
        TextChunk("Let me check."),
        ToolCallRequest(name="get_weather", args={"city": "Lisbon"}, id="call_1"),
        Usage(input_tokens=12, output_tokens=9, model_calls=1),
    ]


async def test_interleaved_tool_calls_are_assembled_by_index(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(
        fake.sse(
            role(),
            tool(0, id="call_a", name="get_weather"),
            tool(1, id="call_b", name="search_news"),
            tool(1, args='{"query": '),
            tool(0, args='{"city": '),
            tool(0, args='"Lisbon"}'),
            tool(1, args='"Lisbon"}'),
            finish("tool_calls"),
        )
    )
    assert await collect(make_model()) == [
        ToolCallRequest(name="get_weather", args={"city": "Lisbon"}, id="call_a"),
        ToolCallRequest(name="search_news", args={"query": "Lisbon"}, id="call_b"),
        Usage(model_calls=1),
    ]


async def test_a_sloppy_server_without_indexes_or_deltas_still_works(fake: FakeOpenAI, make_model: MakeModel) -> None:
    no_delta = finish("tool_calls")
    del no_delta["choices"][0]["delta"]
    fake.script(
        fake.sse(
            tool(None, id="call_a", name="get_weather", args='{"city": '),
            tool(None, args='"Lisbon"}'),
            tool(None, id="call_b", name="get_weather", args='{"city": "Porto"}'),
            no_delta,
        )
    )
    assert await collect(make_model()) == [
        ToolCallRequest(name="get_weather", args={"city": "Lisbon"}, id="call_a"),
        ToolCallRequest(name="get_weather", args={"city": "Porto"}, id="call_b"),
        Usage(model_calls=1),
    ]


@pytest.mark.parametrize(
    ("arguments", "args"),
    [
        pytest.param('{"city": "Lis', '{"city": "Lis', id="truncated"),
        pytest.param("[1, 2]", "[1, 2]", id="not-an-object"),
        pytest.param("", {}, id="empty"),
    ],
)
async def test_arguments_that_are_not_a_json_object_pass_through_as_text(
    fake: FakeOpenAI, make_model: MakeModel, arguments: str, args: Any
) -> None:
    fake.script(fake.sse(tool(0, id="call_1", name="get_weather", args=arguments), finish("tool_calls")))
    chunks = await collect(make_model())
    assert chunks[0] == ToolCallRequest(name="get_weather", args=args, id="call_1")


async def test_usage_defaults_to_one_call_when_the_server_reports_none(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.sse(text("Hi"), finish()))
    assert await collect(make_model()) == [TextChunk("Hi"), Usage(input_tokens=0, output_tokens=0, model_calls=1)]


async def test_request_maps_instructions_history_and_tools(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.sse(text("Porto is cloudy."), finish()))
    weather = ToolDefinition(
        name="get_weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        kind="read",
    )
    history: list[UserMessage | AssistantMessage | ToolMessage] = [
        UserMessage(content="Weather in Lisbon?"),
        AssistantMessage(tool_calls=[ToolCall(id="tc_1", name="get_weather", arguments='{"city":"Lisbon"}')]),
        ToolMessage(tool_call_id="tc_1", name="get_weather", content='{"sky":"sunny"}'),
        AssistantMessage(content="Sunny."),
    ]
    model = make_model(temperature=0.2, extra_body={"top_k": 5})
    await collect(model, ask("And Porto?", history=history, tools=[weather]))

    [sent] = fake.requests
    assert sent.headers["Authorization"] == "Bearer test-key"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You help."},
            {"role": "user", "content": "Weather in Lisbon?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "tc_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Lisbon"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "tc_1", "content": '{"sky":"sunny"}'},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "And Porto?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "The weather in a city.",
                    "parameters": weather.parameters,
                },
            }
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "top_k": 5,
    }


async def test_request_without_tools_or_instructions_omits_them(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.sse(text("Hi"), finish()))
    await collect(make_model(), ask("Hello?", instructions=""))
    [sent] = fake.requests
    assert sent.body["messages"] == [{"role": "user", "content": "Hello?"}]
    assert "tools" not in sent.body
    assert "temperature" not in sent.body


# -- retries -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "value", "wait"),
    [
        pytest.param("Retry-After", "0", 0.0, id="seconds"),
        pytest.param("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT", 0.0, id="past-date"),
        pytest.param("retry-after-ms", "30", 0.03, id="ms"),
    ],
)
async def test_rate_limit_is_retried_after_the_servers_retry_after(
    fake: FakeOpenAI, make_model: MakeModel, header: str, value: str, wait: float
) -> None:
    fake.script(error(429, "Rate limit reached", headers={header: value}), fake.sse(text("ok"), finish()))
    # A computed backoff would wait 30 s and trip the watchdog: only Retry-After makes this quick.
    model = make_model(backoff=60.0)
    started = time.monotonic()
    assert await collect(model) == [TextChunk("ok"), Usage(model_calls=1)]
    assert time.monotonic() - started >= wait
    assert len(fake.requests) == 2


async def test_a_retry_after_beyond_the_ceiling_is_not_waited_for(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(error(429, "Quota exceeded", headers={"Retry-After": "3600"}), fake.sse(text("never"), finish()))
    _, exc = await collect_until_error(make_model())
    assert (exc.code, exc.retryable) == ("model_rate_limited", True)
    assert "Quota exceeded" in str(exc)
    assert len(fake.requests) == 1


async def test_server_errors_are_retried_with_backoff(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(error(503, "Overloaded"), error(500, "Oops"), fake.sse(text("ok"), finish()))
    assert await collect(make_model()) == [TextChunk("ok"), Usage(model_calls=1)]
    assert len(fake.requests) == 3


async def test_server_errors_beyond_max_retries_fail_retryable(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(*[error(500, "The server had an error")] * 3, fake.sse(text("never"), finish()))
    _, exc = await collect_until_error(make_model(max_retries=2))
    assert (exc.code, exc.retryable) == ("model_unavailable", True)
    assert "The server had an error" in str(exc)
    assert isinstance(exc.__cause__, openai.InternalServerError)
    assert len(fake.requests) == 3


async def test_a_bad_request_fails_at_once_with_the_servers_message(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(error(400, "Invalid 'messages[1].content': string too long."), fake.sse(text("never"), finish()))
    _, exc = await collect_until_error(make_model())
    assert (exc.code, exc.retryable, exc.status) == ("model_error", False, 502)
    assert "Invalid 'messages[1].content': string too long." in str(exc)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failures_are_model_auth(fake: FakeOpenAI, make_model: MakeModel, status: int) -> None:
    fake.script(error(status, "Incorrect API key provided"))
    _, exc = await collect_until_error(make_model())
    assert (exc.code, exc.retryable) == ("model_auth", False)
    assert "Incorrect API key provided" in str(exc)
    assert len(fake.requests) == 1


async def test_a_dropped_connection_before_any_output_is_retried(fake: FakeOpenAI, make_model: MakeModel) -> None:
    # A partial tool call was streamed, but nothing reached the consumer yet: retrying is safe.
    fake.script(fake.sse(role(), tool(0, id="call_1", name="get_weather"), drop=True), fake.sse(text("ok"), finish()))
    assert await collect(make_model()) == [TextChunk("ok"), Usage(model_calls=1)]
    assert len(fake.requests) == 2


async def test_a_dropped_connection_after_text_is_not_retried(fake: FakeOpenAI, make_model: MakeModel) -> None:
    received = asyncio.Event()
    fake.script(fake.sse(text("Hel"), received, drop=True), fake.sse(text("Hello again"), finish()))
    chunks: list[ModelChunk] = []
    with pytest.raises(ModelError) as raised:
        async with asyncio.timeout(WATCHDOG):
            async for chunk in make_model().stream(ask()):
                chunks.append(chunk)
                received.set()  # drop only once "Hel" reached us
    assert chunks == [TextChunk("Hel")]
    # Retryable for the caller (the step can be redone), but never retried here: "Hel" was shown.
    assert (raised.value.code, raised.value.retryable) == ("model_unavailable", True)
    assert len(fake.requests) == 1


async def test_an_error_inside_the_stream_is_a_model_error(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.sse(text("Hi"), {"error": {"message": "The model is overloaded", "type": "server_error"}}))
    chunks, exc = await collect_until_error(make_model())
    assert chunks == [TextChunk("Hi")]
    assert exc.code == "model_error"
    assert "The model is overloaded" in str(exc)
    assert len(fake.requests) == 1


async def test_connection_refused_is_model_unavailable() -> None:
    model = OpenAIModel(
        "gpt-test", api_key="test-key", base_url=f"http://127.0.0.1:{unused_port()}/v1", max_retries=1, backoff=0.01
    )
    async with model:
        _, exc = await collect_until_error(model)
    assert (exc.code, exc.retryable) == ("model_unavailable", True)
    assert isinstance(exc.__cause__, openai.APIConnectionError)


@pytest.mark.parametrize(
    ("reply", "code", "public"),
    [
        pytest.param(
            error(500, "db down at 10.0.0.7"), "model_unavailable", "The assistant could not be reached.", id="5xx"
        ),
        pytest.param(
            error(401, "Incorrect API key sk-123"),
            "model_auth",
            "The assistant is not available: its model refused the gateway's credentials.",
            id="auth",
        ),
        pytest.param(
            error(429, "Quota of org-42 exceeded"), "model_rate_limited", "The assistant is busy right now.", id="429"
        ),
        pytest.param(
            error(400, "Invalid 'messages'"), "model_error", "The assistant could not answer this time.", id="400"
        ),
        pytest.param(None, "model_timeout", "The assistant took too long to answer.", id="timeout"),
    ],
)
async def test_what_people_read_names_no_model_url_or_server_words(
    fake: FakeOpenAI, make_model: MakeModel, reply: Any, code: str, public: str
) -> None:
    fake.script(reply if reply is not None else fake.stall())
    _, exc = await collect_until_error(make_model(name="openai:fake", max_retries=0, timeout=0.2))
    assert (exc.code, exc.public) == (code, public)
    assert "openai:fake" in str(exc)  # the log keeps the whole story


async def test_an_unreachable_model_is_not_named_to_people() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}/v1"
    async with OpenAIModel(
        "gpt-test", api_key="test-key", base_url=base_url, max_retries=0, name="openai:fake"
    ) as model:
        _, exc = await collect_until_error(model)
    assert exc.public == "The assistant could not be reached."
    assert "openai:fake" in str(exc) and base_url in str(exc)


# -- timeouts ------------------------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.stall(), fake.sse(text("never"), finish()))
    # A second, not less: the first request of a new client must reach the server on a busy machine.
    _, exc = await collect_until_error(make_model(timeout=1.0))
    assert (exc.code, exc.retryable) == ("model_timeout", True)
    assert isinstance(exc.__cause__, TimeoutError)
    assert len(fake.requests) == 1  # a timeout is the caller's bound: not multiplied by retries


async def test_a_stream_that_stalls_midway_times_out(fake: FakeOpenAI, make_model: MakeModel) -> None:
    fake.script(fake.sse(text("Hel"), asyncio.Event(), text("lo")))
    chunks, exc = await collect_until_error(make_model(timeout=0.2))
    assert chunks == [TextChunk("Hel")]
    assert exc.code == "model_timeout"


# -- configuration -------------------------------------------------------------------------------


async def test_key_and_base_url_fall_back_to_the_environment_read_once(
    fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    fake.script(fake.sse(text("Hi"), finish()))
    async with OpenAIModel("gpt-test") as model:
        monkeypatch.setenv("OPENAI_API_KEY", "changed-later")
        await collect(model)
    assert fake.requests[0].headers["Authorization"] == "Bearer env-key"


def test_a_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-test")


def test_a_missing_openai_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(UserError, match=r"pip install 'agora-gateway\[openai\]'"):
        OpenAIModel("gpt-test", api_key="test-key")


def test_gateway_imports_without_the_openai_package() -> None:
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "import gateway, gateway.models\n"
        "from gateway.models import OpenAIModel\n"
        "assert 'openai' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_retries": -1}, id="max_retries"),
        pytest.param({"timeout": 0}, id="timeout"),
        pytest.param({"backoff": -1.0}, id="backoff"),
        pytest.param({"client": object()}, id="client-and-key"),
    ],
)
def test_bad_arguments_are_user_errors(options: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        OpenAIModel("gpt-test", api_key="test-key", **options)


async def test_name_and_protocol() -> None:
    async with OpenAIModel("gpt-test", api_key="test-key") as model:
        assert model.name == "openai:gpt-test"
        assert isinstance(model, Model)
    async with OpenAIModel("gpt-test", api_key="test-key", name="writer") as model:
        assert model.name == "writer"


async def test_a_given_client_is_used_without_its_retries_and_left_open(fake: FakeOpenAI) -> None:
    async with openai.AsyncOpenAI(api_key="client-key", base_url=fake.base_url, max_retries=5) as client:
        model = OpenAIModel("gpt-test", client=client, backoff=0.01)
        assert model.client.max_retries == 0
        fake.script(error(500, "Oops"), error(500, "Oops"), fake.sse(text("Hi"), finish()))
        _, exc = await collect_until_error(OpenAIModel("gpt-test", client=client, max_retries=1, backoff=0.01))
        assert exc.code == "model_unavailable"
        assert len(fake.requests) == 2  # one try and our one retry: none from the SDK
        assert await collect(model) == [TextChunk("Hi"), Usage(model_calls=1)]
        assert fake.requests[0].headers["Authorization"] == "Bearer client-key"
        await model.aclose()
        assert not client.is_closed()


async def test_a_closed_model_refuses_to_stream() -> None:
    model = OpenAIModel("gpt-test", api_key="test-key")
    await model.aclose()
    await model.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await collect(model)
