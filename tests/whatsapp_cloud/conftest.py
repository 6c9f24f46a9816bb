"""Fixtures of the Cloud API tests: the recording Graph server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .graph import Graph


@pytest.fixture
async def graph() -> AsyncIterator[Graph]:
    recorder = Graph()
    await recorder.start()
    yield recorder
    await recorder.close()
