"""``agora-gateway serve --log-format json``: every line of the log is one JSON object, and no secret is in one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import aiohttp

from gateway import sign_actor_token
from gateway._logs import actor_hash
from tools import Actor

from .test_serve import ROOT, SECRET_ENV, free_port, serve_env, serving

QUERY_SECRET = "query-secret-never-logged-Z8"


async def test_serve_logs_json_lines_with_access_lines_and_no_secret(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    token = sign_actor_token(Actor(id="user-42"), SECRET_ENV["AGORA_SECRET"], 600)
    auth = {"Authorization": f"Bearer {token}"}
    async with serving("--log-format", "json", log=log) as (_, port, _line), aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{port}"
        async with session.get(f"{base}/healthz") as health:
            assert health.status == 200
        async with session.get(f"{base}/agent/tools?agent=*&api_key={QUERY_SECRET}", headers=auth) as tools:
            assert tools.status == 200
        async with session.get(f"{base}/agent/threads/t-none", headers=auth) as missing:
            assert missing.status == 404
        async with session.ws_connect(f"{base}/agent/ws", headers=auth) as ws:
            await ws.send_json({"type": "hello"})
            assert (await ws.receive_json(timeout=10))["type"] == "welcome"
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]  # every line, start-up and shut-down included
    assert lines and all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    access = [(a["method"], a["path"], a["status"], a.get("event")) for a in lines if a["logger"] == "gateway.access"]
    assert access == [
        ("GET", "/healthz", 200, None),
        ("GET", "/agent/tools", 200, None),
        ("GET", "/agent/ws", 101, "upgrade"),
        ("GET", "/agent/ws", 101, "close"),
    ]
    [refusal] = [line for line in lines if line["message"].startswith("refused ")]  # the 404: its one line
    expected = ("/agent/threads/{thread_id}", 404, "thread_not_found")
    assert (refusal["path"], refusal["status"], refusal["code"]) == expected
    pseudonym = actor_hash("user-42")
    assert [a.get("actor") for a in lines if a["logger"] == "gateway.access"] == [None, pseudonym, pseudonym, pseudonym]
    for secret in (token, QUERY_SECRET, SECRET_ENV["AGORA_SECRET"], "user-42"):
        assert secret not in text, secret


def test_serve_refuses_an_unknown_log_format_in_one_line() -> None:
    command = [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())]
    env = serve_env(AGORA_LOG_FORMAT="xml")
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    said = "agora-gateway: cannot start: AGORA_LOG_FORMAT: use json or text\n"
    assert (result.returncode, result.stderr) == (2, said)
    flag = subprocess.run(
        [*command, "--log-format", "yaml"], cwd=ROOT, env=serve_env(), capture_output=True, text=True, timeout=60
    )
    assert flag.returncode == 2 and "--log-format: invalid choice: 'yaml'" in flag.stderr


async def test_an_explicit_text_format_overrides_agora_log_format(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    async with serving("--log-format", "text", env={"AGORA_LOG_FORMAT": "json"}, log=log) as (_, port, _line):
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as answer:
            assert answer.status == 200
    assert " INFO gateway.access: GET /healthz 200 " in log.read_text()
