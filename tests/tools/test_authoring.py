"""The four authoring forms, default names, name validation and declaration errors."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import tools


class KeyInput(BaseModel):
    key: str


# -- the four forms make one Tool shape ------------------------------------------------------------


def _by_ai_tool() -> Any:
    @tools.ai_tool(name="probe", description="Probe one key.", input=KeyInput, roles=["member"], timeout=5)
    class ProbeTool:
        async def execute(self, input: KeyInput, ctx: tools.ToolContext) -> dict[str, str]:
            return {"key": input.key, "form": "ai_tool"}

    return ProbeTool


def _by_read_tool() -> Any:
    class Probe(tools.ReadTool):
        name = "probe"
        description = "Probe one key."
        input = KeyInput
        roles = ["member"]
        timeout = 5

        async def execute(self, input: KeyInput, ctx: tools.ToolContext) -> dict[str, str]:
            return {"key": input.key, "form": "ReadTool"}

    return Probe


def _by_base_tool() -> Any:
    class Probe(tools.BaseTool):
        name = "probe"
        description = "Probe one key."
        input = KeyInput
        kind = "read"
        roles = ["member"]
        timeout = 5

        async def execute(self, input: KeyInput, ctx: tools.ToolContext) -> dict[str, str]:
            return {"key": input.key, "form": "BaseTool"}

    return Probe


def _by_define_tool_decorator() -> Any:
    @tools.define_tool(name="probe", description="Probe one key.", input=KeyInput, roles=["member"], timeout=5)
    async def probe(input: KeyInput, ctx: tools.ToolContext) -> dict[str, str]:
        return {"key": input.key, "form": "define_tool decorator"}

    return probe


def _by_define_tool_call() -> Any:
    async def run(input: KeyInput, ctx: tools.ToolContext) -> dict[str, str]:
        return {"key": input.key, "form": "define_tool call"}

    return tools.define_tool(
        name="probe", description="Probe one key.", input=KeyInput, roles=["member"], timeout=5, execute=run
    )


FORMS = {
    "ai_tool": _by_ai_tool,
    "ReadTool": _by_read_tool,
    "BaseTool": _by_base_tool,
    "define_tool decorator": _by_define_tool_decorator,
    "define_tool call": _by_define_tool_call,
}


def _shape(tool: tools.Tool) -> tuple[Any, ...]:
    return (tool.name, tool.description, tool.input, tool.kind, tool.roles, tool.timeout, tool.parameters)


@pytest.mark.parametrize("form", list(FORMS))
async def test_every_form_registers_as_the_same_tool_shape(form: str, ctx: tools.ToolContext) -> None:
    reference = tools.as_tool(_by_define_tool_call())
    registry = tools.ToolRegistry()
    tool = registry.register(FORMS[form]())

    assert type(tool) is tools.Tool
    assert _shape(tool) == _shape(reference)
    assert _shape(tool)[:6] == ("probe", "Probe one key.", KeyInput, "read", ("member",), 5.0)
    assert await registry.invoke("probe", {"key": "k1"}, ctx) == {"key": "k1", "form": form}


def test_define_tool_returns_a_tool_in_both_forms() -> None:
    assert isinstance(_by_define_tool_decorator(), tools.Tool)
    assert isinstance(_by_define_tool_call(), tools.Tool)


def test_ai_tool_returns_the_class_itself() -> None:
    class Plain:
        async def execute(self, input: Any, ctx: Any) -> None: ...

    assert tools.ai_tool(description="d")(Plain) is Plain


def test_a_class_tool_registers_as_class_or_instance() -> None:
    cls = _by_read_tool()
    by_class = tools.as_tool(cls)
    by_instance = tools.as_tool(cls())
    assert _shape(by_class) == _shape(by_instance)
    assert tools.as_tool(by_class) is by_class  # a Tool passes through unchanged


def test_kind_is_fixed_by_read_and_action_bases() -> None:
    class Purge(tools.ActionTool):
        description = "Purge a key."
        input = KeyInput

        async def execute(self, input: KeyInput, ctx: tools.ToolContext) -> None: ...

    class Look(tools.ReadTool):
        description = "Look."

        async def execute(self, input: Any, ctx: tools.ToolContext) -> None: ...

    class Declared(tools.BaseTool):
        description = "Declared."
        kind = "action"

        async def execute(self, input: Any, ctx: tools.ToolContext) -> None: ...

    assert tools.as_tool(Purge).kind == "action"
    assert tools.as_tool(Look).kind == "read"
    assert tools.as_tool(Declared).kind == "action"


def test_a_read_tool_may_not_declare_kind_action() -> None:
    class Sneaky(tools.ReadTool):
        description = "Claims to read."
        kind = "action"

        async def execute(self, input: Any, ctx: tools.ToolContext) -> None: ...

    with pytest.raises(tools.ToolDefinitionError, match="BaseTool to declare kind"):
        tools.as_tool(Sneaky)


def test_no_input_means_empty_input() -> None:
    @tools.define_tool(name="ping", description="Ping.")
    async def ping(input: Any, ctx: Any) -> str:
        return "pong"

    assert ping.input is tools.EmptyInput
    assert ping.parameters["properties"] == {}


def test_description_is_stripped() -> None:
    tool = tools.define_tool(name="x", description="  Says x.\n", execute=lambda i, c: None)
    assert tool.description == "Says x."


def test_source_names_where_the_tool_was_declared() -> None:
    tool = tools.as_tool(_by_read_tool())
    assert tool.source.endswith("_by_read_tool.<locals>.Probe")
    assert tool.source.startswith(__name__)


# -- default names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        ("GetOrderTool", "get_order"),
        ("SQLQueryTool", "sql_query"),
        ("GetWeatherTool", "get_weather"),
        ("HTTPRequestTool", "http_request"),
        ("PurgeCache", "purge_cache"),
        ("getOrderTool", "get_order"),
        ("OrderTool", "order"),
        ("Tool", "tool"),
        ("ToolTool", "tool"),
        ("Tooling", "tooling"),
        ("Order2Tool", "order2"),
    ],
)
def test_default_tool_name(class_name: str, expected: str) -> None:
    assert tools.default_tool_name(class_name) == expected


def test_class_forms_take_the_default_name() -> None:
    @tools.ai_tool(description="Get one order.")
    class GetOrderTool:
        async def execute(self, input: Any, ctx: Any) -> None: ...

    class SQLQueryTool(tools.ReadTool):
        description = "Run a query."

        async def execute(self, input: Any, ctx: Any) -> None: ...

    assert tools.as_tool(GetOrderTool).name == "get_order"
    assert tools.as_tool(SQLQueryTool).name == "sql_query"


def test_define_tool_decorator_defaults_to_the_function_name() -> None:
    @tools.define_tool(description="Look up an order.")
    async def order_status(input: Any, ctx: Any) -> None: ...

    assert order_status.name == "order_status"


# -- name validation -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "get_order", "Get-Order_2", "x" * 64, "0", "-_-"])
def test_valid_names(name: str) -> None:
    assert tools.define_tool(name=name, description="d", execute=lambda i, c: None).name == name


@pytest.mark.parametrize(
    "name",
    ["", "x" * 65, "get order", "get.order", "naïve", "get_order\n", "\nget_order", "get/order", "émoji", 123],
)
def test_invalid_names_are_refused(name: Any) -> None:
    with pytest.raises(tools.ToolDefinitionError, match="name"):
        tools.define_tool(name=name, description="d", execute=lambda i, c: None)


def test_invalid_class_name_is_refused_where_declared() -> None:
    with pytest.raises(tools.ToolDefinitionError, match=r"tool name 'über' must match"):

        @tools.ai_tool(description="d")
        class ÜberTool:
            async def execute(self, input: Any, ctx: Any) -> None: ...


def test_pattern_is_public() -> None:
    assert tools.TOOL_NAME_PATTERN == r"^[a-zA-Z0-9_-]{1,64}$"


# -- declaration errors ----------------------------------------------------------------------------


def _declare(**options: Any) -> tools.Tool:
    options.setdefault("name", "t")
    options.setdefault("description", "A tool.")
    return tools.define_tool(execute=lambda i, c: None, **options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"description": None}, "description"),
        ({"description": ""}, "description"),
        ({"description": "   "}, "description"),
        ({"description": 3}, "description"),
        ({"input": dict}, "input must be a pydantic BaseModel"),
        ({"input": {}}, "input must be a pydantic BaseModel"),
        ({"input": KeyInput(key="k")}, "input must be a pydantic BaseModel"),
        ({"input": "KeyInput"}, "input must be a pydantic BaseModel"),
        ({"roles": "admin"}, "roles must be a list of str"),
        ({"roles": ""}, "roles must be a list of str"),
        ({"roles": ["admin", 3]}, "roles must be a list of str"),
        ({"roles": {"admin": True}}, "roles must be a list of str"),
        ({"kind": "write"}, "kind must be 'read' or 'action'"),
        ({"ability": ""}, "ability must be a non-empty str"),
        ({"ability": 3}, "ability must be a non-empty str"),
        ({"enabled": "yes"}, "enabled must be a bool or a callable"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"timeout": -1}, "timeout must be a positive number"),
        ({"timeout": True}, "timeout must be a positive number"),
        ({"timeout": "5"}, "timeout must be a positive number"),
        ({"present": "x"}, "present must be callable"),
        ({"can_use": True}, "can_use must be callable"),
        ({"preflight": lambda i, c, p: None}, "preflight applies to action tools only"),
        ({"presentation": "Purging"}, "presentation must be a ToolPresentation or a dict"),
        ({"presentation": {"running": 3}}, "running"),
        ({"presentation": {"done": ["Done"]}}, "done"),
        ({"presentation": {"confirm": {"title": 3}}}, "title"),
        ({"presentation": {"labl": "x"}}, "labl"),
        ({"descripton": "typo"}, "unknown tool option.*descripton"),
    ],
)
def test_define_tool_refuses_bad_options(options: dict[str, Any], match: str) -> None:
    with pytest.raises(tools.ToolDefinitionError, match=match):
        _declare(**options)


def test_define_tool_refuses_a_non_callable_execute() -> None:
    with pytest.raises(tools.ToolDefinitionError, match="execute must be callable"):
        tools.define_tool(name="t", description="d", execute="run")
    with pytest.raises(tools.ToolDefinitionError, match="execute must be callable"):
        tools.define_tool(name="t", description="d")("run")


def test_presentation_model_refuses_non_string_templates() -> None:
    with pytest.raises(ValidationError, match="running"):
        tools.ToolPresentation(running=3)
    with pytest.raises(ValidationError, match="verb"):
        tools.ConfirmTemplate(title="t", verb=None)


def test_ai_tool_errors() -> None:
    with pytest.raises(tools.ToolDefinitionError, match="description"):

        @tools.ai_tool(input=KeyInput)
        class NoDescriptionTool:
            async def execute(self, input: Any, ctx: Any) -> None: ...

    with pytest.raises(tools.ToolDefinitionError, match="no execute"):

        @tools.ai_tool(description="d")
        class NoExecuteTool:
            pass

    with pytest.raises(tools.ToolDefinitionError, match="decorates a class"):
        tools.ai_tool(description="d")(lambda i, c: None)

    with pytest.raises(tools.ToolDefinitionError, match="execute is the class's method"):
        tools.ai_tool(description="d", execute=lambda i, c: None)

    with pytest.raises(tools.ToolDefinitionError, match="unknown tool option.*rolse"):
        tools.ai_tool(description="d", rolse=["admin"])

    with pytest.raises(tools.ToolDefinitionError, match="roles"):

        @tools.ai_tool(description="d", roles="admin")
        class BareRolesTool:
            async def execute(self, input: Any, ctx: Any) -> None: ...


def test_class_tool_errors() -> None:
    class NoDescription(tools.ReadTool):
        async def execute(self, input: Any, ctx: Any) -> None: ...

    class BadInput(tools.ReadTool):
        description = "d"
        input = dict  # type: ignore[assignment]

        async def execute(self, input: Any, ctx: Any) -> None: ...

    class BareRoles(tools.ReadTool):
        description = "d"
        roles = "admin"

        async def execute(self, input: Any, ctx: Any) -> None: ...

    class NoExecute(tools.ReadTool):
        description = "d"

    class NoneExecute(tools.ReadTool):
        description = "d"
        execute = None  # type: ignore[assignment]

    class NeedsArgs(tools.ReadTool):
        description = "d"

        def __init__(self, db: object) -> None:
            self.db = db

        async def execute(self, input: Any, ctx: Any) -> None: ...

    with pytest.raises(tools.ToolDefinitionError, match="description"):
        tools.as_tool(NoDescription)
    with pytest.raises(tools.ToolDefinitionError, match="input must be a pydantic BaseModel"):
        tools.as_tool(BadInput)
    with pytest.raises(tools.ToolDefinitionError, match="roles must be a list of str"):
        tools.as_tool(BareRoles)
    with pytest.raises(tools.ToolDefinitionError, match="not a tool"):
        tools.as_tool(NoExecute)  # abstract: execute is missing
    with pytest.raises(tools.ToolDefinitionError, match="execute must be callable"):
        tools.as_tool(NoneExecute)
    with pytest.raises(tools.ToolDefinitionError, match="without arguments"):
        tools.as_tool(NeedsArgs)
    assert tools.as_tool(NeedsArgs(db=object())).name == "needs_args"


@pytest.mark.parametrize("thing", [tools.ReadTool, tools.ActionTool, tools.BaseTool, object, object(), "tool", 3, None])
def test_as_tool_refuses_what_is_not_a_tool(thing: Any) -> None:
    with pytest.raises(tools.ToolDefinitionError, match="not a tool"):
        tools.as_tool(thing)


def test_definition_errors_are_user_errors() -> None:
    assert issubclass(tools.ToolDefinitionError, tools.UserError)
    assert issubclass(tools.UserError, TypeError)
    assert issubclass(tools.UserError, ValueError)
    assert issubclass(tools.UserError, tools.AgoraError)
    with pytest.raises(TypeError):
        _declare(description=None)
    with pytest.raises(ValueError):
        _declare(name="bad name")


# -- hooks -----------------------------------------------------------------------------------------


async def test_hooks_as_methods_and_as_keyword_functions(actor: tools.Actor) -> None:
    class Methods(tools.ReadTool):
        description = "d"

        def can_use(self, who: tools.Actor) -> bool:
            return who.id == "u1"

        async def is_enabled(self) -> bool:
            return True

        async def execute(self, input: Any, ctx: Any) -> None: ...

    by_methods = tools.as_tool(Methods)
    by_functions = tools.define_tool(
        name="f", description="d", execute=lambda i, c: None, can_use=lambda who: who.id == "u1"
    )
    for tool in (by_methods, by_functions):
        assert tool.can_use is not None
        assert tool.can_use(actor) is True
        assert tool.can_use(tools.Actor("someone-else")) is False
    assert by_methods.is_enabled is not None
    assert await by_methods.is_enabled() is True


def test_a_method_hook_wins_over_the_keyword_hook() -> None:
    @tools.ai_tool(description="d", can_use=lambda who: False)
    class HookTool:
        def can_use(self, who: tools.Actor) -> bool:
            return True

        async def execute(self, input: Any, ctx: Any) -> None: ...

    tool = tools.as_tool(HookTool)
    assert tool.can_use is not None and tool.can_use(tools.Actor("u")) is True


# -- sync execute runs in a worker thread ----------------------------------------------------------


async def test_sync_execute_runs_in_a_worker_thread(ctx: tools.ToolContext) -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, int] = {}

    def sync_run(input: Any, c: Any) -> str:
        seen["sync"] = threading.get_ident()
        return "sync"

    async def async_run(input: Any, c: Any) -> str:
        seen["async"] = threading.get_ident()
        return "async"

    class SyncClass(tools.ReadTool):
        description = "d"

        def execute(self, input: Any, c: Any) -> str:  # type: ignore[override]
            seen["class"] = threading.get_ident()
            return "class"

    registry = tools.ToolRegistry(
        [
            tools.define_tool(name="sync_fn", description="d", execute=sync_run),
            tools.define_tool(name="async_fn", description="d", execute=async_run),
            SyncClass,
        ]
    )
    assert await registry.invoke("sync_fn", {}, ctx) == "sync"
    assert await registry.invoke("async_fn", {}, ctx) == "async"
    assert await registry.invoke("sync_class", {}, ctx) == "class"
    assert seen["sync"] != loop_thread
    assert seen["class"] != loop_thread
    assert seen["async"] == loop_thread


async def test_sync_execute_does_not_block_the_loop(ctx: tools.ToolContext) -> None:
    loop = asyncio.get_running_loop()
    started = asyncio.Event()
    release = threading.Event()

    def blocking(input: Any, c: Any) -> str:
        loop.call_soon_threadsafe(started.set)
        # Only a free loop can see `started` and set `release`; on the loop thread this would deadlock.
        assert release.wait(timeout=2), "the loop never ran while the sync tool waited"
        return "released"

    registry = tools.ToolRegistry([tools.define_tool(name="blocking", description="d", execute=blocking)])
    async with asyncio.timeout(2), asyncio.TaskGroup() as tg:
        call = tg.create_task(registry.invoke("blocking", {}, ctx))
        await started.wait()
        release.set()
    assert call.result() == "released"


def test_tool_is_frozen() -> None:
    tool = _by_define_tool_call()
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.name = "other"


def test_default_tool_name_refuses_non_str() -> None:
    with pytest.raises(TypeError, match="class name str"):
        tools.default_tool_name(3)  # type: ignore[arg-type]
