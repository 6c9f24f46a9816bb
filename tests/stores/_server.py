"""A private redis-server for tests that stop and start Redis (never the shared one)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
from pathlib import Path

import redis.asyncio as redis


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` on a free port in a temp dir, with an append-only file so data survives a restart."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed")
        self.executable = executable

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Start the server and wait (with a watchdog) until it answers."""
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "yes",
                "--appendfsync", "always",
                "--dir", str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        await client.ping()
                        return
                    except (redis.ConnectionError, redis.BusyLoadingError):
                        await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    def kill(self) -> None:
        """Stop the server at once (SIGKILL), as a crash would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class SentinelServer:
    """``redis-server --sentinel`` watching one master, on a free port in a temp dir."""

    def __init__(self, directory: Path, master: RedisServer, service: str = "mymaster") -> None:
        self.port = free_port()
        self.service = service
        self.config = directory / "sentinel.conf"
        self.config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {service} 127.0.0.1 {master.port} 1\n"
            f"sentinel down-after-milliseconds {service} 5000\n"
        )
        self.executable = master.executable
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.service}"

    async def start(self) -> None:
        """Start the sentinel and wait (with a watchdog) until it knows the master."""
        self.process = subprocess.Popen(
            [self.executable, str(self.config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        if await client.execute_command("SENTINEL", "get-master-addr-by-name", self.service):
                            return
                    except redis.ConnectionError:
                        pass
                    await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    def kill(self) -> None:
        """Stop the sentinel."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None
