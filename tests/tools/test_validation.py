"""Input validation before execute, and the self-contained JSON schema the model sees."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

import tools


class Address(BaseModel):
    street: str
    city: str


class Line(BaseModel):
    sku: str
    qty: int = Field(ge=1)


class OrderInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    order_id: str = Field(min_length=3, description="The order's id.")
    lines: list[Line]
    ship_to: Address | None = None
    priority: Literal["low", "high"] = "low"


class Counted:
    def __init__(self) -> None:
        self.runs = 0

    def tool(self) -> tools.Tool:
        async def run(input: OrderInput, ctx: tools.ToolContext) -> str:
            self.runs += 1
            return input.order_id

        return tools.define_tool(name="place_order", description="Place an order.", input=OrderInput, execute=run)


VALID = {"order_id": "o-1", "lines": [{"sku": "A", "qty": 2}]}


@pytest.mark.parametrize(
    ("args", "locs"),
    [
        ({}, [["order_id"], ["lines"]]),
        (None, [["order_id"], ["lines"]]),
        ({**VALID, "order_id": "x"}, [["order_id"]]),
        ({**VALID, "lines": [{"sku": "A", "qty": 0}]}, [["lines", 0, "qty"]]),
        ({**VALID, "lines": [{"qty": 1}, {"sku": "B", "qty": "many"}]}, [["lines", 0, "sku"], ["lines", 1, "qty"]]),
        ({**VALID, "ship_to": {"street": "Main"}}, [["ship_to", "city"]]),
        ({**VALID, "priority": "urgent"}, [["priority"]]),
        ({**VALID, "actor_id": "admin"}, [["actor_id"]]),
        (["o-1"], [[]]),
        ("o-1", [[]]),
    ],
)
async def test_invalid_input_never_reaches_execute(args: Any, locs: list[list[Any]], ctx: tools.ToolContext) -> None:
    counted = Counted()
    registry = tools.ToolRegistry([counted.tool()])
    with pytest.raises(tools.ToolInputInvalidError) as caught:
        await registry.invoke("place_order", args, ctx)
    error = caught.value
    assert counted.runs == 0
    assert [e["loc"] for e in error.errors] == locs
    assert all(set(e) == {"loc", "msg", "type"} and e["msg"] and e["type"] for e in error.errors)
    assert error.tool == "place_order"
    assert "Invalid arguments for tool 'place_order'" in str(error)
    for loc in locs:
        assert (".".join(map(str, loc)) or "(input)") in str(error)


async def test_valid_input_is_parsed_into_the_model(ctx: tools.ToolContext) -> None:
    seen: list[OrderInput] = []

    @tools.define_tool(name="place_order", description="d", input=OrderInput)
    async def place(input: OrderInput, c: tools.ToolContext) -> None:
        seen.append(input)

    await tools.ToolRegistry([place]).invoke("place_order", {**VALID, "lines": [{"sku": "A", "qty": "2"}]}, ctx)
    assert seen == [OrderInput(order_id="o-1", lines=[Line(sku="A", qty=2)])]
    assert isinstance(seen[0].lines[0], Line)


def test_validate_input_accepts_an_instance_as_is() -> None:
    tool = Counted().tool()
    instance = OrderInput.model_validate(VALID)
    assert tool.validate_input(instance) is instance


def test_input_invalid_error_does_not_echo_values() -> None:
    tool = Counted().tool()
    with pytest.raises(tools.ToolInputInvalidError) as caught:
        tool.validate_input({**VALID, "order_id": "sk"})
    assert "'sk'" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# -- JSON schema -----------------------------------------------------------------------------------


def refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [ref for value in node.values() for ref in refs_in(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in refs_in(item)]
    return []


def assert_self_contained(schema: dict[str, Any]) -> None:
    json.dumps(schema)  # plain JSON
    defs = schema.get("$defs", {})
    for ref in refs_in(schema):
        assert ref.startswith("#/$defs/"), ref
        assert ref.removeprefix("#/$defs/") in defs, f"dangling {ref}"


def test_nested_models_are_inlined_without_refs() -> None:
    schema = tools.input_json_schema(OrderInput)
    assert_self_contained(schema)
    assert refs_in(schema) == []
    assert "$defs" not in schema
    assert schema["type"] == "object"
    assert schema["required"] == ["order_id", "lines"]
    assert schema["properties"]["order_id"]["description"] == "The order's id."
    line = schema["properties"]["lines"]["items"]
    assert line["properties"]["qty"] == {"minimum": 1, "title": "Qty", "type": "integer"}
    address = next(option for option in schema["properties"]["ship_to"]["anyOf"] if option.get("type") == "object")
    assert address["required"] == ["street", "city"]
    assert schema["additionalProperties"] is False


def test_tool_parameters_are_the_input_schema() -> None:
    tool = Counted().tool()
    assert tool.parameters == tools.input_json_schema(OrderInput)


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tree(BaseModel):
    root: Node
    label: str


class Ping(BaseModel):
    pong: Pong | None = None


class Pong(BaseModel):
    ping: Ping | None = None


class Game(BaseModel):
    first: Ping
    second: Pong


Ping.model_rebuild()
Game.model_rebuild()


@pytest.mark.parametrize("model", [Node, Tree, Ping, Game])
def test_recursive_models_stay_self_contained(model: type[BaseModel]) -> None:
    schema = tools.input_json_schema(model)
    assert_self_contained(schema)
    assert schema["type"] == "object"
    assert refs_in(schema), "a recursive model needs at least one $ref"


def test_recursive_model_keeps_only_the_recursive_part_in_defs() -> None:
    schema = tools.input_json_schema(Tree)
    assert set(schema["$defs"]) == {"Node"}
    assert schema["properties"]["label"] == {"title": "Label", "type": "string"}
    assert schema["properties"]["root"]["properties"]["name"]["type"] == "string"
    assert schema["properties"]["root"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}


def test_empty_input_schema() -> None:
    schema = tools.input_json_schema(tools.EmptyInput)
    assert (schema["type"], schema["properties"], schema["additionalProperties"]) == ("object", {}, False)


@pytest.mark.parametrize("model", [dict, OrderInput.model_validate(VALID), "OrderInput", None])
def test_input_json_schema_refuses_what_is_not_a_model_class(model: Any) -> None:
    with pytest.raises(TypeError, match="pydantic BaseModel subclass"):
        tools.input_json_schema(model)
