"""The README's AG-UI client works as written, against the demo gateway."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"


def client_example() -> str:
    section = README.read_text(encoding="utf-8").split("\n## AG-UI\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


async def test_the_readme_client_approves_a_refund(make_client: Any, capsys: Any) -> None:
    client = await make_client(demo=True)
    namespace: dict[str, Any] = {"__name__": "agui_client"}
    exec(compile(client_example(), "README.md", "exec"), namespace)
    asked: list[str] = []

    def approve(interrupt: Any) -> bool:
        asked.append(interrupt.message)
        return True

    await namespace["main"]("refund order 1042", gateway=str(client.make_url("")).rstrip("/"), approve=approve)
    out = capsys.readouterr().out
    assert asked == ["Refund €129.00 for order 1042?"]
    assert "[Refund €129.00 for order 1042?]" in out  # the action, announced by its question
    assert "[Refunded order 1042]" in out and "error" not in out
