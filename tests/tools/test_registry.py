"""ToolRegistry: register, definitions_for, catalog_for, invoke, and the gate chain."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import tools


@dataclass
class Agent:
    name: str
    tools: Literal["*"] | Sequence[str] = "*"


@dataclass
class Counter:
    calls: list[Any] = field(default_factory=list)

    def tool(self, name: str = "t", **options: Any) -> tools.Tool:
        async def run(input: BaseModel, ctx: tools.ToolContext) -> str:
            self.calls.append((name, input))
            return f"{name} ran"

        options.setdefault("description", f"The {name} tool.")
        return tools.define_tool(name=name, execute=run, **options)


def names(definitions: list[tools.ToolDefinition]) -> list[str]:
    return [d.name for d in definitions]


# -- register --------------------------------------------------------------------------------------


def test_register_returns_the_tool_and_refuses_a_taken_name() -> None:
    counter = Counter()
    registry = tools.ToolRegistry()
    first = registry.register(counter.tool("lookup"))
    assert isinstance(first, tools.Tool)
    assert "lookup" in registry and len(registry) == 1
    assert registry.get("lookup") is first and registry.get("missing") is None
    assert list(registry) == [first]
    with pytest.raises(tools.ToolDefinitionError, match="'lookup' is already registered"):
        registry.register(counter.tool("lookup"))
    assert registry.get("lookup") is first


def test_register_refuses_a_non_tool() -> None:
    with pytest.raises(tools.ToolDefinitionError, match="not a tool"):
        tools.ToolRegistry().register(lambda i, c: None)


def test_registry_takes_tools_at_construction() -> None:
    counter = Counter()
    registry = tools.ToolRegistry([counter.tool("a"), counter.tool("b")])
    assert [t.name for t in registry] == ["a", "b"]


# -- definitions_for / catalog_for -----------------------------------------------------------------


class OrderInput(BaseModel):
    order_id: str


async def test_definitions_carry_name_description_schema_and_kind(actor: tools.Actor) -> None:
    counter = Counter()
    registry = tools.ToolRegistry(
        [counter.tool("order_status", input=OrderInput), counter.tool("refund", kind="action")]
    )
    definitions = await registry.definitions_for(actor)
    assert definitions == [
        tools.ToolDefinition(
            name="order_status",
            description="The order_status tool.",
            parameters=tools.input_json_schema(OrderInput),
            kind="read",
        ),
        tools.ToolDefinition(
            name="refund",
            description="The refund tool.",
            parameters=tools.input_json_schema(tools.EmptyInput),
            kind="action",
        ),
    ]
    assert definitions[0].parameters["properties"]["order_id"]["type"] == "string"


async def test_catalog_is_the_same_list_with_presentation(actor: tools.Actor) -> None:
    counter = Counter()
    presentation = tools.ToolPresentation(
        label="Cache purge", running="Purging {key}", result=tools.NoteView(text="ok")
    )
    registry = tools.ToolRegistry(
        [
            counter.tool("purge", kind="action", presentation=presentation),
            counter.tool("plain"),
            counter.tool("hidden", enabled=False),
        ]
    )
    catalog = await registry.catalog_for(actor)
    assert catalog == [
        {
            "name": "purge",
            "kind": "action",
            "presentation": {
                "label": "Cache purge",
                "running": "Purging {key}",
                "result": {"kind": "note", "text": "ok"},
            },
        },
        {"name": "plain", "kind": "read", "presentation": None},
    ]
    assert [entry["name"] for entry in catalog] == names(await registry.definitions_for(actor))


async def test_presentation_given_as_a_dict_is_validated(actor: tools.Actor) -> None:
    tool = Counter().tool("t", presentation={"label": "Thing", "confirm": {"title": "Do {x}?"}})
    assert tool.presentation == tools.ToolPresentation(label="Thing", confirm=tools.ConfirmTemplate(title="Do {x}?"))


# -- the gate chain --------------------------------------------------------------------------------


class RecordingPolicy:
    def __init__(self, calls: list[str], allow: bool) -> None:
        self.calls = calls
        self.allow = allow

    def allows(self, actor: tools.Actor, tool: tools.Tool) -> bool:
        self.calls.append("roles")
        return self.allow


GATES = ["allow_list", "enabled", "is_enabled", "roles", "can_use", "describe"]
REFUSAL = {
    "allow_list": tools.ToolNotFoundError,
    "enabled": tools.ToolDisabledError,
    "is_enabled": tools.ToolDisabledError,
    "roles": tools.ToolForbiddenError,
    "can_use": tools.ToolForbiddenError,
    "describe": tools.ToolNotFoundError,
}


def gated_tool(counter: Counter, calls: list[str], failing: str | None) -> tools.Tool:
    def gate(name: str) -> Callable[..., bool]:
        def hook(*args: Any) -> bool:
            calls.append(name)
            return name != failing

        return hook

    def describe(scope: tools.DescribeScope) -> dict[str, bool]:
        calls.append("describe")
        return {"available": failing != "describe"}

    return counter.tool(
        "gated",
        enabled=gate("enabled"),
        is_enabled=gate("is_enabled"),
        can_use=gate("can_use"),
        describe=describe,
    )


@pytest.mark.parametrize("failing", GATES)
async def test_gates_run_in_order_and_stop_at_the_first_refusal(
    failing: str, actor: tools.Actor, ctx: tools.ToolContext
) -> None:
    counter, calls = Counter(), []
    registry = tools.ToolRegistry(
        [gated_tool(counter, calls, failing)], roles_policy=RecordingPolicy(calls, allow=failing != "roles")
    )
    agent = Agent("support", [] if failing == "allow_list" else ["gated"])
    expected_calls = GATES[1 : GATES.index(failing) + 1]

    assert await registry.definitions_for(actor, agent) == []
    assert calls == expected_calls
    calls.clear()
    assert await registry.catalog_for(actor, agent) == []
    assert calls == expected_calls
    calls.clear()
    with pytest.raises(REFUSAL[failing]) as refused:
        await registry.invoke("gated", {}, ctx, agent=agent)
    assert refused.value.tool == "gated"
    assert calls == expected_calls
    assert counter.calls == []


async def test_a_tool_passing_every_gate_is_offered_and_runs(actor: tools.Actor, ctx: tools.ToolContext) -> None:
    counter, calls = Counter(), []
    registry = tools.ToolRegistry([gated_tool(counter, calls, None)], roles_policy=RecordingPolicy(calls, allow=True))
    agent = Agent("support", ["gated"])
    assert names(await registry.definitions_for(actor, agent)) == ["gated"]
    assert calls == GATES[1:]
    calls.clear()
    assert await registry.invoke("gated", {}, ctx, agent=agent) == "gated ran"
    assert calls == GATES[1:]
    assert len(counter.calls) == 1


async def test_each_gate_removes_only_its_tool(actor: tools.Actor, ctx: tools.ToolContext) -> None:
    counter = Counter()

    class Flagged(tools.ReadTool):
        description = "Flag off."

        def is_enabled(self) -> bool:
            return False

        async def execute(self, input: Any, c: Any) -> None:
            counter.calls.append("flagged")

    async def async_off() -> bool:
        return False

    registry = tools.ToolRegistry(
        [
            counter.tool("open"),
            counter.tool("outside"),
            counter.tool("off", enabled=False),
            counter.tool("async_off", enabled=async_off),
            Flagged,
            counter.tool("admins", roles=["admin"]),
            counter.tool("nobody", can_use=lambda who: False),
            counter.tool("hidden", describe=lambda scope: tools.ToolDescription(available=False)),
        ]
    )
    agent = Agent("support", ["open", "off", "async_off", "flagged", "admins", "nobody", "hidden"])
    assert names(await registry.definitions_for(actor, agent)) == ["open"]
    for name, error in [
        ("outside", tools.ToolNotFoundError),
        ("off", tools.ToolDisabledError),
        ("async_off", tools.ToolDisabledError),
        ("flagged", tools.ToolDisabledError),
        ("admins", tools.ToolForbiddenError),
        ("nobody", tools.ToolForbiddenError),
        ("hidden", tools.ToolNotFoundError),
        ("missing", tools.ToolNotFoundError),
    ]:
        with pytest.raises(error):
            await registry.invoke(name, {}, ctx, agent=agent)
    assert counter.calls == []
    assert await registry.invoke("open", {}, ctx, agent=agent) == "open ran"


async def test_catalog_and_definitions_see_the_same_describe_scope(actor: tools.Actor) -> None:
    counter = Counter()
    seen: list[tuple[str | None, bool]] = []

    def describe(scope: tools.DescribeScope) -> dict[str, bool]:
        seen.append((scope.thread_id, scope.ui_capabilities is not None))
        # Offered only in a thread to a client that can draw components.
        return {"available": scope.thread_id is not None and scope.ui_capabilities is not None}

    registry = tools.ToolRegistry([counter.tool("cards", describe=describe), counter.tool("plain")])
    capabilities = tools.UiCapabilities(formats=["html"])
    offered = names(await registry.definitions_for(actor, None, capabilities, thread_id="t1"))
    listed = sorted(item["name"] for item in await registry.catalog_for(actor, None, capabilities, thread_id="t1"))
    assert offered == listed == ["cards", "plain"]
    assert [item["name"] for item in await registry.catalog_for(actor)] == ["plain"]
    assert seen == [("t1", True), ("t1", True), (None, False)]


async def test_no_agent_or_star_allows_every_tool(actor: tools.Actor) -> None:
    counter = Counter()
    registry = tools.ToolRegistry([counter.tool("a"), counter.tool("b")])
    assert names(await registry.definitions_for(actor)) == ["a", "b"]
    assert names(await registry.definitions_for(actor, Agent("any", "*"))) == ["a", "b"]
    assert names(await registry.definitions_for(actor, Agent("one", ("b",)))) == ["b"]
    assert names(await registry.definitions_for(actor, Agent("set", frozenset({"a"})))) == ["a"]  # type: ignore[arg-type]
    assert isinstance(Agent("any"), tools.AgentScope)


@pytest.mark.parametrize("hook", ["enabled", "is_enabled", "can_use", "describe"])
async def test_a_flag_that_flips_after_the_offer_is_refused_on_invoke(
    hook: str, actor: tools.Actor, ctx: tools.ToolContext
) -> None:
    counter = Counter()
    flag = {"on": True}
    hooks: dict[str, Callable[..., Any]] = {
        "enabled": lambda: flag["on"],
        "is_enabled": lambda: flag["on"],
        "can_use": lambda who: flag["on"],
        "describe": lambda scope: {"available": flag["on"]},
    }
    registry = tools.ToolRegistry([counter.tool("flippy", **{hook: hooks[hook]})])
    assert names(await registry.definitions_for(actor)) == ["flippy"]
    flag["on"] = False
    with pytest.raises((tools.ToolDisabledError, tools.ToolForbiddenError, tools.ToolNotFoundError)) as refused:
        await registry.invoke("flippy", {}, ctx)
    assert isinstance(refused.value, REFUSAL[hook])
    assert counter.calls == []
    assert await registry.definitions_for(actor) == []


async def test_a_gate_that_raises_fails_closed(
    actor: tools.Actor, ctx: tools.ToolContext, caplog: pytest.LogCaptureFixture
) -> None:
    counter = Counter()

    def broken(who: tools.Actor) -> bool:
        raise RuntimeError("auth backend down")

    registry = tools.ToolRegistry([counter.tool("fragile", can_use=broken), counter.tool("fine")])
    with caplog.at_level(logging.ERROR, logger="tools.registry"):
        assert names(await registry.definitions_for(actor)) == ["fine"]
    assert "fragile" in caplog.text and "auth backend down" in caplog.text
    with pytest.raises(tools.ToolForbiddenError, match="could not be authorized"):
        await registry.invoke("fragile", {}, ctx)
    assert counter.calls == []


async def test_describe_returning_garbage_fails_closed(actor: tools.Actor) -> None:
    counter = Counter()
    registry = tools.ToolRegistry(
        [
            counter.tool("bad_dict", describe=lambda scope: {"availble": False}),
            counter.tool("bad_type", describe=lambda scope: "yes"),
            counter.tool("none", describe=lambda scope: None),
        ]
    )
    assert names(await registry.definitions_for(actor)) == ["none"]


# -- roles policies --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_roles", "actor_roles", "allowed"),
    [
        ((), [], True),
        ((), ["member"], True),
        (["admin"], [], False),
        (["admin"], ["member"], False),
        (["admin"], ["admin"], True),
        (["admin", "ops"], ["member", "ops"], True),
    ],
)
async def test_default_policy_intersects_role_sets(
    tool_roles: Sequence[str], actor_roles: list[str], allowed: bool
) -> None:
    registry = tools.ToolRegistry([Counter().tool("t", roles=tool_roles)])
    offered = names(await registry.definitions_for(tools.Actor("u", actor_roles)))
    assert offered == (["t"] if allowed else [])


async def test_default_roles_apply_to_tools_without_roles() -> None:
    counter = Counter()
    registry = tools.ToolRegistry(
        [counter.tool("plain"), counter.tool("ops_only", roles=["ops"])],
        roles_policy=tools.DefaultRolesPolicy(default_roles=["staff"]),
    )
    assert names(await registry.definitions_for(tools.Actor("u", ["staff"]))) == ["plain"]
    assert names(await registry.definitions_for(tools.Actor("u", ["ops"]))) == ["ops_only"]
    assert names(await registry.definitions_for(tools.Actor("u"))) == []


async def test_an_ability_without_an_ability_aware_policy_fails_closed(make_ctx: Any) -> None:
    counter = Counter()
    registry = tools.ToolRegistry(
        [
            counter.tool("refund", ability="orders.refund"),
            counter.tool("wipe", roles=["admin"], ability="orders.wipe"),  # roles do not open it either
            counter.tool("open"),
        ]
    )
    root = tools.Actor("root", ["admin", "member"])
    assert names(await registry.definitions_for(root)) == ["open"]
    for name in ("refund", "wipe"):
        with pytest.raises(tools.ToolForbiddenError):
            await registry.invoke(name, {}, make_ctx(root))
    assert counter.calls == []


async def test_ability_policy_grants_by_ability(make_ctx: Any) -> None:
    counter = Counter()
    grants = {"alice": {"orders.refund"}, "bob": set()}
    asked: list[tuple[str, str]] = []

    async def check(who: tools.Actor, ability: str) -> bool:
        asked.append((who.id, ability))
        return ability in grants[who.id]

    registry = tools.ToolRegistry(
        [
            counter.tool("refund", ability="orders.refund"),
            counter.tool("admin_refund", ability="orders.refund", roles=["admin"]),
            counter.tool("open"),
        ],
        roles_policy=tools.AbilityRolesPolicy(check),
    )
    alice, bob = tools.Actor("alice"), tools.Actor("bob", ["admin"])
    assert names(await registry.definitions_for(alice)) == ["refund", "open"]
    assert names(await registry.definitions_for(bob)) == ["open"]
    assert ("alice", "orders.refund") in asked
    assert await registry.invoke("refund", {}, make_ctx(alice)) == "refund ran"
    with pytest.raises(tools.ToolForbiddenError):
        await registry.invoke("refund", {}, make_ctx(bob))
    grants["bob"].add("orders.refund")
    assert names(await registry.definitions_for(bob)) == ["refund", "admin_refund", "open"]
    assert names(await registry.definitions_for(tools.Actor("alice", ["admin"]))) == ["refund", "admin_refund", "open"]


async def test_a_custom_roles_policy_is_consulted(actor: tools.Actor) -> None:
    seen: list[tuple[str, str]] = []

    class TenantPolicy:
        def allows(self, who: tools.Actor, tool: tools.Tool) -> bool:
            seen.append((who.id, tool.name))
            return who.tenant_ref == "acme"

    counter = Counter()
    registry = tools.ToolRegistry([counter.tool("a"), counter.tool("b")], roles_policy=TenantPolicy())
    assert names(await registry.definitions_for(tools.Actor("x", tenant_ref="acme"))) == ["a", "b"]
    assert names(await registry.definitions_for(tools.Actor("y", tenant_ref="other"))) == []
    assert ("x", "a") in seen and ("y", "b") in seen


# -- describe --------------------------------------------------------------------------------------


async def test_describe_rewords_the_tool_for_one_turn(actor: tools.Actor) -> None:
    scopes: list[tools.DescribeScope] = []
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}

    def describe(scope: tools.DescribeScope) -> tools.ToolDescription:
        scopes.append(scope)
        if scope.ui_capabilities is not None and scope.ui_capabilities.accepts_component("Chart", 1):
            return tools.ToolDescription(description="Search and chart.", input_schema=schema)
        return tools.ToolDescription()

    registry = tools.ToolRegistry([Counter().tool("search", describe=describe)])
    caps = tools.UiCapabilities(components=[tools.ComponentRef("Chart")])
    [charted] = await registry.definitions_for(actor, Agent("helper"), caps, thread_id="th1")
    [plain] = await registry.definitions_for(actor)
    assert (charted.description, charted.parameters) == ("Search and chart.", schema)
    assert (plain.description, plain.parameters["properties"]) == ("The search tool.", {})
    assert scopes[0] == tools.DescribeScope(actor=actor, thread_id="th1", agent_name="helper", ui_capabilities=caps)


async def test_describe_on_invoke_sees_the_call_context(make_ctx: Any) -> None:
    scopes: list[tools.DescribeScope] = []
    registry = tools.ToolRegistry([Counter().tool("t", describe=lambda scope: scopes.append(scope))])
    ctx = make_ctx(thread_id="th9", agent_name="helper")
    assert await registry.invoke("t", {}, ctx) == "t ran"
    assert (scopes[0].actor, scopes[0].thread_id, scopes[0].agent_name) == (ctx.actor, "th9", "helper")


# -- invoke ----------------------------------------------------------------------------------------


async def test_invoke_hands_the_validated_input_and_context(ctx: tools.ToolContext) -> None:
    seen: list[Any] = []

    @tools.define_tool(name="lookup", description="d", input=OrderInput)
    async def lookup(input: OrderInput, c: tools.ToolContext) -> dict[str, str]:
        seen.append((input, c))
        return {"order": input.order_id, "actor": c.actor.id}

    registry = tools.ToolRegistry([lookup])
    assert await registry.invoke("lookup", {"order_id": "o1"}, ctx) == {"order": "o1", "actor": "u1"}
    assert seen == [(OrderInput(order_id="o1"), ctx)]


async def test_check_returns_the_tool_after_the_gates(ctx: tools.ToolContext) -> None:
    counter = Counter()
    registry = tools.ToolRegistry([counter.tool("a"), counter.tool("b", enabled=False)])
    assert (await registry.check("a", ctx)).name == "a"
    with pytest.raises(tools.ToolDisabledError):
        await registry.check("b", ctx)
    with pytest.raises(tools.ToolNotFoundError, match="No tool named 'zzz'"):
        await registry.check("zzz", ctx)


async def test_tool_errors_carry_codes() -> None:
    assert [
        e.code
        for e in (
            tools.ToolNotFoundError("x"),
            tools.ToolDisabledError("x"),
            tools.ToolForbiddenError("x"),
            tools.ToolInputInvalidError("x"),
            tools.ToolDeniedError("x"),
            tools.ToolTimeoutError("x"),
            tools.ConfirmTokenError("used"),
        )
    ] == [
        "tool_not_found",
        "tool_disabled",
        "tool_forbidden",
        "tool_input_invalid",
        "tool_denied",
        "tool_timeout",
        "confirm_token",
    ]
    assert all(
        issubclass(e, tools.ToolError)
        for e in (tools.ToolNotFoundError, tools.ToolDeniedError, tools.ConfirmTokenError, tools.ToolTimeoutError)
    )
    assert not issubclass(tools.ToolFailed, tools.ToolError)
    failed = tools.ToolFailed("Order not found", code="not_found")
    assert (str(failed), failed.code) == ("Order not found", "not_found")


# -- bad arguments ---------------------------------------------------------------------------------


async def test_registry_refuses_wrong_arguments(actor: tools.Actor, ctx: tools.ToolContext) -> None:
    registry = tools.ToolRegistry([Counter().tool("order")])
    with pytest.raises(tools.UserError, match="actor must be an Actor"):
        await registry.definitions_for("u1")  # type: ignore[arg-type]
    with pytest.raises(tools.UserError, match="actor must be an Actor"):
        await registry.catalog_for({"id": "u1"})  # type: ignore[arg-type]
    with pytest.raises(tools.UserError, match="ctx must be a ToolContext"):
        await registry.invoke("order", {}, {"actor": actor})  # type: ignore[arg-type]
    with pytest.raises(tools.UserError, match="actor must be an Actor"):
        await registry.invoke("order", {}, tools.ToolContext(actor="u1"))  # type: ignore[arg-type]
    # A bare string allow-list would test substrings: "order" in "get_order_details".
    with pytest.raises(tools.UserError, match="tools must be '\\*' or a list"):
        await registry.definitions_for(actor, Agent("support", "get_order_details"))
    with pytest.raises(tools.UserError, match="tools must be '\\*' or a list"):
        await registry.invoke("order", {}, ctx, agent=Agent("support", "get_order_details"))
    with pytest.raises(tools.UserError, match="roles_policy"):
        tools.ToolRegistry(roles_policy=object())  # type: ignore[arg-type]


def test_policies_refuse_wrong_arguments() -> None:
    with pytest.raises(tools.UserError, match="default_roles must be a list of str"):
        tools.DefaultRolesPolicy("admin")
    with pytest.raises(tools.UserError, match="default_roles must be a list of str"):
        tools.AbilityRolesPolicy(lambda who, ability: True, default_roles="admin")
    with pytest.raises(tools.UserError, match="check must be callable"):
        tools.AbilityRolesPolicy("orders.refund")  # type: ignore[arg-type]


async def test_definitions_are_copies_the_caller_may_rewrite(actor: tools.Actor) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    registry = tools.ToolRegistry(
        [
            Counter().tool("lookup", input=OrderInput),
            Counter().tool("search", describe=lambda scope: {"input_schema": schema}),
        ]
    )
    for definition in await registry.definitions_for(actor):
        definition.parameters["properties"].clear()  # e.g. an adapter rewriting for strict mode
        definition.parameters["additionalProperties"] = False
    again = {d.name: d.parameters for d in await registry.definitions_for(actor)}
    assert set(again["lookup"]["properties"]) == {"order_id"}
    assert again["search"] == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert schema == {"type": "object", "properties": {"q": {"type": "string"}}}
