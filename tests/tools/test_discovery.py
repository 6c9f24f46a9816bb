"""discover_tools over folders, files and packages."""

from __future__ import annotations

import importlib
import logging
import textwrap
from pathlib import Path

import pytest

import tools

pytestmark = pytest.mark.usefixtures("clean_modules")

HEADER = """
from typing import Any
from pydantic import BaseModel
import tools
"""

ORDERS = """
class OrderInput(BaseModel):
    order_id: str


@tools.ai_tool(description="Get one order.", input=OrderInput)
class GetOrderTool:
    async def execute(self, input: OrderInput, ctx: Any) -> str:
        return f"order {input.order_id}"


@tools.define_tool(name="order_status", description="Status of one order.", input=OrderInput)
async def order_status(input: OrderInput, ctx: Any) -> str:
    return "shipped"


class NotATool:
    async def execute(self, input: Any, ctx: Any) -> None: ...
"""

CACHE = """
class PurgeCache(tools.ActionTool):
    description = "Purge one cache key."

    async def execute(self, input: Any, ctx: Any) -> str:
        return "purged"


class AbstractHelper(tools.ReadTool):
    description = "Never built: no execute."
"""

BROKEN = """
raise RuntimeError("boom: missing DATABASE_URL")
"""


def write(root: Path, relative: str, body: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def names(found: list[tools.Tool]) -> list[str]:
    return sorted(tool.name for tool in found)


# -- folders ---------------------------------------------------------------------------------------


async def test_folder_discovery_collects_every_form_and_skips_a_broken_module(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ctx: tools.ToolContext
) -> None:
    write(tmp_path, "orders.py", ORDERS)
    write(tmp_path, "cache.py", CACHE)
    write(tmp_path, "broken.py", BROKEN)
    write(
        tmp_path,
        "nested/deeper/weather.py",
        'weather = tools.define_tool(name="weather", description="d", execute=lambda i, c: "sunny")',
    )
    write(
        tmp_path,
        ".hidden/secret.py",
        'secret = tools.define_tool(name="secret", description="d", execute=lambda i, c: 1)',
    )

    with caplog.at_level(logging.ERROR, logger="tools.discovery"):
        found = tools.discover_tools(tmp_path)

    assert names(found) == ["get_order", "order_status", "purge_cache", "weather"]
    assert all(isinstance(tool, tools.Tool) for tool in found)
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "broken.py" in record.getMessage()
    assert record.exc_info is not None and "boom: missing DATABASE_URL" in str(record.exc_info[1])

    registry = tools.ToolRegistry(found)
    assert await registry.invoke("get_order", {"order_id": "o7"}, ctx) == "order o7"
    assert await registry.invoke("purge_cache", {}, ctx) == "purged"
    assert registry.get("purge_cache") is not None and registry.get("purge_cache").kind == "action"  # type: ignore[union-attr]


async def test_modules_of_a_folder_import_each_other_relatively_in_any_order(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "__init__.py", "PREFIX = '#'")
    write(
        tmp_path,
        "orders.py",
        """
        from . import PREFIX
        from .zz_helpers import label  # sorts after this module: imported on demand
        from .sub.codes import CODE

        class OrderInput(BaseModel):
            order_id: str

        @tools.define_tool(name="order_label", description="Label an order.", input=OrderInput)
        async def order_label(input: OrderInput, ctx: Any) -> str:
            return PREFIX + label(input.order_id) + CODE
    """,
    )
    write(tmp_path, "zz_helpers.py", "def label(value: str) -> str:\n    return f'<{value}>'")
    write(tmp_path, "sub/codes.py", "CODE = '!'")  # a folder without __init__.py
    write(tmp_path, "broken_init/__init__.py", BROKEN)
    write(
        tmp_path,
        "broken_init/inner.py",
        'inner = tools.define_tool(name="inner", description="I.", execute=lambda i, c: 1)',
    )
    with caplog.at_level(logging.ERROR, logger="tools.discovery"):
        found = tools.discover_tools(tmp_path)
    # A subpackage whose __init__ raises is skipped with its modules, as Python would; the rest load.
    assert names(found) == ["order_label"]
    assert "broken_init" in caplog.text and "boom: missing DATABASE_URL" in caplog.text
    (order_label,) = found
    ctx = tools.ToolContext(actor=tools.Actor("u"), run_id="r", tool_call_id="c")
    assert await tools.ToolRegistry([order_label]).invoke("order_label", {"order_id": "7"}, ctx) == "#<7>!"


def test_a_single_file(tmp_path: Path) -> None:
    path = write(tmp_path, "orders.py", ORDERS)
    assert names(tools.discover_tools(path)) == ["get_order", "order_status"]
    assert names(tools.discover_tools(str(path))) == ["get_order", "order_status"]


def test_duplicate_names_first_wins_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(tmp_path, "a_first.py", 'dup = tools.define_tool(name="dup", description="First.", execute=lambda i, c: 1)')
    write(tmp_path, "b_second.py", 'dup = tools.define_tool(name="dup", description="Second.", execute=lambda i, c: 2)')
    with caplog.at_level(logging.WARNING, logger="tools.discovery"):
        found = tools.discover_tools(tmp_path)
    assert [(tool.name, tool.description) for tool in found] == [("dup", "First.")]
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "duplicate tool name 'dup'" in warning.getMessage()


def test_a_tool_that_cannot_be_built_is_logged_and_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(
        tmp_path,
        "needs_db.py",
        """
        class ReportTool(tools.ReadTool):
            description = "Needs a database handle."

            def __init__(self, db: Any) -> None:
                self.db = db

            async def execute(self, input: Any, ctx: Any) -> None: ...


        ok = tools.define_tool(name="ok", description="d", execute=lambda i, c: None)
        """,
    )
    with caplog.at_level(logging.ERROR, logger="tools.discovery"):
        found = tools.discover_tools(tmp_path)
    assert names(found) == ["ok"]
    assert "ReportTool is not a valid tool" in caplog.text


def test_a_module_level_instance_is_collected(tmp_path: Path) -> None:
    write(
        tmp_path,
        "report.py",
        """
        class _Report(tools.ReadTool):
            name = "report"
            description = "A report."

            def __init__(self, db: Any) -> None:
                self.db = db

            async def execute(self, input: Any, ctx: Any) -> None: ...


        report = _Report(db=object())
        """,
    )
    assert names(tools.discover_tools(tmp_path)) == ["report"]


def test_the_sdk_classes_a_module_imports_are_not_tools(tmp_path: Path) -> None:
    write(tmp_path, "imports.py", "from tools import ActionTool, BaseTool, ReadTool, Tool, define_tool, ai_tool\n")
    assert tools.discover_tools(tmp_path) == []


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(tools.ToolDefinitionError, match="neither a path nor a package"):
        tools.discover_tools(tmp_path / "nowhere")
    with pytest.raises(tools.ToolDefinitionError, match="neither a path nor a package"):
        tools.discover_tools("no_such_package_for_agora_tests")


# -- packages --------------------------------------------------------------------------------------


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An importable package ``agora_test_pkg`` with tools, a re-export, a broken module and a broken subpackage."""
    name = "agora_test_pkg"
    root = tmp_path / name
    write(root, "__init__.py", "")
    write(root, "orders.py", ORDERS)
    write(root, "cache.py", CACHE)
    write(root, "broken.py", BROKEN)
    write(root, "reexport.py", "from .orders import GetOrderTool, order_status\nfrom .cache import PurgeCache\n")
    write(root, "sub/__init__.py", "")
    write(
        root, "sub/weather.py", 'weather = tools.define_tool(name="weather", description="d", execute=lambda i, c: 1)'
    )
    write(root, "badsub/__init__.py", BROKEN)
    write(root, "badsub/inner.py", 'inner = tools.define_tool(name="inner", description="d", execute=lambda i, c: 1)')
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return name


def test_package_discovery_by_name(package: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="tools.discovery"):
        found = tools.discover_tools(package)
    # The re-exports are the same objects and classes: collected once, with no duplicate warning.
    assert names(found) == ["get_order", "order_status", "purge_cache", "weather"]
    assert "duplicate" not in caplog.text
    errors = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert errors == [
        f"tool module {package}.badsub raised on import; its tools are skipped",
        f"tool module {package}.broken raised on import; its tools are skipped",
    ]


def test_package_discovery_by_module(package: str) -> None:
    module = importlib.import_module(package)
    assert names(tools.discover_tools(module)) == ["get_order", "order_status", "purge_cache", "weather"]


def test_a_dotted_module_name(package: str) -> None:
    assert names(tools.discover_tools(f"{package}.orders")) == ["get_order", "order_status"]


def test_a_relative_name_is_refused() -> None:
    with pytest.raises(tools.ToolDefinitionError, match="neither a path nor a package"):
        tools.discover_tools(".relative")


def test_a_plain_module_object(package: str) -> None:
    module = importlib.import_module(f"{package}.orders")
    assert names(tools.discover_tools(module)) == ["get_order", "order_status"]


# -- strict (what a server starting an app uses) ---------------------------------------------------


def test_strict_refuses_naming_every_module_that_failed(package: str) -> None:
    with pytest.raises(tools.ToolDefinitionError) as caught:
        tools.discover_tools(package, strict=True)
    message = str(caught.value)
    assert f"{package}.badsub (RuntimeError: boom" in message and f"{package}.broken (RuntimeError: boom" in message


@pytest.mark.parametrize("broken", ["agora_broken_top", "agora_broken_top.tools"])
def test_a_package_that_raises_on_import_is_a_failure_not_a_crash(
    broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The package's own __init__ raises, or (a dotted name) its parent's does.
    write(tmp_path, "agora_broken_top/__init__.py", BROKEN)
    write(tmp_path, "agora_broken_top/tools/__init__.py", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with caplog.at_level(logging.ERROR, logger="tools.discovery"):
        assert tools.discover_tools(broken) == []
    assert f"tool module {broken} raised on import" in caplog.text
    with pytest.raises(tools.ToolDefinitionError, match=rf"failed to load: {broken} \(RuntimeError: boom"):
        tools.discover_tools(broken, strict=True)


def test_a_parent_missing_a_dependency_is_a_failure_and_a_missing_parent_is_no_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "agora_needs_dep/__init__.py", "import agora_no_such_dependency\n")
    write(tmp_path, "agora_needs_dep/tools/__init__.py", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    with pytest.raises(
        tools.ToolDefinitionError, match="ModuleNotFoundError: No module named 'agora_no_such_dependency'"
    ):
        tools.discover_tools("agora_needs_dep.tools", strict=True)
    with pytest.raises(tools.ToolDefinitionError, match="neither a path nor a package"):
        tools.discover_tools("agora_no_such_parent.tools", strict=True)


def test_strict_refuses_a_place_without_tools(tmp_path: Path) -> None:
    write(tmp_path, "empty.py", "X = 1\n")
    with pytest.raises(tools.ToolDefinitionError, match="no tools found there"):
        tools.discover_tools(tmp_path, strict=True)
