"""``agora-gateway serve`` as a user runs it: a real process on a loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

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


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_serve_starts_healthy_with_extra_tools_and_stops_cleanly(loop: str) -> None:
    port = free_port()
    env = {**os.environ, "AGORA_SECRET": "a-test-secret-for-the-cli-test", "AGORA_PUBLIC_BASE_URL": "https://chat.test"}
    command = ["serve", "--port", str(port), "--tools", "examples/shop_tools.py", "--loop", loop]
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", *command],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30)
        assert line.startswith(f"agora-gateway listening on http://127.0.0.1:{port}/")
        assert "model: demo" in line and "store: memory" in line and f"loop: {loop}" in line
        assert "public URL: https://chat.test/" in line  # where people reach it, beside where it listens
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/healthz")
        assert (status, json.loads(body)) == (200, {"status": "ok"})
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/agent/tools?agent=*")
        names = {tool["name"] for tool in json.loads(body)}
        assert {"get_weather", "refund_order", "stock_level"} <= names
        assert "reorder" not in names  # members only: an anonymous visitor is never offered it
        status, body = await asyncio.to_thread(fetch, f"http://127.0.0.1:{port}/")
        assert status == 200 and b"<agora-chat" in body
    finally:
        process.terminate()
        out, err = await asyncio.to_thread(process.communicate, timeout=20)
    assert process.returncode == 0, err


def test_serve_refuses_an_unknown_model() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--model", "llama"],
        cwd=ROOT,
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
        env={**os.environ, "AGORA_SECRET": "a-test-secret-for-the-cli-test"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "mytools.py" in result.stderr and "SyntaxError" in result.stderr  # which module, and why
    assert "cannot start: AGORA_TOOLS_PATH=" in result.stderr and "no tools found" in result.stderr


def test_serve_refuses_a_short_secret_by_its_variable_and_never_echoes_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())],
        cwd=ROOT,
        env={**os.environ, "AGORA_SECRET": "hunter2-short"},
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

    port = free_port()
    env = {**os.environ, "AGORA_SECRET": "a-test-secret-for-the-cli-test"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30)
        async with aiohttp.ClientSession() as session, session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws:
            await ws.send_json({"type": "hello"})
            assert (await ws.receive_json(timeout=10))["type"] == "welcome"
            stopping = time.monotonic()
            process.terminate()
            message = await ws.receive(timeout=10)
            assert message.type is aiohttp.WSMsgType.CLOSE and message.data == aiohttp.WSCloseCode.GOING_AWAY
        await asyncio.to_thread(process.wait, 10)
        assert time.monotonic() - stopping < 5  # an open socket used to hold the shutdown for ~40 s
    finally:
        if process.poll() is None:
            process.kill()
        _, err = await asyncio.to_thread(process.communicate, timeout=20)
    assert process.returncode == 0, err
