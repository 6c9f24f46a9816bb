"""The README's A2A client example runs as written against a gateway."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from .conftest import ALICE, WATCHDOG, Gateway, token_for

README = Path(__file__).resolve().parents[2] / "README.md"


def a2a_example() -> str:
    section = README.read_text(encoding="utf-8").split("\n## A2A\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1
    return str(blocks[0])


async def test_the_readme_client_example_refunds_with_an_approval(demo: Gateway) -> None:
    env = {**os.environ, "AGORA_URL": demo.base_url, "AGORA_TOKEN": token_for(ALICE)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        a2a_example(),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(3 * WATCHDOG):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == "TASK_STATE_WORKING "
    assert any(line.startswith("TASK_STATE_INPUT_REQUIRED Refund €129.00 for order 1042?") for line in lines)
    assert lines[-1] == "TASK_STATE_COMPLETED Done: €129.00 for order 1042 is on its way back to your card."
    assert "  artifact: KpiCards" in lines
