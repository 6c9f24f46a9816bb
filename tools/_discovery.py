"""``discover_tools``: import every module below a folder or package and collect its tools."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import pkgutil
import sys
from pathlib import Path
from types import ModuleType

from ._errors import ToolDefinitionError
from ._tool import Tool, as_tool, is_tool_like

__all__ = ["discover_tools"]

logger = logging.getLogger("tools.discovery")


def _modules_of_package(package: str, failed: list[str]) -> list[ModuleType]:
    try:
        root = importlib.import_module(package)
    except Exception as exc:  # the package itself (or a parent) raised: nothing of it is importable
        logger.exception("tool module %s raised on import; its tools are skipped", package)
        failed.append(f"{package} ({type(exc).__name__}: {exc})")
        return []
    modules = [root]
    paths = getattr(root, "__path__", None)
    if paths is None:
        return modules
    # Without onerror, walk_packages re-raises any non-ImportError from a subpackage's __init__
    # and the whole discovery dies; the import below logs that subpackage's error instead.
    walked = pkgutil.walk_packages(paths, prefix=f"{package}.", onerror=lambda name: None)
    for info in sorted(walked, key=lambda m: m.name):
        try:
            modules.append(importlib.import_module(info.name))
        except Exception as exc:
            logger.exception("tool module %s raised on import; its tools are skipped", info.name)
            failed.append(f"{info.name} ({type(exc).__name__}: {exc})")
    return modules


def _folder_package(root: Path, failed: list[str]) -> str:
    """Make ``root`` an importable package with a name of its own, and return the name.

    Its modules import each other relatively (``from .helpers import fmt``) whatever order they
    are discovered in, as they would in a package of the user's: the import system loads them,
    with the folder as the package's path. The name is unique per folder, so two folders never
    share modules. An ``__init__.py`` that raises is logged and the folder's other modules are
    still imported.
    """
    name = "agora_discovered_" + hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:8]
    if name in sys.modules:
        return name
    init = root / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(root)])
    if init.is_file() and spec is not None and spec.loader is not None:
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        try:
            spec.loader.exec_module(package)
            return name
        except Exception as exc:
            logger.exception("tool module %s raised on import; its tools are skipped", init)
            failed.append(f"{init} ({type(exc).__name__}: {exc})")
    package = ModuleType(name)
    package.__path__ = [str(root)]
    package.__package__ = name
    sys.modules[name] = package
    return name


def _import_file(path: Path, root: Path, package: str, failed: list[str]) -> ModuleType | None:
    parts = [part for part in path.relative_to(root).with_suffix("").parts if part != "__init__"]
    if not parts:
        return sys.modules[package]
    module_name = ".".join([package, *parts])
    try:
        if all(part.isidentifier() for part in parts):
            return importlib.import_module(module_name)
        # A file or folder name that is no identifier cannot be imported by name: load it by path.
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(module_name, None)
            raise
        return module
    except Exception as exc:
        logger.exception("tool module %s raised on import; its tools are skipped", path)
        failed.append(f"{path} ({type(exc).__name__}: {exc})")
        return None


def _modules_of_path(path: Path, failed: list[str]) -> list[ModuleType]:
    if path.is_file():
        files, root = [path], path.parent
    else:
        files = sorted(
            p
            for p in path.rglob("*.py")
            if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(path).parts)
        )
        root = path
    package = _folder_package(root, failed)
    modules = []
    for file in files:
        module = _import_file(file, root, package, failed)
        if module is not None and module not in modules:
            modules.append(module)
    return modules


def _tools_in(module: ModuleType, failed: list[str]) -> list[Tool]:
    found: list[Tool] = []
    for attr, value in list(vars(module).items()):
        if attr.startswith("__"):
            continue
        if isinstance(value, type):
            # A class counts where it is defined, not everywhere it is imported.
            if value.__module__ != module.__name__ or not is_tool_like(value):
                continue
        elif not isinstance(value, Tool) and not (is_tool_like(value) and type(value).__module__ == module.__name__):
            continue
        try:
            found.append(as_tool(value))
        except ToolDefinitionError as exc:
            logger.exception("%s.%s is not a valid tool; skipped", module.__name__, attr)
            failed.append(f"{module.__name__}.{attr} ({exc})")
    return found


def _is_package(name: str) -> bool:
    """Whether ``name`` names a module; one whose parent fails to import does (``_modules_of_package`` says why)."""
    if not all(part.isidentifier() for part in name.split(".")):
        return False  # a relative or malformed name
    try:
        return importlib.util.find_spec(name) is not None  # imports the parents of a dotted name
    except ModuleNotFoundError as exc:
        # Missing itself (or a parent): no package. A dependency a parent imports is missing: a broken one.
        return not (exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")))
    except Exception:
        return True


def discover_tools(path_or_package: str | Path | ModuleType, *, strict: bool = False) -> list[Tool]:
    """Import every module below a folder, file, package or module and collect its tools.

    Collected: ``Tool`` objects (``define_tool``, ``define_confirmed_tool``), classes decorated
    with ``ai_tool`` and concrete ``ReadTool`` / ``ActionTool`` / ``BaseTool`` subclasses defined in
    the module. A module that raises on import is skipped and logged with its error; every other
    tool still registers. The first tool of a name wins; later ones are logged and dropped.

    Args:
        path_or_package: A folder or ``.py`` file path, a dotted package name, or a module.
        strict: Raise instead of skipping when a module fails to import or a tool is invalid
            (each failure is still logged first), or when nothing was found: what a server
            starting an app wants.

    Raises:
        ToolDefinitionError: The path does not exist and is not an importable package; with
            ``strict``, a module or tool failed (all of them named), or no tool was found.
    """
    failed: list[str] = []
    if isinstance(path_or_package, ModuleType):
        modules = [path_or_package]
        if hasattr(path_or_package, "__path__"):
            modules = _modules_of_package(path_or_package.__name__, failed)
    else:
        path = Path(path_or_package)
        if path.exists():
            modules = _modules_of_path(path, failed)
        elif isinstance(path_or_package, str) and _is_package(path_or_package):
            modules = _modules_of_package(path_or_package, failed)
        else:
            raise ToolDefinitionError(f"discover_tools(): {path_or_package!r} is neither a path nor a package")
    tools: dict[str, Tool] = {}
    for module in modules:
        for tool in _tools_in(module, failed):
            first = tools.get(tool.name)
            if first is None:
                tools[tool.name] = tool
            elif first is not tool:
                logger.warning(
                    "duplicate tool name %r in %s; keeping the first, from %s", tool.name, tool.source, first.source
                )
    if strict and failed:
        raise ToolDefinitionError("failed to load: " + "; ".join(failed))
    if strict and not tools:
        raise ToolDefinitionError("no tools found there")
    return list(tools.values())
