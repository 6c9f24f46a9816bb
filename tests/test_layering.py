"""The arrows of docs/architecture.md ("The house"), held: ``channels -> gateway -> renderers, tools``.

- ``tools`` imports nothing of ours; ``renderers`` only ``tools``.
- ``gateway`` imports no channel, except the composition root (``gateway/app.py``, ``gateway/cli.py``).
- A channel imports no other channel, and not ``renderers`` (it asks ``gateway`` for UI).
- A channel sees the gateway through ``ChannelServices`` only: not the wide ``GatewayServices``,
  not ``runtime.store``, no raw ``channel_*`` store calls (its state is ``services.state(prefix)``).

Every import counts, ``TYPE_CHECKING`` and function-level ones included; relative imports are
resolved against the importing module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tools", "renderers", "gateway", "channels")
COMPOSITION_ROOT = {"gateway.app", "gateway.cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, source: str, *, is_package: bool) -> set[str]:
    """Every module ``source`` imports (absolute names; ``from x import y`` gives ``x`` and ``x.y``)."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            found.add(origin)
            found.update(f"{origin}.{alias.name}" for alias in node.names)
    return found


def violation(importer: str, imported: str) -> str | None:
    """Why ``importer`` may not import ``imported`` (``None`` when it may)."""
    top, _, rest = imported.partition(".")
    if top not in PACKAGES:
        return None
    layer = importer.split(".")[0]
    if layer == "tools" and top != "tools":
        return "tools imports nothing of ours"
    if layer == "renderers" and top not in {"renderers", "tools"}:
        return "renderers imports only tools"
    if layer == "gateway" and top == "channels" and importer not in COMPOSITION_ROOT:
        return "gateway imports channels only in the composition root"
    if layer == "channels":
        if top == "renderers":
            return "a channel asks gateway for UI, never renderers"
        own = importer.split(".")[1] if importer.count(".") else None
        other = rest.split(".")[0] if rest else None
        if top == "channels" and other and own and other != own:
            return "a channel never imports another channel"
    return None


def violations() -> list[str]:
    found: list[str] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = module_name(path)
            for imported in sorted(imports_of(module, path.read_text(), is_package=path.name == "__init__.py")):
                reason = violation(module, imported)
                if reason is not None:
                    found.append(f"{module} imports {imported}: {reason}")
    return found


def test_the_tree_keeps_the_arrows() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        ("tools._tool", "from gateway import Runtime", "tools imports nothing of ours"),
        ("renderers._renderer", "import channels.web", "renderers imports only tools"),
        ("gateway._runtime", "from channels.whatsapp import WHATSAPP", "composition root"),
        ("gateway._runtime", "if TYPE_CHECKING:\n    from channels import web", "composition root"),
        ("channels.web._socket", "from renderers import Renderer", "never renderers"),
        ("channels.web._socket", "from ..whatsapp import WHATSAPP", "another channel"),
        ("channels.a2a._card", "def f():\n    import channels.ag_ui._sse", "another channel"),
    ],
)
def test_each_broken_arrow_is_caught(module: str, source: str, expected: str) -> None:
    reasons = [violation(module, imported) for imported in imports_of(module, source, is_package=False)]
    assert any(reason and expected in reason for reason in reasons), reasons


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("gateway.app", "from channels.web import WebChannel"),
        ("channels.web._socket", "from gateway import SERVICES\nfrom tools import Actor\nfrom ._frames import x"),
        ("renderers._catalog", "from tools import UiComponent"),
        ("channels.whatsapp._channel", "from . import _state"),
    ],
)
def test_allowed_arrows_pass(module: str, source: str) -> None:
    imported = imports_of(module, source, is_package=False)
    assert imported and {violation(module, name) for name in imported} == {None}


_WIDE = {"GatewayServices", "SERVICES"}
_STORE_CALLS = {
    "channel_get",
    "channel_set",
    "channel_claim",
    "channel_delete",
    "channel_delete_if",
    "channel_renew_if",
}


def reaches_past_the_seam(source: str) -> list[str]:
    """What in ``source`` goes around ``ChannelServices``: the wide services, ``runtime.store``, raw store calls."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gateway"):
            found.extend(f"imports {alias.name}" for alias in node.names if alias.name in _WIDE)
        elif isinstance(node, ast.Attribute):
            owner = node.value
            named = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if node.attr == "store" and named == "runtime":
                found.append("runtime.store")
            if node.attr in _STORE_CALLS:
                found.append(f".{node.attr}()")
    return found


def test_channels_see_the_gateway_only_through_channel_services() -> None:
    offenders = {
        module_name(path): hits
        for path in sorted((ROOT / "channels").rglob("*.py"))
        if (hits := reaches_past_the_seam(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "hit"),
    [
        ("from gateway import GatewayServices", "imports GatewayServices"),
        ("from gateway._services import SERVICES", "imports SERVICES"),
        ("x = self.services.runtime.store", "runtime.store"),
        ("async def f(runtime):\n    await runtime.store.ping()", "runtime.store"),
        ("await store.channel_claim('k', ttl=1)", ".channel_claim()"),
    ],
)
def test_each_way_around_the_seam_is_caught(source: str, hit: str) -> None:
    assert hit in reaches_past_the_seam(source)
