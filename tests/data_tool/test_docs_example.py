"""docs/data-tool.md's example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_example_answers_the_callers_rows_only() -> None:
    (block,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "data-tool.md").read_text(), re.S)
    result = subprocess.run([sys.executable, "-c", block], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[[1, 10.5], [2, 20]]\n"
