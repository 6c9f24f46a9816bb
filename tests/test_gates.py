"""The code gates of every commit (STYLE.md): ruff (lint and format) and mypy --strict pass.

They run here so that CI, which runs the test command only, holds main to them as well.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing_and_the_code_is_formatted() -> None:
    lint = run(str(BIN / "ruff"), "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    layout = run(str(BIN / "ruff"), "format", "--check", ".")
    assert layout.returncode == 0, layout.stdout + layout.stderr


def test_mypy_strict_finds_nothing() -> None:
    result = run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
