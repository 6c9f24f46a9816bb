"""``agora-gateway serve`` as a user runs it: a real process on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway import Settings, StoreUnavailableError, create_app

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return answer.status, answer.read()


SECRET_ENV = {"AGORA_SECRET": "a-test-secret-for-the-cli-test"}


def serve_env(store: str | None = "memory://", **extra: str | None) -> dict[str, str]:
    """The environment of a ``serve`` under test: this one's, the test secret, ``store``, then ``extra``.

    A ``None`` in ``extra`` removes that variable (``AGORA_SECRET=None``: serve makes its own).

    ``serve`` keeps its store in ``./.agora/`` unless told, so a test says which: ``memory://``
    by default, ``None`` for serve's own default (in a ``cwd`` of the test's).
    """
    env = {**os.environ, **SECRET_ENV}
    for name in ("AGORA_STORE_URL", "AGORA_REDIS_URL"):
        env.pop(name, None)
    for name, value in extra.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    if store is not None:
        env["AGORA_STORE_URL"] = store
    return env


@contextlib.asynccontextmanager
async def serving(
    *options: str,
    env: dict[str, str | None] | None = None,
    cwd: Path = ROOT,
    log: Path | None = None,
    store: str | None = "memory://",
) -> AsyncIterator[tuple[subprocess.Popen[str], int, str]]:
    """``python -m gateway serve`` on a free port: the process, the port and its start-up line.

    It runs on ``store`` (``None``: serve's default, a SQLite file in ``cwd/.agora``; ``env``
    may set ``AGORA_STORE_URL`` too). Its log (stderr) goes to ``log`` when given. On exit the
    process is stopped (SIGTERM) and must have exited cleanly.
    """
    port = free_port()
    with contextlib.ExitStack() as files:
        stderr: Any = subprocess.PIPE if log is None else files.enter_context(log.open("w"))
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--port", str(port), *options],
            cwd=cwd,
            env=serve_env(store, **(env or {})),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30)
        yield process, port, line
    finally:
        if process.poll() is None:
            process.terminate()
        _, err = await asyncio.to_thread(process.communicate, timeout=20)
    assert process.returncode == 0, err


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_serve_starts_healthy_with_extra_tools_and_stops_cleanly(loop: str) -> None:
    options = ("--tools", "examples/shop_tools.py", "--demo", "--loop", loop)
    async with serving(*options, env={"AGORA_PUBLIC_BASE_URL": "https://chat.test"}) as (_, port, line):
        assert line.startswith(f"agora-gateway listening on http://127.0.0.1:{port}/")
        assert "model: demo" in line and "store: memory" in line and f"loop: {loop}" in line
        assert "public URL: https://chat.test/" in line  # where people reach it, beside where it listens
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/healthz")
        health = json.loads(body)
        assert (status, health["status"], health["store"]) == (200, "ok", {"status": "ok", "kind": "memory"})
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/agent/tools?agent=*")
        names = {tool["name"] for tool in json.loads(body)}
        assert {"get_weather", "refund_order", "stock_level"} <= names
        assert "reorder" not in names  # members only: an anonymous visitor is never offered it
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/")
        assert status == 200 and b"<agora-chat" in body


def test_serve_refuses_an_unknown_model() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--model", "llama"],
        cwd=ROOT,
        env=serve_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "AGORA_MODEL='llama'" in result.stderr


def test_serve_refuses_a_tools_folder_whose_tools_all_failed(tmp_path: Path) -> None:
    (tmp_path / "mytools.py").write_text("from tools import define_tool\ndef broken(:\n")
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--tools", str(tmp_path)],
        cwd=ROOT,
        env=serve_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "mytools.py" in result.stderr and "SyntaxError" in result.stderr  # which module, and why
    assert f"cannot start: tools {str(tmp_path)!r}: failed to load: " in result.stderr


def test_serve_refuses_a_short_secret_by_its_variable_and_never_echoes_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())],
        cwd=ROOT,
        env=serve_env(AGORA_SECRET="hunter2-short"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "cannot start: AGORA_SECRET: must be at least 16 bytes" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout


async def test_a_gateway_whose_redis_is_down_refuses_to_start() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    app = create_app(Settings(_env_file=None, secret="x" * 32, redis_url=url))  # type: ignore[call-arg]
    runner = web.AppRunner(app)
    try:
        with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1"):
            await runner.setup()
    finally:
        await runner.cleanup()


async def test_stopping_serve_closes_open_web_sockets_at_once() -> None:
    import time

    import aiohttp

    async with serving() as (process, port, _):
        async with aiohttp.ClientSession() as session, session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws:
            await ws.send_json({"type": "hello"})
            assert (await ws.receive_json(timeout=10))["type"] == "welcome"
            stopping = time.monotonic()
            process.terminate()
            message = await ws.receive(timeout=10)
            assert message.type is aiohttp.WSMsgType.CLOSE and message.data == aiohttp.WSCloseCode.GOING_AWAY
        await asyncio.to_thread(process.wait, 10)
        assert time.monotonic() - stopping < 5  # an open socket used to hold the shutdown for ~40 s


def test_serve_names_a_channel_setting_by_its_own_prefix() -> None:
    env = serve_env(
        AGORA_TELEGRAM_BOT_TOKEN="123456789:AAHfakeFAKEfake_fake-FAKEfakefake12345",
        AGORA_TELEGRAM_WEBHOOK_SECRET="not a valid secret!",
    )
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "cannot start: AGORA_TELEGRAM_WEBHOOK_SECRET: must be 1-256 characters" in result.stderr
    assert "not a valid secret!" not in result.stderr
