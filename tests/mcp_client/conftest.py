"""A real MCP server (tests/mcp_client/server.py, FastMCP) over stdio and Streamable HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway import Runtime
from tools import McpToolset

SERVER = Path(__file__).with_name("server.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_http_server(port: int) -> subprocess.Popen[bytes]:
    """Start server.py over Streamable HTTP on ``port`` and wait until it accepts connections."""
    process = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.DEVNULL)
    for _ in range(200):  # 10 s at most
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            pass
        try:
            code = process.wait(timeout=0.05)  # a pause that also notices a server that died
        except subprocess.TimeoutExpired:
            continue
        raise RuntimeError(f"the MCP test server exited with {code}")
    process.kill()
    raise RuntimeError("the MCP test server did not listen within 10 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """One HTTP server per module: the tests that share it leave its state as they found it."""
    port = free_port()
    process = start_http_server(port)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(process)


def stdio_command() -> list[str]:
    return [sys.executable, str(SERVER)]


@pytest.fixture
async def make_runtime() -> AsyncIterator[Callable[..., Runtime]]:
    """Runtimes started here (their toolsets connect) and closed after the test."""
    made: list[Runtime] = []

    def make(**kw: Any) -> Runtime:
        runtime = Runtime(**kw)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()


@pytest.fixture
async def toolsets() -> AsyncIterator[list[McpToolset]]:
    """Toolsets a test starts by hand; closed after it."""
    made: list[McpToolset] = []
    yield made
    for toolset in made:
        await toolset.aclose()
