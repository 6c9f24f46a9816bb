"""The README's Python examples run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def test_write_a_tool_then_use_it_from_python(tmp_path: Path) -> None:
    script = tmp_path / "readme_example.py"
    script.write_text(python_blocks("Write a tool")[0] + "\n" + python_blocks("Use it from Python")[0])
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("completed ['run-started', 'tool-started', 'ui', 'tool-completed'")


def test_the_embedding_example_signs_a_token_the_gateway_accepts(tmp_path: Path) -> None:
    from gateway import verify_actor_token

    script = tmp_path / "sign.py"
    (block,) = python_blocks("Embed the chat widget")
    script.write_text(block + "\nprint(token)\n")
    secret = "a-secret-shared-with-the-gateway"
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "AGORA_SECRET": secret})  # fmt: skip
    assert result.returncode == 0, result.stderr
    actor = verify_actor_token(result.stdout.strip(), secret.encode())
    assert (actor.id, list(actor.roles), actor.tenant_ref) == ("user-42", ["member"], "acme")


def test_the_app_example_declares_a_gateway_that_serves_its_tools(tmp_path: Path) -> None:
    (tmp_path / "static").mkdir()
    (tmp_path / "my_shop").mkdir()
    (tmp_path / "my_shop" / "__init__.py").write_text("")
    (tmp_path / "my_shop" / "tools.py").write_text(python_blocks("Write a tool")[0])
    (block,) = python_blocks("Your own app")
    script = tmp_path / "app.py"
    script.write_text(
        block
        + "\nfrom gateway import Settings\n"
        + "runtime = gateway.runtime(Settings(_env_file=None, secret='a-secret-of-the-readme-test'))\n"
        + "print(sorted(t.name for t in runtime.registry), runtime.model.name, gateway.resolved_branding().name)\n"
    )
    env = {"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test-not-used"}
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['get_forecast', 'purge_cache'] openai:gpt-4o-mini Acme support"
