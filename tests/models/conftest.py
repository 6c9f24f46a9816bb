"""Fixtures: models pointed at the fake OpenAI-compatible server (``fake``, in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gateway.models import OpenAIModel
from tests.models.fake_openai import FakeOpenAI

MakeModel = Callable[..., OpenAIModel]


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
