"""Fixtures shared by the tool SDK tests (fixtures only: test modules never import this file)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tools

MakeCtx = Callable[..., tools.ToolContext]
MakeRegistry = Callable[..., tools.ToolRegistry]


@pytest.fixture
def actor() -> tools.Actor:
    return tools.Actor("u1", ["member"], "t1")


@pytest.fixture
def make_ctx(actor: tools.Actor) -> MakeCtx:
    """Build a ToolContext; the actor defaults to ``actor``."""

    def make(who: tools.Actor | None = None, **kwargs: Any) -> tools.ToolContext:
        kwargs.setdefault("run_id", "run1")
        kwargs.setdefault("tool_call_id", "call1")
        return tools.ToolContext(actor=who or actor, **kwargs)

    return make


@pytest.fixture
def ctx(make_ctx: MakeCtx) -> tools.ToolContext:
    return make_ctx()


@pytest.fixture
def make_registry() -> MakeRegistry:
    """Build a ToolRegistry whose transient retries do not wait."""

    def make(*items: Any, **kwargs: Any) -> tools.ToolRegistry:
        kwargs.setdefault("transient_retry", tools.TransientRetry(backoff=0))
        return tools.ToolRegistry(items, **kwargs)

    return make


@pytest.fixture
def clean_modules() -> Iterator[None]:
    """Forget every module a test imported (discovery writes throwaway modules)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]
