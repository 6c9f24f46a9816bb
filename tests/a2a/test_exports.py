"""The public surface of ``channels.a2a``: one sorted ``__all__``, the union of the private modules'."""

from __future__ import annotations

import importlib
import pkgutil
import types

import channels.a2a as a2a_channel


def private_modules() -> list[types.ModuleType]:
    return [
        importlib.import_module(f"channels.a2a.{info.name}")
        for info in pkgutil.iter_modules(a2a_channel.__path__)
        if info.name.startswith("_")
    ]


def test_all_is_sorted_and_unique() -> None:
    # isort's order (ruff's RUF022): SCREAMING_CASE constants, then CamelCase classes, then the rest.
    def key(name: str) -> tuple[int, str]:
        if name.isupper() or (name[:1].isupper() and "_" in name and name.upper() == name):
            return (0, name)
        if name[:1].isupper():
            return (1, name)
        return (2, name)

    assert a2a_channel.__all__ == sorted(a2a_channel.__all__, key=key)
    assert len(set(a2a_channel.__all__)) == len(a2a_channel.__all__)


# Names the private modules share among themselves; everything else they declare is exported.
INTERNAL = {
    "INTERRUPTED_STATES",
    "JSON_MEDIA_TYPE",
    "MAX_TURN_TEXT",
    "TERMINAL_STATES",
    "V03_STREAMING_METHODS",
    "Decision",
    "JsonRpcCall",
    "JsonRpcDispatcher",
    "OutputModes",
    "ProtoParseError",
    "RefusedCall",
    "RpcResult",
    "StreamEvent",
    "TaskView",
    "UiParts",
    "agent_message",
    "approval_message",
    "data_part",
    "error_body",
    "from_json",
    "inline_files",
    "json_struct",
    "json_value",
    "map_gateway_errors",
    "public_base_url",
    "read_call",
    "read_decision",
    "state_of_run",
    "struct",
    "to_json",
    "turn_text",
}


def test_all_is_the_private_modules_all_except_the_internal_names() -> None:
    declared: set[str] = set()
    for module in private_modules():
        for name in getattr(module, "__all__", []):
            assert hasattr(module, name), f"{module.__name__}.__all__ names {name!r}, which it lacks"
            if name in a2a_channel.__all__:
                assert getattr(a2a_channel, name) is getattr(module, name), f"{module.__name__}.{name}"
        declared.update(getattr(module, "__all__", []))
    assert set(a2a_channel.__all__) == declared - INTERNAL
    assert INTERNAL <= declared


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from channels.a2a import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(a2a_channel.__all__)


def test_public_classes_and_functions_of_the_private_modules_are_declared() -> None:
    undeclared = []
    for module in private_modules():
        declared = set(getattr(module, "__all__", []))
        for name, value in vars(module).items():
            if name.startswith("_") or name in declared:
                continue
            if getattr(value, "__module__", None) == module.__name__ and isinstance(value, type | types.FunctionType):
                undeclared.append(f"{module.__name__}.{name}")
    assert undeclared == []
