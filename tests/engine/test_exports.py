"""The public surfaces of ``gateway``, ``gateway.models`` and ``gateway.events``.

Each keeps one sorted ``__all__`` that names every public name it has, and the names the README
and docs/architecture.md spell out (users' code and tests written by others rely on them) stay
importable.
"""

from __future__ import annotations

import importlib
import types

import pytest

import gateway
import gateway.events
import gateway.models


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def _public(module: types.ModuleType) -> set[str]:
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_") or name in {"annotations", "TYPE_CHECKING", "Any"}:
            continue
        if isinstance(value, types.ModuleType):
            continue  # submodules (gateway.events, gateway.stores...) are not re-exported names
        if not str(getattr(value, "__module__", None)).startswith("gateway"):
            continue  # imported for its own use (pydantic, tools...), not ours to export
        names.add(name)
    return names


@pytest.mark.parametrize("module", [gateway, gateway.models, gateway.events], ids=lambda m: m.__name__)
def test_all_is_sorted_unique_and_complete(module: types.ModuleType) -> None:
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert len(set(exported)) == len(exported)
    missing = [name for name in exported if getattr(module, name, None) is None]
    assert missing == []
    unlisted = _public(module) - set(exported)
    assert unlisted == set(), f"public but not in __all__: {sorted(unlisted)}"


DOCUMENTED_NAMES = {
    "gateway": [
        "Runtime", "Agent", "Turn", "Settings", "create_app", "sign_actor_token", "ActorResolver",
        "ApprovalPolicy", "ApprovalForbiddenError", "ApprovalExpiredError", "ApprovalSettledError",
        "ApprovalNotFoundError",
    ],
    "gateway.models": ["ScriptedModel", "ScriptStep", "ToolCallRequest", "OpenAIModel", "AnthropicModel"],
    "gateway.stores": ["MemoryStore", "RedisStore", "Store"],
    "gateway.demo": ["DemoModel"],
    "gateway.events": ["RunEvent", "Turn"],
}  # fmt: skip


@pytest.mark.parametrize(("module", "names"), DOCUMENTED_NAMES.items())
def test_the_documented_names_are_importable(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    assert [name for name in names if not hasattr(imported, name)] == []
