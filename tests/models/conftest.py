"""Fixtures: a fake OpenAI-compatible server on loopback, and models pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from gateway.models import OpenAIModel
from tests.models.fake_openai import FakeOpenAI

MakeModel = Callable[..., OpenAIModel]


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    server = await aiohttp_server(app)
    fake.base_url = str(server.make_url("/v1"))
    yield fake
    fake.release.set()  # stalled replies return, so the server closes without waiting


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
