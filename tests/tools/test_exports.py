"""The public surface of ``tools``: one sorted ``__all__`` that matches the private modules'."""

from __future__ import annotations

import importlib
import pkgutil
import types

import tools


def private_modules() -> list[types.ModuleType]:
    return [
        importlib.import_module(f"tools.{info.name}")
        for info in pkgutil.iter_modules(tools.__path__)
        if info.name.startswith("_")
    ]


def test_all_is_sorted_and_unique() -> None:
    # isort's order (ruff's RUF022): SCREAMING_CASE constants, then CamelCase classes, then the rest.
    def key(name: str) -> tuple[int, str]:
        if name.isupper():
            return (0, name)
        if name[:1].isupper():
            return (1, name)
        return (2, name)

    assert tools.__all__ == sorted(tools.__all__, key=key)
    assert len(set(tools.__all__)) == len(tools.__all__)


def test_every_name_in_all_exists() -> None:
    missing = [name for name in tools.__all__ if not hasattr(tools, name)]
    assert missing == []


def test_all_is_the_union_of_the_private_modules_all() -> None:
    modules = private_modules()
    assert len(modules) >= 10
    declared: set[str] = set()
    for module in modules:
        own = getattr(module, "__all__", [])
        for name in own:
            assert hasattr(module, name), f"{module.__name__}.__all__ names {name!r}, which it lacks"
        declared.update(own)
    assert set(tools.__all__) == declared


def test_exports_are_the_objects_defined_in_the_private_modules() -> None:
    for module in private_modules():
        for name in getattr(module, "__all__", []):
            assert getattr(tools, name) is getattr(module, name), name


def test_public_classes_and_functions_of_the_private_modules_are_declared() -> None:
    undeclared = []
    for module in private_modules():
        declared = set(getattr(module, "__all__", []))
        for name, value in vars(module).items():
            if name.startswith("_") or name in declared:
                continue
            defined_here = getattr(value, "__module__", None) == module.__name__
            if defined_here and isinstance(value, type | types.FunctionType):
                undeclared.append(f"{module.__name__}.{name}")
    # Helpers the package uses internally; anything else public must be exported.
    assert sorted(undeclared) == [
        "tools._confirmed.canonical_json",
        "tools._models.PositionalModel",
        "tools._tool.call_hook",
        "tools._tool.is_tool_like",
        "tools._ui.is_component_name",
    ]


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from tools import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(tools.__all__)
