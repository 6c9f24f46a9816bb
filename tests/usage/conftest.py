"""Shared pieces of the usage tests: a priced scripted model, turns, and the app under the test client."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway import ModelPrice, Turn
from gateway.events import Usage
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import MemoryStore, SqliteStore, Store
from tools import Actor

from ..conftest import own_redis_store
from ..web.conftest import make_client, settings, token_for  # noqa: F401 - fixtures and helpers shared

ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])
ADMIN = Actor(id="root", roles=["admin"])

GPT = "openai:gpt-4o"
PRICES = {GPT: ModelPrice(input_per_million=2.5, output_per_million=10.0)}


def step(
    text: str | None = "Done.", *, tokens: tuple[int, int] = (1000, 200), calls: list[Any] | None = None
) -> ScriptStep:
    """A model step that reports ``tokens`` (input, output)."""
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1], model_calls=1)
    return ScriptStep(text=text, tool_calls=calls or [], usage=usage)


def tool_step(name: str, args: dict[str, Any], tokens: tuple[int, int] = (1000, 200)) -> ScriptStep:
    return step(None, tokens=tokens, calls=[ToolCallRequest(name=name, args=args)])


def cost(tokens: tuple[int, int]) -> float:
    return PRICES[GPT].input_per_million * tokens[0] / 1e6 + PRICES[GPT].output_per_million * tokens[1] / 1e6


def model(*steps: ScriptStep, name: str = GPT) -> ScriptedModel:
    return ScriptedModel(list(steps), name=name)


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def turn(thread_id: str, text: str = "hello", actor: Actor = ALICE, **fields: Any) -> Turn:
    return Turn(thread_id=thread_id, actor=actor, text=text, **fields)


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def ledger_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The test on a ``MemoryStore``, a ``SqliteStore`` file and the shared Redis under a prefix of its own."""
    if request.param == "redis":
        async with own_redis_store(request.getfixturevalue("redis_url")) as redis:
            yield redis
        return
    store: Store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "agora.db")
    yield store
    await store.aclose()
