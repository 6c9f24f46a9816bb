"""fill_template and read_path: the rules every channel uses to word a tool call."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

import tools


class Customer(BaseModel):
    name: str
    vip: bool = False
    nickname: str | None = None


class Order(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    customer: Customer
    lines: list[dict[str, Any]] = []


@dataclasses.dataclass
class Parcel:
    weight: float
    carrier: str | None = None


ORDER = Order(id="o1", customer=Customer(name="Ana", vip=True), lines=[{"sku": "A1"}, {"sku": "B2"}], note="fragile")

CASES: list[tuple[str, str, Any, str]] = [
    # (id, template, data, expected)
    ("str as is", "Reading {key}", {"key": "cache:users"}, "Reading cache:users"),
    ("missing removed with its space", "Reading {key}", {}, "Reading"),
    ("None removed with its space", "Reading {key}", {"key": None}, "Reading"),
    ("missing in the middle", "Reading {key} now", {}, "Reading now"),
    ("only a missing placeholder", "{key}", {}, ""),
    ("missing before punctuation", "Hello {name}!", {}, "Hello!"),
    ("filled keeps its leading space", "Hello {name}!", {"name": "Ana"}, "Hello Ana!"),
    ("int", "Deleting {count} files", {"count": 3}, "Deleting 3 files"),
    ("zero is not empty", "Deleting {count} files", {"count": 0}, "Deleting 0 files"),
    ("float", "Ratio {r}", {"r": 0.25}, "Ratio 0.25"),
    ("negative float", "Delta {d}", {"d": -1.5}, "Delta -1.5"),
    ("bool true", "Notify {flag}", {"flag": True}, "Notify true"),
    ("bool false is not empty", "Notify {flag}", {"flag": False}, "Notify false"),
    ("list joined", "Purging {keys}", {"keys": ["a", "b", "c"]}, "Purging a, b, c"),
    ("list empties dropped", "Purging {keys}", {"keys": ["a", None, "", "b", {}]}, "Purging a, b"),
    ("empty list removed", "Purging {keys}", {"keys": []}, "Purging"),
    ("list of only empties removed", "Purging {keys}", {"keys": [None, ""]}, "Purging"),
    ("list of scalars", "Values {v}", {"v": [1, True, 2.5, False]}, "Values 1, true, 2.5, false"),
    ("nested list flattened", "Values {v}", {"v": [["a", "b"], "c"]}, "Values a, b, c"),
    ("tuple like a list", "Values {v}", {"v": ("x", "y")}, "Values x, y"),
    ("dict renders empty", "Order {order}", {"order": {"id": "o1"}}, "Order"),
    ("empty string removed", "Note {text}", {"text": ""}, "Note"),
    ("whitespace runs collapse", "Say   {s}", {"s": "a    b"}, "Say a b"),
    ("value whitespace collapses", "Say {s}", {"s": "  spaced \n\n out  "}, "Say spaced out"),
    ("template stripped", "   Purge {key}   ", {"key": "k"}, "Purge k"),
    ("newlines and tabs collapse", "One\t\ttwo\n\nthree", {}, "One two three"),
    ("adjacent placeholders", "{a}{b}", {"a": "x", "b": "y"}, "xy"),
    ("leading missing", "{a} {b}", {"b": "y"}, "y"),
    ("values are not re-expanded", "Hi {name}", {"name": "{secret}", "secret": "s3"}, "Hi {secret}"),
    ("no placeholders", "Plain text.", {"x": 1}, "Plain text."),
    ("spaced braces are literal", "Keep { key } and {}", {"key": "v"}, "Keep { key } and {}"),
    ("dotted path in dicts", "Total {order.total}", {"order": {"total": 12}}, "Total 12"),
    ("list index", "First {items.0.name}", {"items": [{"name": "pen"}]}, "First pen"),
    ("index out of range", "Tenth {items.9.name}", {"items": [{"name": "pen"}]}, "Tenth"),
    ("index into a dict is a key", "Key {m.0}", {"m": {"0": "zero"}}, "Key zero"),
    ("path through a string", "First {name.first}", {"name": "Ana"}, "First"),
    ("path through a number", "X {n.real}", {"n": 3}, "X"),
    ("path with an empty segment", "X {a..b}", {"a": {"": {"b": "no"}}}, "X no"),
    ("pydantic model data", "Order {id} for {customer.name}", ORDER, "Order o1 for Ana"),
    ("pydantic bool field", "VIP {customer.vip}", ORDER, "VIP true"),
    ("pydantic None field", "Nick {customer.nickname}", ORDER, "Nick"),
    ("pydantic extra field", "Note {note}", ORDER, "Note fragile"),
    ("pydantic list of dicts", "SKU {lines.1.sku}", ORDER, "SKU B2"),
    ("pydantic model in a dict", "Hi {c.name}", {"c": Customer(name="Bo")}, "Hi Bo"),
    ("pydantic model renders empty", "Customer {customer}", ORDER, "Customer"),
    ("pydantic missing attr", "X {customer.model_config}", ORDER, "X"),
    ("dataclass data", "Parcel {weight} kg via {carrier}", Parcel(weight=1.5), "Parcel 1.5 kg via"),
    ("list data", "First {0}", ["a", "b"], "First a"),
    ("None data", "Reading {key}", None, "Reading"),
    ("str data", "Char {0}", "abc", "Char"),
    ("unicode path", "Status {ação}", {"ação": "ok"}, "Status ok"),
    ("unicode value", "City {c}", {"c": "São Paulo"}, "City São Paulo"),
    ("unicode digit segment", "X {items.²}", {"items": ["a", "b", "c"]}, "X"),
]


@pytest.mark.parametrize(("template", "data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_fill_template(template: str, data: Any, expected: str) -> None:
    assert tools.fill_template(template, data) == expected


def test_there_are_at_least_25_template_cases() -> None:
    assert len(CASES) >= 25


# -- odd data never raises -------------------------------------------------------------------------


class BadStr(int):
    def __str__(self) -> str:
        raise RuntimeError("no str")

    __repr__ = __str__


class BadMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("no getitem")

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("no get")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("no iter")

    def __len__(self) -> int:
        raise RuntimeError("no len")


class BadList(list[Any]):
    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("no getitem")

    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("no iter")

    def __len__(self) -> int:
        raise RuntimeError("no len")


class Opaque:
    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("no attributes")


def _cyclic_list() -> list[Any]:
    items: list[Any] = ["a"]
    items.append(items)
    items.append("b")
    return items


def _cyclic_dict() -> dict[str, Any]:
    data: dict[str, Any] = {"name": "loop"}
    data["self"] = data
    return data


def _deep_list(depth: int) -> list[Any]:
    node: list[Any] = ["leaf"]
    for _ in range(depth):
        node = [node]
    return node


ODD: list[tuple[str, str, Any, str]] = [
    ("cyclic list", "Items {v}", {"v": _cyclic_list()}, "Items a, b"),
    ("cyclic dict path", "Name {v.self.self.self.name}", {"v": _cyclic_dict()}, "Name loop"),
    ("cyclic dict value", "Dict {v}", {"v": _cyclic_dict()}, "Dict"),
    ("huge int", "Big {v}", {"v": 10**5000}, "Big"),
    ("int whose __str__ raises", "Bad {v}", {"v": BadStr(3)}, "Bad"),
    ("list holding a bad int", "Bad {v}", {"v": ["ok", BadStr(3)]}, "Bad"),
    ("mapping whose get raises", "Bad {v.x}", {"v": BadMapping()}, "Bad"),
    ("mapping data whose get raises", "Bad {x}", BadMapping(), "Bad"),
    ("list whose __getitem__ raises", "Bad {v.0}", {"v": BadList(["x"])}, "Bad"),
    ("list whose __iter__ raises", "Bad {v}", {"v": BadList(["x"])}, "Bad"),
    ("object whose __str__ raises", "Bad {v}", {"v": Opaque()}, "Bad"),
    ("object path whose attributes raise", "Bad {v.x}", {"v": Opaque()}, "Bad"),
    ("non-JSON object", "Obj {v}", {"v": object()}, "Obj"),
    ("set of objects", "Set {v}", {"v": {object()}}, "Set"),
    ("bytes", "Raw {v}", {"v": b"raw"}, "Raw"),
    ("generator", "Gen {v}", {"v": (i for i in range(3))}, "Gen"),
    ("function", "Fn {v}", {"v": print}, "Fn"),
    ("class", "Cls {v}", {"v": Opaque}, "Cls"),
    ("deep list", "Deep {v}", {"v": _deep_list(5)}, "Deep leaf"),
    ("very deep list", "Deep {v}", {"v": _deep_list(10_000)}, "Deep"),
]


@pytest.mark.parametrize(("template", "data", "expected"), [c[1:] for c in ODD], ids=[c[0] for c in ODD])
def test_fill_template_never_raises_on_odd_data(template: str, data: Any, expected: str) -> None:
    assert tools.fill_template(template, data) == expected


def test_huge_values_do_not_raise() -> None:
    big_text = "x" * 1_000_000
    assert tools.fill_template("T {v}", {"v": big_text}) == "T " + big_text
    many = list(range(100_000))
    rendered = tools.fill_template("N {v}", {"v": many})
    assert rendered.startswith("N 0, 1, 2, 3")
    assert len(rendered) < 10_000  # a sentence never spells out a hundred thousand items


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_common_non_json_scalars_render_as_text() -> None:
    data = {
        "colour": Colour.RED,
        "level": Level.HIGH,
        "day": dt.date(2024, 5, 1),
        "at": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC),
        "id": uuid.UUID(int=1),
        "price": decimal.Decimal("9.90"),
    }
    assert tools.fill_template("{colour} {level} {day} {at} {id} {price}", data) == (
        "red 3 2024-05-01 2024-05-01T12:30:00+00:00 00000000-0000-0000-0000-000000000001 9.90"
    )


def test_floats_that_are_not_finite() -> None:
    assert tools.fill_template("{a} {b}", {"a": float("inf"), "b": float("nan")}) == "inf nan"


@pytest.mark.parametrize("template", [None, 3, b"Reading {key}", ["Reading {key}"], {"t": "x"}])
def test_a_non_str_template_is_a_type_error(template: Any) -> None:
    with pytest.raises(TypeError, match="str template"):
        tools.fill_template(template, {})


# -- read_path -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "expected"),
    [
        ({"a": {"b": 1}}, "a.b", 1),
        ({"a": {"b": 1}}, "a", {"b": 1}),
        ({"a": [10, 20]}, "a.1", 20),
        ({"a": [10, 20]}, "a.2", None),
        ({"a": [10, 20]}, "a.-1", None),
        (ORDER, "customer.name", "Ana"),
        (ORDER, "note", "fragile"),
        (ORDER, "missing", None),
        (Parcel(weight=2.0), "weight", 2.0),
        (Parcel(weight=2.0), "__class__", None),
        ("text", "0", None),
        (None, "a", None),
        ({"a": None}, "a.b", None),
    ],
)
def test_read_path(data: Any, path: str, expected: Any) -> None:
    assert tools.read_path(data, path) == expected


def test_read_path_does_not_reach_attributes() -> None:
    class Secretive:
        token = "s3cr3t"

    assert tools.read_path({"o": Secretive()}, "o.token") is None
    assert tools.fill_template("{o.__class__.__name__}", {"o": Secretive()}) == ""


def test_read_path_refuses_a_non_str_path() -> None:
    with pytest.raises(TypeError, match="str path"):
        tools.read_path({"a": 1}, 3)  # type: ignore[arg-type]
