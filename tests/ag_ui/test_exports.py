"""The public surface of ``channels.ag_ui``: one sorted ``__all__`` that matches the private modules'."""

from __future__ import annotations

import importlib
import pkgutil
import types

import channels.ag_ui as ag_ui


def private_modules() -> list[types.ModuleType]:
    return [
        importlib.import_module(f"channels.ag_ui.{info.name}")
        for info in pkgutil.iter_modules(ag_ui.__path__)
        if info.name.startswith("_")
    ]


def test_all_is_sorted_unique_and_the_union_of_the_private_modules() -> None:
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)

    assert ag_ui.__all__ == sorted(ag_ui.__all__, key=key)
    assert len(set(ag_ui.__all__)) == len(ag_ui.__all__)
    declared: set[str] = set()
    for module in private_modules():
        for name in module.__all__:
            assert getattr(ag_ui, name) is getattr(module, name), name
        declared.update(module.__all__)
    assert set(ag_ui.__all__) == declared


def test_public_classes_and_functions_of_the_private_modules_are_declared() -> None:
    undeclared = [
        f"{module.__name__}.{name}"
        for module in private_modules()
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in module.__all__
        and getattr(value, "__module__", None) == module.__name__
        and isinstance(value, type | types.FunctionType)
    ]
    assert undeclared == []
