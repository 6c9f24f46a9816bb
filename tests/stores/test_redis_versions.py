"""The lowest redis-py and hiredis that pyproject.toml allows, installed apart: the store works on them.

The versions come from pyproject.toml's ``>=`` bounds, so lowering a bound installs and tests the
new one. pip installs them into a temp ``--target`` dir (from PyPI, reached in CI too), and a
gateway process runs one turn with that dir first on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import drop_prefix

pytestmark = pytest.mark.redis
ROOT = Path(__file__).resolve().parents[2]


def lowest_allowed(name: str) -> str:
    """The ``>=`` bound of dependency ``name`` in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.name == name:
            return next(spec.version for spec in requirement.specifier if spec.operator == ">=")
    raise AssertionError(f"pyproject.toml does not depend on {name}")


@pytest.mark.slow
def test_the_lowest_allowed_redis_py_and_hiredis_run_a_turn(tmp_path: Path, redis_url: str, prefix: str) -> None:
    redis_py, hiredis = lowest_allowed("redis"), lowest_allowed("hiredis")
    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--only-binary=:all:"]
    pins = [f"redis[hiredis]=={redis_py}", f"hiredis=={hiredis}"]
    subprocess.run([*install, "--target", str(target), *pins], check=True, timeout=300)
    thread_id = f"t-{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)]),
        "AGORA_TEST_REDIS_URL": redis_url,
        "AGORA_TEST_PREFIX": prefix,
    }
    try:
        child = subprocess.run(
            [sys.executable, "-W", "error", "-m", "tests.stores._version_child", thread_id],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        asyncio.run(drop_prefix(redis_url, prefix))
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    imported = Version(report["redis"]), Version(report["hiredis"])
    assert imported == (Version(redis_py), Version(hiredis)), "the versions under test were imported"
    assert report["status"] == "completed"
    assert report["logged"].count("tool-completed") == 2 and report["logged"][-1] == "run-finished"
    assert report["live"] == list(range(1, len(report["logged"]) + 1)), "the live tail saw every event"
