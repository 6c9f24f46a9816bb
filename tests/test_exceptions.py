"""Every exception class of ours sits inside the trees drawn in the ``_errors`` docstrings.

The trees are read from the docstrings themselves (``gateway/_errors.py``, ``tools/_errors.py``,
``renderers/_errors.py``), so the drawing and the code cannot drift apart:

- every class drawn under a parent subclasses that parent;
- every public exception class defined in ``gateway``, ``channels``, ``renderers`` or ``tools``
  is drawn;
- every exception class, private ones included, descends from the drawn root (``AgoraError``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path

import pytest

import channels
import gateway
import renderers
import tools
from tools import AgoraError

PACKAGES = (tools, renderers, gateway, channels)
TREE_MODULES = ("gateway._errors", "tools._errors", "renderers._errors")
NOT_DRAWN_YET: tuple[str, ...] = ()
"""Packages whose public exceptions are not required in a drawing yet (none: every channel draws its own)."""

_NODE = re.compile(r"^(?P<lead>\s*(?:[│ ]   )*(?:├── |└── )?)(?P<name>[A-Z]\w+)\b")


def all_modules() -> list[types.ModuleType]:
    found: list[types.ModuleType] = []
    for package in PACKAGES:
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
            if info.name.rsplit(".", 1)[-1] == "__main__":
                continue  # running it is what importing it does
            found.append(importlib.import_module(info.name))
    return found


def defined_exceptions() -> dict[str, type[BaseException]]:
    """``module.Class`` -> class, for every exception class defined (not imported) in our packages."""
    classes: dict[str, type[BaseException]] = {}
    for module in all_modules():
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                classes[f"{module.__name__}.{name}"] = value
    return classes


def drawn_edges(docstring: str) -> list[tuple[str, str | None]]:
    """``(class, parent)`` for every node of the tree drawn after ``::`` (``None`` for the root)."""
    _, _, drawing = docstring.partition("::")
    stack: list[tuple[int, str]] = []
    edges: list[tuple[str, str | None]] = []
    for line in drawing.splitlines():
        if line.strip() and not line.startswith(" "):
            break  # the prose after the drawing (the drawing itself is indented)
        match = _NODE.match(line)
        if match is None:
            continue
        column = len(match["lead"])
        while stack and stack[-1][0] >= column:
            stack.pop()
        edges.append((match["name"], stack[-1][1] if stack else None))
        stack.append((column, match["name"]))
    return edges


def drawings() -> dict[str, list[tuple[str, str | None]]]:
    return {name: drawn_edges(importlib.import_module(name).__doc__ or "") for name in TREE_MODULES}


def test_the_drawings_are_read() -> None:
    trees = drawings()
    assert ("GatewayError", "AgoraError") in trees["gateway._errors"]
    assert ("StoreUnavailableError", "GatewayError") in trees["gateway._errors"]
    assert ("ToolNotFoundError", "ToolError") in trees["tools._errors"]
    assert ("RemoteError", "RenderFailedError") in trees["renderers._errors"]
    assert all(parent is None for name, parent in trees["tools._errors"] if name == "AgoraError")


def test_every_drawn_class_subclasses_its_drawn_parent() -> None:
    by_name: dict[str, list[type[BaseException]]] = {}
    for cls in defined_exceptions().values():
        by_name.setdefault(cls.__name__, []).append(cls)
    wrong = []
    for module, edges in drawings().items():
        for name, parent in edges:
            assert name in by_name, f"{module} draws {name}, which no module defines"
            if parent is None:
                continue
            for cls in by_name[name]:
                if not any(base.__name__ == parent for base in cls.__mro__[1:]):
                    wrong.append(f"{cls.__module__}.{name} is drawn under {parent} in {module}")
    assert wrong == []


def test_every_public_exception_is_drawn() -> None:
    drawn = {name for edges in drawings().values() for name, _ in edges}
    undrawn = [
        qualified
        for qualified, cls in defined_exceptions().items()
        if not cls.__name__.startswith("_")
        and cls.__name__ not in drawn
        and not cls.__module__.startswith(NOT_DRAWN_YET)
    ]
    assert undrawn == [], "draw these in an _errors docstring, under the class they subclass"


def test_every_exception_descends_from_the_drawn_root() -> None:
    stray = [qualified for qualified, cls in defined_exceptions().items() if not issubclass(cls, AgoraError)]
    assert stray == [], "subclass GatewayError (or the class of the tree that fits), or AgoraError for a signal"


@pytest.mark.parametrize(
    "name", ["UnauthenticatedError", "RateLimitedError", "InvalidTokenError", "StoreUnavailableError"]
)
def test_the_moved_errors_stay_importable_where_they_were(name: str) -> None:
    import gateway._identity
    import gateway._services

    assert getattr(gateway, name) is getattr(importlib.import_module("gateway._errors"), name)
    home = gateway._identity if name == "InvalidTokenError" else gateway._services
    if name != "StoreUnavailableError":
        assert getattr(home, name) is getattr(gateway, name)


REDIS_BOUNDARIES = ("gateway/stores/_redis", "renderers/_media.py")
"""The Redis backends: they alone see redis's exceptions, and translate them (``StoreUnavailableError``,
``MediaUnavailableError``). The render cache catches nothing of redis's by name: a miss is a miss."""


def test_no_module_outside_the_redis_backends_touches_redis_exceptions() -> None:
    root = Path(__file__).resolve().parents[1]
    offenders = []
    for package in ("gateway", "channels", "renderers", "tools"):
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(REDIS_BOUNDARIES):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("redis.exceptions"):
                    offenders.append(f"{relative}:{node.lineno} imports {node.module}")
                elif isinstance(node, ast.Import) and any(a.name.startswith("redis.exceptions") for a in node.names):
                    offenders.append(f"{relative}:{node.lineno} imports redis.exceptions")
                elif isinstance(node, ast.Attribute | ast.Name) and (
                    (node.attr if isinstance(node, ast.Attribute) else node.id) == "RedisError"
                ):
                    offenders.append(f"{relative}:{node.lineno} names RedisError")
    assert offenders == []
