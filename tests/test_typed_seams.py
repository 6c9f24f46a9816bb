"""No ``Any`` where a newcomer plugs in: the seams' signatures name real types.

mypy (strict) checks the code against them; this test keeps the signatures themselves from
drifting back to ``Any`` (which mypy would accept silently).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, get_args, get_type_hints

import pytest

import gateway
import renderers
import tools
from gateway.models import Model


def mentions_any(hint: object) -> bool:
    if hint is Any:
        return True
    return any(mentions_any(arg) for arg in get_args(hint) if arg is not Ellipsis)


def hooks_of(cls: type) -> list[Callable[..., object]]:
    return [member for name, member in vars(cls).items() if inspect.isfunction(member) and not name.startswith("_")]


SEAMS: dict[str, list[Callable[..., object]]] = {
    "Model.stream": [Model.stream],
    "negotiate": [renderers.negotiate],
    "RuntimeObserver": hooks_of(gateway.RuntimeObserver),
    "EventHooks": hooks_of(gateway.EventHooks),
    "ToolObject": [tools.ToolObject.execute.fget],  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("seam", SEAMS)
def test_a_seam_names_no_any(seam: str) -> None:
    loose = [
        f"{function.__qualname__}({name})"
        for function in SEAMS[seam]
        for name, hint in get_type_hints(function).items()
        if mentions_any(hint)
    ]
    assert loose == []


def test_tool_like_is_a_union_of_real_types() -> None:
    assert tools.ToolLike is not Any
    assert not any(mentions_any(member) for member in get_args(tools.ToolLike))
    assert tools.Tool in get_args(tools.ToolLike)
