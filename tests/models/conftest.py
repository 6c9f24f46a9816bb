"""Fixtures: models pointed at the fake servers (``fake``, ``fake_anthropic``, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.models import AnthropicModel, OpenAIModel
from tests.models.fake_anthropic import FakeAnthropic
from tests.models.fake_openai import FakeOpenAI

MakeModel = Callable[..., OpenAIModel]
MakeAnthropic = Callable[..., AnthropicModel]


@pytest.fixture
async def make_model(fake: FakeOpenAI) -> AsyncIterator[MakeModel]:
    """Build ``OpenAIModel``s against the fake (tiny backoff); all are closed at teardown."""
    models: list[OpenAIModel] = []

    def make(**options: Any) -> OpenAIModel:
        options = {"api_key": "test-key", "base_url": fake.base_url, "backoff": 0.01, "timeout": 5.0, **options}
        model = OpenAIModel("gpt-test", **options)
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()


@pytest.fixture
async def make_anthropic(fake_anthropic: FakeAnthropic) -> AsyncIterator[MakeAnthropic]:
    """Build ``AnthropicModel``s against the fake Messages API (tiny backoff); all closed at teardown."""
    models: list[AnthropicModel] = []

    def make(**options: Any) -> AnthropicModel:
        defaults = {"api_key": "test-key", "base_url": fake_anthropic.base_url, "backoff": 0.01, "timeout": 5.0}
        model = AnthropicModel("claude-test", **{**defaults, **options})
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()
