"""The wheel a user installs carries everything ``serve`` needs: the widget, the demo, the templates."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from .test_serve import ROOT, fetch, serving


def build_wheel(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(into), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = into.glob("agora_gateway-*.whl")
    return wheel


async def test_the_installed_wheel_serves_the_widget_and_the_demo_page(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:  # a pure-Python wheel installs by unpacking
        names = set(archive.namelist())
        archive.extractall(site)
    assert {
        "gateway/static/agora-chat.js",
        "gateway/templates/demo.html",
        "gateway/templates/chat.html",
        "gateway/demo/_tools.py",
    } <= names
    assert "renderers/templates/document.html.j2" in names and "renderers/static/components.css" in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)

    env = {"PYTHONPATH": str(site)}
    work = tmp_path / "elsewhere"  # not the checkout: nothing of the repository is in reach
    work.mkdir()
    async with serving("--loop", "asyncio", env=env, cwd=work) as (_, port, line):
        assert line.startswith(f"agora-gateway listening on http://127.0.0.1:{port}/"), line
        base = f"http://127.0.0.1:{port}"
        status, page = await asyncio.to_thread(fetch, f"{base}/")
        assert status == 200 and b"<agora-chat" in page
        status, script = await asyncio.to_thread(fetch, f"{base}/static/agora-chat.js")
        assert status == 200 and script == (ROOT / "static" / "agora-chat.js").read_bytes()
        status, _ = await asyncio.to_thread(fetch, f"{base}/healthz")
        assert status == 200
    where = subprocess.run(
        [sys.executable, "-c", "import gateway; print(gateway.__file__)"],
        cwd=work,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(site) in where.stdout  # the served gateway was the wheel's, not the checkout's
