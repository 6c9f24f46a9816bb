"""``serve --app``, ``init`` and ``--tools`` as a user runs them: real processes, fake model servers."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError

from tests.models.fake_anthropic import FakeAnthropic, delta, end, json_delta, message, start, stop, tool_start
from tests.models.fake_openai import FakeOpenAI, finish, role, text, tool

from .test_serve import ROOT, free_port, serve_env, serving


@pytest.fixture
def starter(tmp_path: Path) -> Path:
    """``agora-gateway init`` into a fresh folder, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "init", str(tmp_path / "shop")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "serve --app starter_app:gateway" in result.stdout
    return tmp_path / "shop"


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as response:
        return response.status, await response.text()


async def _turn(port: int, message: str, *, timeout: float = 20) -> list[dict[str, Any]]:
    """One web-socket turn against the process: every frame up to the run's end."""
    frames: list[dict[str, Any]] = []
    async with aiohttp.ClientSession() as session, session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws:
        await ws.send_json({"type": "hello"})
        async with asyncio.timeout(timeout):
            while (await ws.receive_json())["type"] != "welcome":
                pass
            await ws.send_json({"type": "send", "text": message})
            while True:
                frame = await ws.receive_json()
                frames.append(frame)
                if frame["type"] in ("run-finished", "approval-requested"):
                    return frames


def _environment(fake: FakeOpenAI) -> dict[str, str]:
    return {"AGORA_MODEL": "openai:gpt-fake", "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test-key"}


async def test_serve_app_offers_only_the_apps_tools_prompt_and_branding(starter: Path, fake: FakeOpenAI) -> None:
    fake.script(fake.sse(role(), text("Hello from the starter."), finish()))
    async with serving("--app", "starter_app:gateway", cwd=starter, env=_environment(fake)) as (process, port, line):
        assert "app: starter_app:gateway" in line and "model: openai:gpt-fake" in line
        assert process.stdout is not None
        tools_line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 10)
        assert tools_line.strip() == "agent support: 2 tools: get_order, cancel_order"
        frames = await _turn(port, "hi")
        assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"
        (request,) = fake.requests
        offered = sorted(t["function"]["name"] for t in request.body["tools"])
        assert offered == ["cancel_order", "get_order"]  # nothing of the demo shop
        system = request.body["messages"][0]
        assert system["role"] == "system" and "support assistant of a small shop" in system["content"]
        assert "coffee" not in json.dumps(request.body).lower()
        async with aiohttp.ClientSession() as session:
            status, page = await _get(session, f"http://127.0.0.1:{port}/")
            assert status == 200 and "<title>Shop support</title>" in page and 'title="Shop support"' in page
            assert 'accent="#0f766e"' in page and "show order 1001" in page
            assert "Coffee" not in page and "demo" not in page.lower()
            status, card_text = await _get(session, f"http://127.0.0.1:{port}/.well-known/agent-card.json")
            card = json.loads(card_text)
            assert status == 200 and card["name"] == "Shop support"
            assert {skill["id"] for skill in card["skills"]} == {"get_order", "cancel_order"}
            assert "demo" not in card_text.lower() and "coffee" not in card_text.lower()


async def test_init_then_serve_app_answers_a_turn_with_its_tool(
    starter: Path, fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.script(
        fake.sse(role(), tool(0, id="call_1", name="get_order", args='{"order_id": "1001"}'), finish("tool_calls")),
        fake.sse(role(), text("Order 1001 has shipped."), finish()),
    )
    log = tmp_path / "serve.log"
    options = ("--app", "starter_app:gateway")
    async with serving(*options, cwd=starter, env=_environment(fake), log=log) as (_, port, _line):
        frames = await _turn(port, "where is order 1001?")
    # The OpenAI client's HTTP library logs each call with its URL at INFO: only --log-level DEBUG shows it.
    assert "HTTP Request:" not in log.read_text() and fake.base_url not in log.read_text()
    completed = [frame for frame in frames if frame["type"] == "tool-completed"]
    assert [(frame["tool"], frame["done"]) for frame in completed] == [("get_order", "Order 1001")]
    ui = [frame for frame in frames if frame["type"] == "ui"]
    assert ui and ui[0]["component"] == "Timeline"  # the read tool's present(), rendered for the web
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"
    tool_message = fake.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and '"status": "shipped"' in tool_message["content"]


async def test_init_then_serve_app_runs_offline_on_the_default_model(starter: Path) -> None:
    async with serving("--app", "starter_app:gateway", cwd=starter) as (_, port, line):
        assert "model: demo" in line
        frames = await _turn(port, "hello")
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"
    said = "".join(frame.get("delta", "") for frame in frames if frame["type"] == "text-delta")
    assert said and "coffee" not in said.lower()


async def test_serve_alone_is_still_the_demo() -> None:
    async with serving() as (process, port, line):
        assert "app: demo" in line and "model: demo" in line
        assert process.stdout is not None
        tools_line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 10)
        assert tools_line.startswith("  agent assistant: 6 tools: get_weather, list_orders")
        async with aiohttp.ClientSession() as session:
            status, page = await _get(session, f"http://127.0.0.1:{port}/")
            assert status == 200 and "Coffee shop assistant" in page and "offline demo model" in page
            status, card = await _get(session, f"http://127.0.0.1:{port}/.well-known/agent-card.json")
            assert json.loads(card)["name"] == "Coffee shop assistant"


async def test_serve_tools_serves_them_without_the_demo_unless_asked() -> None:
    async with serving("--tools", "examples/shop_tools.py") as (_, port, line):
        assert "app: --tools examples/shop_tools.py" in line
        async with aiohttp.ClientSession() as session:
            _, body = await _get(session, f"http://127.0.0.1:{port}/agent/tools?agent=*")
            assert {t["name"] for t in json.loads(body)} == {"stock_level", "discontinue_product"}  # reorder: members
            status, page = await _get(session, f"http://127.0.0.1:{port}/")
            assert status == 200 and "Coffee" not in page
    async with serving("--tools", "examples/shop_tools.py", "--demo") as (_, port, line):
        assert "app: demo" in line
        async with aiohttp.ClientSession() as session:
            _, body = await _get(session, f"http://127.0.0.1:{port}/agent/tools?agent=*")
            assert {"stock_level", "get_weather", "refund_order"} <= {t["name"] for t in json.loads(body)}


def _refused(*options: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), *options],
        cwd=cwd,
        env=serve_env(**(env or {})),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("no_such_module:gateway", "--app 'no_such_module:gateway': no module named 'no_such_module'"),
        ("starter_app:missing", "--app 'starter_app:missing': module 'starter_app' has no attribute 'missing'"),
        ("starter_app.tools:ORDERS", "--app 'starter_app.tools:ORDERS': ORDERS is a dict, not a gateway.Gateway"),
        ("starter app", "--app 'starter app': name a module and an attribute"),
    ],
)
def test_a_bad_app_is_one_clear_line_and_exit_2(starter: Path, spec: str, said: str) -> None:
    result = _refused("--app", spec, cwd=starter)
    assert result.returncode == 2
    assert f"agora-gateway: cannot start: {said}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_branding_variable_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "AGORA_SECRET"}
    env["AGORA_STORE_URL"] = "memory://"
    env["AGORA_BRAND_ACCENT"] = "red;} body{display:none"
    result = subprocess.run(
        # An app without branding in its code: the gateway reads AGORA_BRAND_* as it assembles.
        [
            sys.executable,
            "-m",
            "gateway",
            "serve",
            "--port",
            str(free_port()),
            "--tools",
            str(ROOT / "examples/shop_tools.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    # Only the refusal: no word of the random secret a start that never happens would have used.
    assert result.stderr.splitlines() == [
        "agora-gateway: cannot start: AGORA_BRAND_ACCENT: must be a CSS colour such as #0f766e, teal or rgb(15 118 110)"
    ]


def test_an_app_whose_tools_fail_to_import_is_refused_naming_them(tmp_path: Path) -> None:
    (tmp_path / "broken_tools").mkdir()
    (tmp_path / "broken_tools" / "good.py").write_text(
        "from tools import define_tool\n\n"
        "async def ping() -> str:\n    return 'pong'\n\n"
        "ping_tool = define_tool(name='ping', description='Ping.', execute=ping)\n"
    )
    (tmp_path / "broken_tools" / "bad.py").write_text("import no_such_dependency\n")
    (tmp_path / "my_app.py").write_text(
        "from pathlib import Path\nfrom gateway import Gateway\n\n"
        "gateway = Gateway(tools=str(Path(__file__).parent / 'broken_tools'))\n"
    )
    result = _refused("--app", "my_app:gateway", cwd=tmp_path)
    assert result.returncode == 2
    assert "cannot start: tools" in result.stderr and "bad.py (ModuleNotFoundError" in result.stderr
    assert "no_such_dependency" in result.stderr


def test_init_refuses_to_overwrite_and_writes_every_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway import Settings
    from gateway.app import setting_variable, settings_models

    first = subprocess.run([sys.executable, "-m", "gateway", "init", str(tmp_path)], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-m", "gateway", "init", str(tmp_path)], capture_output=True, text=True)
    assert again.returncode == 2 and "use --force" in again.stderr
    example = (tmp_path / ".env.example").read_text()
    for _, model in settings_models():
        for name in model.model_fields:
            assert setting_variable(model, name) in example, (model.__name__, name)
    assert "AGORA_TWILIO_FROM=" in example and "AGORA_ALLOWED_ORIGINS=" in example
    # No secret is published with the starter: an example copied to .env signs with a random
    # per-process secret until one is set, never with a value everyone who ran init knows.
    monkeypatch.delenv("AGORA_SECRET", raising=False)
    copied = Settings(_env_file=tmp_path / ".env.example")  # type: ignore[call-arg]
    assert copied.secret is None and copied.app == "starter_app:gateway"


def test_the_starters_env_example_sets_no_secret_anyone_could_know(
    starter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway import Settings

    monkeypatch.delenv("AGORA_SECRET", raising=False)
    (starter / ".env").write_text((starter / ".env.example").read_text())  # cp .env.example .env
    settings = Settings(_env_file=starter / ".env")  # type: ignore[call-arg]
    # A secret written into every starter would sign everyone's cookies and actor tokens: the
    # copy leaves it unset (a random one per process, logged) until its owner makes one.
    assert settings.secret is None
    assert settings.app == "starter_app:gateway"
    assert "# AGORA_SECRET=" in (starter / ".env.example").read_text()


def test_init_here_says_what_to_do_next_without_cd(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "gateway", "init"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "Next: cp .env.example .env && agora-gateway serve --app starter_app:gateway" in result.stdout


async def test_agora_app_in_the_environment_serves_the_app(starter: Path) -> None:
    async with serving(cwd=starter, env={"AGORA_APP": "starter_app:gateway"}) as (_, port, line):
        assert "app: starter_app:gateway" in line
        async with aiohttp.ClientSession() as session:
            _, body = await _get(session, f"http://127.0.0.1:{port}/agent/tools?agent=*")
            assert [t["name"] for t in json.loads(body)] == ["get_order", "cancel_order"]


def test_the_starters_env_file_never_signs_with_a_published_secret(
    starter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # init says "cp .env.example .env && agora-gateway serve": whatever the file holds then signs
    # every actor token, cookie and confirm token, so a value printed in the file (the same in
    # every starter) would let anyone sign a token for any actor, with any roles.
    from gateway import Settings

    for variable in ("AGORA_SECRET", "AGORA_APP"):
        monkeypatch.delenv(variable, raising=False)
    shutil.copy(starter / ".env.example", starter / ".env")
    settings = Settings(_env_file=starter / ".env")  # type: ignore[call-arg]
    assert settings.secret is None  # a random secret per process, until one is set
    assert settings.app == "starter_app:gateway"
    with pytest.raises(ValidationError, match="placeholder"):
        Settings(_env_file=None, secret="change-me-to-a-long-random-string")  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (  # an old script: it exits (or serves its own app) when imported
            "import sys\nsys.exit(0)\n",
            "--app 'my_app:gateway': importing my_app called sys.exit(0)",
        ),
        (
            "from gateway import Gateway\ngateway = Gateway(static_dir='no/such')\n",
            "--app 'my_app:gateway': importing my_app failed: Gateway(static_dir=...): 'no/such' is not a folder",
        ),
        (
            "from gateway import Branding, Gateway\ngateway = Gateway(branding=Branding(accent='red;} body{x'))\n",
            "--app 'my_app:gateway': importing my_app failed: Branding: accent: must be a CSS colour",
        ),
        (
            "class App:\n    @property\n    def gateway(self):\n        raise KeyError('not built')\n\napp = App()\n",
            "--app 'my_app:app.gateway': reading app.gateway failed: KeyError: 'not built'",
        ),
    ],
)
def test_an_app_that_refuses_itself_on_import_is_one_clear_line(tmp_path: Path, source: str, said: str) -> None:
    # A mistake in the app's declaration (refused by Gateway, Branding...) is bad input like a
    # wrong --app: one line naming it, exit 2, no traceback, and never the value given.
    (tmp_path / "my_app.py").write_text(source)
    spec = "my_app:app.gateway" if "class App" in source else "my_app:gateway"
    result = _refused("--app", spec, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"agora-gateway: cannot start: {said}" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "body{x" not in result.stderr


def _init(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "init", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_init_refuses_before_writing_anything_and_never_writes_through_a_link(tmp_path: Path) -> None:
    # A file where init needs a folder: refused in one line, and nothing written beside it.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "starter_app").write_text("a file, not a folder")
    result = _init(str(blocked), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("agora-gateway init: ") and "starter_app" in result.stderr
    assert sorted(p.name for p in blocked.iterdir()) == ["starter_app"]
    # A link that points nowhere (yet) is still there: init does not write through it, nor
    # through a link that points at a file elsewhere, even with --force.
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".env.example").symlink_to(tmp_path / "planted")
    refused = _init(str(linked), cwd=tmp_path)
    assert refused.returncode == 2 and "use --force" in refused.stderr
    (tmp_path / "planted").write_text("keep me")
    forced = _init(str(linked), "--force", cwd=tmp_path)
    assert forced.returncode == 2 and "link" in forced.stderr
    assert (tmp_path / "planted").read_text() == "keep me"


def test_init_says_the_next_command_as_a_shell_reads_it(tmp_path: Path) -> None:
    result = _init("my shop", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Next: cd 'my shop' && cp .env.example .env" in result.stdout


_THIS_CHECKOUT = {"PYTHONPATH": str(ROOT)}
"""A process started outside the checkout imports ``gateway`` from here, not from wherever the
venv's editable install points (another worktree)."""


async def test_serve_with_an_anthropic_model_answers_a_turn_with_its_tool(
    starter: Path, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    fake_anthropic.script(
        fake_anthropic.sse(
            start(30),
            tool_start(0, "toolu_1", "get_order"),
            json_delta(0, '{"order_id": "1001"}'),
            stop(0),
            delta("tool_use", 9),
            end(),
        ),
        fake_anthropic.sse(*message("Order 1001 has shipped.")),
    )
    env = {"ANTHROPIC_BASE_URL": fake_anthropic.base_url, "ANTHROPIC_API_KEY": "test-key", **_THIS_CHECKOUT}
    log = tmp_path / "serve.log"
    options = ("--app", "starter_app:gateway", "--model", "anthropic:claude-fake")
    async with serving(*options, cwd=starter, env=env, log=log) as (_, port, line):
        assert "model: anthropic:claude-fake" in line
        frames = await _turn(port, "where is order 1001?")
    assert "HTTP Request:" not in log.read_text() and fake_anthropic.base_url not in log.read_text()
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed"
    assert frames[-1]["usage"] == {"input_tokens": 40, "output_tokens": 14, "model_calls": 2}
    first, second = fake_anthropic.requests
    assert first.body["model"] == "claude-fake" and first.api_key == "test-key"
    assert "support assistant of a small shop" in first.body["system"]
    assert sorted(t["name"] for t in first.body["tools"]) == ["cancel_order", "get_order"]
    [result] = second.body["messages"][-1]["content"]
    assert result["type"] == "tool_result" and '"status": "shipped"' in result["content"]


def test_serve_without_an_anthropic_key_names_the_variable(starter: Path) -> None:
    env = serve_env(ANTHROPIC_API_KEY=None, **_THIS_CHECKOUT)
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--model", "anthropic:claude-fake"],
        cwd=starter,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "ANTHROPIC_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr
