"""The one ``Tool`` shape and the four ways to author it.

``ai_tool`` decorates a class; ``ReadTool`` / ``ActionTool`` / ``BaseTool`` are bases to subclass;
``define_tool`` wraps a function. ``as_tool`` turns any of them into a ``Tool``.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._actor import Actor
from ._errors import ToolDefinitionError, ToolInputInvalidError
from ._presentation import ToolPresentation
from ._schema import input_json_schema
from ._ui import UiCapabilities

__all__ = [
    "TOOL_NAME_PATTERN",
    "ActionTool",
    "BaseTool",
    "DescribeScope",
    "EmptyInput",
    "ReadTool",
    "Tool",
    "ToolDescription",
    "ToolKind",
    "ToolLike",
    "ToolObject",
    "ai_tool",
    "as_tool",
    "default_tool_name",
    "define_tool",
]

ToolKind = Literal["read", "action"]
"""``read`` runs on its own; ``action`` waits for a person's approval."""

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)  # used with fullmatch: "$" alone accepts a trailing "\n"
_OPTIONS_ATTR = "__agora_tool__"


class EmptyInput(BaseModel):
    """The input of a tool that takes no arguments."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True, kw_only=True)
class DescribeScope:
    """What a tool's ``describe(scope)`` hook may look at for one turn."""

    actor: Actor
    thread_id: str | None = None
    agent_name: str | None = None
    ui_capabilities: UiCapabilities | None = None


class ToolDescription(BaseModel):
    """What ``describe(scope)`` may return to change how a tool is offered for one turn."""

    model_config = ConfigDict(extra="forbid")

    available: bool = True
    """``False`` hides the tool for this turn (and refuses calls to it as not found)."""
    description: str | None = None
    """Replaces the description the model sees."""
    input_schema: dict[str, Any] | None = Field(default=None)
    """Replaces the JSON schema the model sees (validation still uses ``input``)."""


Hook = Callable[..., Any]


@dataclass(frozen=True, kw_only=True)
class Tool:
    """A governed capability the model may call; every authoring form produces one.

    Hooks may be sync or async. ``execute(input, ctx)`` receives the validated input model;
    a sync ``execute`` runs in a worker thread so it never blocks the event loop.
    """

    name: str
    description: str
    input: type[BaseModel]
    execute: Hook
    kind: ToolKind = "read"
    roles: tuple[str, ...] = ()
    ability: str | None = None
    enabled: bool | Callable[[], bool | Awaitable[bool]] = True
    presentation: ToolPresentation | None = None
    commit_presentation: ToolPresentation | None = None
    """A confirmed tool's words for its commit call (``confirm=True``); ``presentation`` words
    the preview. ``None``: one wording for both."""
    timeout: float | None = None
    present: Hook | None = None
    """``present(output, ctx) -> UiComponent | list[UiComponent] | None``."""
    preflight: Hook | None = None
    """``preflight(input, ctx, phase) -> PreflightReady | PreflightDenied | PreflightCompleted``."""
    is_enabled: Hook | None = None
    """``is_enabled() -> bool``: the feature-flag gate, read every turn."""
    can_use: Hook | None = None
    """``can_use(actor) -> bool``: the per-user gate."""
    describe: Hook | None = None
    """``describe(scope) -> ToolDescription | dict | None``: per-turn availability and wording."""
    source: str = field(default="", compare=False)
    """Where the tool was declared (``module.Qualname``), for logs."""

    def presentation_for(self, data: Mapping[str, Any]) -> ToolPresentation | None:
        """The words of a call with these (validated, JSON) arguments.

        A confirmed tool's commit call has its own (``commit_presentation``).
        """
        if self.commit_presentation is not None and data.get("confirm") is True:
            return self.commit_presentation
        return self.presentation

    @functools.cached_property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of ``input``, self-contained, as the model sees it."""
        return input_json_schema(self.input)

    @functools.cached_property
    def parameters_json(self) -> str:
        """``parameters`` as JSON text: a fresh copy per turn costs one ``json.loads``."""
        return json.dumps(self.parameters)

    def validate_input(self, args: Any) -> BaseModel:
        """Validate the model's arguments against ``input``.

        Raises:
            ToolInputInvalidError: With the field errors; ``execute`` must not run.
        """
        if isinstance(args, self.input):
            return args
        try:
            return self.input.model_validate(args if args is not None else {})
        except ValidationError as exc:
            errors = [
                {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": str(err.get("type", ""))}
                for err in exc.errors(include_url=False)
            ]
            fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg']}" for e in errors)
            raise ToolInputInvalidError(
                f"Invalid arguments for tool {self.name!r}: {fields}", tool=self.name, errors=errors
            ) from None


async def call_hook(hook: Hook, *args: Any) -> Any:
    """Call a sync or async hook and return its result."""
    result = hook(*args)
    if inspect.isawaitable(result):
        return await result
    return result


def default_tool_name(class_name: str) -> str:
    """The name a class tool gets by default: ``GetOrderTool`` -> ``get_order``, ``SQLQueryTool`` -> ``sql_query``."""
    if not isinstance(class_name, str):
        raise TypeError(f"default_tool_name() needs a class name str, not {class_name!r}")
    base = class_name[:-4] if class_name.endswith("Tool") and len(class_name) > 4 else class_name
    snake = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", base)
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", snake)
    return snake.lower()


_OPTION_NAMES = frozenset(
    {
        "name", "description", "input", "kind", "roles", "ability", "enabled", "presentation", "timeout",
        "present", "preflight", "is_enabled", "can_use", "describe",
    }
)  # fmt: skip
_HOOK_NAMES = ("present", "preflight", "is_enabled", "can_use", "describe")


def _check_options(options: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(options) - _OPTION_NAMES - {"execute"})
    if unknown:
        raise ToolDefinitionError(f"{where}: unknown tool option(s) {', '.join(unknown)}")


def _check_scalars(options: Mapping[str, Any], label: str) -> None:
    kind = options.get("kind", "read")
    if kind not in ("read", "action"):
        raise ToolDefinitionError(f"{label}: kind must be 'read' or 'action', not {kind!r}")
    roles = options.get("roles")
    roles = () if roles is None else roles
    if isinstance(roles, str) or not isinstance(roles, Sequence) or not all(isinstance(r, str) for r in roles):
        raise ToolDefinitionError(f"{label}: roles must be a list of str, not {roles!r}")
    ability = options.get("ability")
    if ability is not None and (not isinstance(ability, str) or not ability):
        raise ToolDefinitionError(f"{label}: ability must be a non-empty str")
    enabled = options.get("enabled", True)
    if not isinstance(enabled, bool) and not callable(enabled):
        raise ToolDefinitionError(f"{label}: enabled must be a bool or a callable")
    timeout = options.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise ToolDefinitionError(f"{label}: timeout must be a positive number of seconds")


def _check_presentation(presentation: Any, label: str) -> ToolPresentation | None:
    if presentation is None or isinstance(presentation, ToolPresentation):
        return presentation
    if not isinstance(presentation, Mapping):
        raise ToolDefinitionError(f"{label}: presentation must be a ToolPresentation or a dict")
    try:
        return ToolPresentation.model_validate(presentation)
    except ValidationError as exc:
        raise ToolDefinitionError(f"{label}: invalid presentation: {exc}") from None


def _build(options: Mapping[str, Any], *, execute: Any, where: str) -> Tool:
    name = options.get("name")
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        raise ToolDefinitionError(f"{where}: tool name {name!r} must match {TOOL_NAME_PATTERN}")
    label = f"tool {name!r} ({where})"
    description = options.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ToolDefinitionError(f"{label}: a non-empty str description is required (the model reads it)")
    input_model = options.get("input")
    input_model = EmptyInput if input_model is None else input_model
    if not (isinstance(input_model, type) and issubclass(input_model, BaseModel)):
        raise ToolDefinitionError(f"{label}: input must be a pydantic BaseModel subclass, not {input_model!r}")
    _check_scalars(options, label)
    presentation = _check_presentation(options.get("presentation"), label)
    if not callable(execute):
        raise ToolDefinitionError(f"{label}: execute must be callable")
    hooks: dict[str, Any] = {}
    for hook in _HOOK_NAMES:
        value = options.get(hook)
        if value is not None and not callable(value):
            raise ToolDefinitionError(f"{label}: {hook} must be callable")
        hooks[hook] = value
    kind = options.get("kind", "read")
    if hooks["preflight"] is not None and kind != "action":
        raise ToolDefinitionError(f"{label}: preflight applies to action tools only")
    timeout = options.get("timeout")
    return Tool(
        name=name,
        description=description.strip(),
        input=input_model,
        execute=_as_async(execute),
        kind=kind,
        roles=tuple(options.get("roles") or ()),
        ability=options.get("ability"),
        enabled=options.get("enabled", True),
        presentation=presentation,
        timeout=float(timeout) if timeout is not None else None,
        source=where,
        **hooks,
    )


def _as_async(fn: Hook) -> Hook:
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        return fn

    @functools.wraps(fn)
    async def in_thread(*args: Any) -> Any:
        result = await asyncio.to_thread(fn, *args)
        return await result if inspect.isawaitable(result) else result

    return in_thread


# -- classes: ai_tool and the bases ----------------------------------------------------------------

C = TypeVar("C", bound=type)


def ai_tool(**options: Any) -> Callable[[C], C]:
    """Declare a class with an ``execute(input, ctx)`` method as a tool.

    Options: ``name`` (default from the class name), ``description`` (required), ``input``,
    ``kind``, ``roles``, ``ability``, ``enabled``, ``presentation``, ``timeout``, and hooks as
    keyword functions (``present``, ``preflight``, ``is_enabled``, ``can_use``, ``describe``) when
    the class does not define them as methods. The class is returned unchanged but for the
    options it carries; register the class (built with no arguments) or an instance.
    """
    _check_options(options, "ai_tool()")
    if "execute" in options:
        raise ToolDefinitionError("ai_tool(): execute is the class's method, not an option")

    def decorate(cls: C) -> C:
        if not isinstance(cls, type):
            raise ToolDefinitionError(f"@ai_tool decorates a class, not {cls!r}; use define_tool for a function")
        if not callable(getattr(cls, "execute", None)):
            raise ToolDefinitionError(f"@ai_tool class {cls.__qualname__} has no execute(input, ctx) method")
        resolved = {"name": default_tool_name(cls.__name__), **options}
        # Build once now so a bad declaration fails where it is written, not at registration.
        _build(resolved, execute=getattr(cls, "execute", None), where=f"{cls.__module__}.{cls.__qualname__}")
        setattr(cls, _OPTIONS_ATTR, resolved)
        return cls

    return decorate


class BaseTool(abc.ABC):
    """Base of a class tool that declares its options as class attributes, ``kind`` included.

    Subclass, set ``description`` and ``input`` (and any other option), and implement
    ``execute``. Hooks (``present``, ``preflight``, ``is_enabled``, ``can_use``, ``describe``) are
    optional methods.
    """

    name: ClassVar[str | None] = None
    description: ClassVar[str | None] = None
    input: ClassVar[type[BaseModel] | None] = None
    kind: ClassVar[ToolKind] = "read"
    roles: ClassVar[Sequence[str]] = ()
    ability: ClassVar[str | None] = None
    enabled: ClassVar[bool | Callable[[], Any]] = True
    presentation: ClassVar[ToolPresentation | Mapping[str, Any] | None] = None
    timeout: ClassVar[float | None] = None

    @abc.abstractmethod
    async def execute(self, input: Any, ctx: Any) -> Any:
        """Do the tool's work with the validated ``input``; return JSON-serializable output."""


class ReadTool(BaseTool):
    """Base of a class tool that runs on its own (``kind`` is fixed to ``"read"``)."""

    kind: ClassVar[ToolKind] = "read"


class ActionTool(BaseTool):
    """Base of a class tool that waits for a person's approval (``kind`` is fixed to ``"action"``)."""

    kind: ClassVar[ToolKind] = "action"


_BASES = (BaseTool, ReadTool, ActionTool)


def _fixed_kind(cls: type) -> ToolKind | None:
    for base in cls.__mro__:
        if base is ReadTool:
            return "read"
        if base is ActionTool:
            return "action"
    return None


def _instance_options(instance: object, cls: type) -> tuple[dict[str, Any], str]:
    where = f"{cls.__module__}.{cls.__qualname__}"
    declared: dict[str, Any] | None = getattr(cls, _OPTIONS_ATTR, None)
    if declared is not None:
        options = dict(declared)
    else:
        options = {
            key: getattr(cls, key)
            for key in (
                "name",
                "description",
                "input",
                "kind",
                "roles",
                "ability",
                "enabled",
                "presentation",
                "timeout",
            )
        }
        options["name"] = options["name"] or default_tool_name(cls.__name__)
        fixed = _fixed_kind(cls)
        if fixed is not None and options["kind"] != fixed:
            base = "ReadTool" if fixed == "read" else "ActionTool"
            raise ToolDefinitionError(f"{where}: a {base} has kind {fixed!r}; subclass BaseTool to declare kind")
    for hook in _HOOK_NAMES:
        method = getattr(instance, hook, None)
        if callable(method):
            options[hook] = method
    return options, where


def is_tool_like(obj: object) -> bool:
    """Whether ``as_tool`` can turn ``obj`` into a tool (without building it)."""
    if isinstance(obj, Tool):
        return True
    cls = obj if isinstance(obj, type) else type(obj)
    if _OPTIONS_ATTR in vars(cls):
        return True
    return isinstance(cls, type) and issubclass(cls, BaseTool) and cls not in _BASES and not inspect.isabstract(cls)


class ToolObject(Protocol):
    """An instance of a class tool: ``@ai_tool``-decorated, or a ``ReadTool`` / ``ActionTool`` subclass.

    ``as_tool`` reads its options from its class and calls its ``execute``.
    """

    @property
    def execute(self) -> Callable[..., object]:
        """``execute(input, ctx)``: the call itself (sync or async)."""
        ...


ToolLike = Tool | ToolObject | type[ToolObject]
"""What registers as a tool: a ``Tool`` (``define_tool``), a class tool, or an instance of one."""


def as_tool(obj: ToolLike) -> Tool:
    """Turn any authoring form into a ``Tool``.

    Accepts a ``Tool`` (from ``define_tool``), a class decorated with ``ai_tool`` or subclassing
    ``ReadTool`` / ``ActionTool`` / ``BaseTool`` (built with no arguments), or an instance of one.

    Raises:
        ToolDefinitionError: ``obj`` is not a tool, or is declared wrongly.
    """
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, type):
        if not is_tool_like(obj):
            raise ToolDefinitionError(
                f"{obj.__qualname__} is not a tool: decorate it with @ai_tool or subclass ReadTool"
            )
        try:
            instance = obj()
        except TypeError as exc:
            raise ToolDefinitionError(
                f"{obj.__qualname__}() could not be built without arguments ({exc}); register an instance instead"
            ) from exc
        return as_tool(instance)
    cls = type(obj)
    if not is_tool_like(cls):
        raise ToolDefinitionError(f"{obj!r} is not a tool (use define_tool, @ai_tool or a ReadTool subclass)")
    options, where = _instance_options(obj, cls)
    execute = getattr(obj, "execute", None)
    return _build(options, execute=execute, where=where)


# -- functions: define_tool -------------------------------------------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


@overload
def define_tool(*, execute: Callable[..., Any], **options: Any) -> Tool: ...
@overload
def define_tool(**options: Any) -> Callable[[Callable[..., Any]], Tool]: ...
def define_tool(**options: Any) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a tool from a function ``execute(input, ctx)``.

    As a decorator, ``@define_tool(name=..., description=..., input=...)`` turns the function
    into a ``Tool`` (``name`` defaults to the function's name). As a call,
    ``define_tool(..., execute=fn)`` returns the ``Tool``. Hooks are keyword functions.
    """
    _check_options(options, "define_tool()")
    execute = options.pop("execute", None)

    def build(fn: Callable[..., Any]) -> Tool:
        if not callable(fn):
            raise ToolDefinitionError(f"define_tool(): execute must be callable, not {fn!r}")
        name = options.get("name") or getattr(fn, "__name__", None)
        where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        return _build({**options, "name": name}, execute=fn, where=where)

    if execute is not None:
        return build(execute)
    return build
