"""Slow and greedy clients against ``agora-gateway serve``: raw sockets on loopback.

The hostile clients connect from 127.0.0.2 (any 127/8 address reaches a loopback listener), the
well-behaved one from 127.0.0.1, so the per-address limit that stops the first never touches the
second.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

import aiohttp
import pytest

from .test_serve import serving

READ_TIMEOUT = 1.0
SLACK = 1.0
"""How much later than ``READ_TIMEOUT`` a slow client may be cut (a busy 2-core machine)."""
HOSTILE = "127.0.0.2"
WATCHDOG = 15.0
"""Far beyond the read timeout, far below aiohttp's old 75 s keep-alive hold."""


@dataclass
class Held:
    """How one raw connection ended."""

    seconds: float | None
    """From connecting until the server closed it; None when it was still open at the watchdog."""
    answer: bytes = b""

    @property
    def status(self) -> int | None:
        if not self.answer.startswith(b"HTTP/1."):
            return None
        return int(self.answer.split(b" ", 2)[1])


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, float]:
    """A raw connection from ``HOSTILE`` (the kernel completed the handshake: the server accepts in order)."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(HOSTILE, 0))
    return reader, writer, started


async def hold(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter, float],
    opening: bytes = b"",
    drip: bytes = b"",
    *,
    every: float = 0.2,
) -> Held:
    """Send ``opening``, then ``drip`` every ``every`` s, until the server closes the connection."""
    reader, writer, started = connection
    writer.write(opening)

    async def dripping() -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while drip:
                await asyncio.sleep(every)  # the client's pace: this is the behaviour under test
                writer.write(drip)
                await writer.drain()

    dripper = asyncio.create_task(dripping())
    answer = b""
    seconds: float | None = None
    try:
        async with asyncio.timeout(WATCHDOG):
            with contextlib.suppress(ConnectionError):
                while chunk := await reader.read(65536):
                    answer += chunk
        seconds = time.monotonic() - started
    except TimeoutError:
        pass
    finally:
        dripper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await dripper
        writer.close()
    return Held(seconds, answer)


@dataclass
class Prober:
    """A well-behaved client asking ``/healthz`` on a fresh connection, over and over."""

    port: int
    latencies: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        connector = aiohttp.TCPConnector(force_close=True, local_addr=("127.0.0.1", 0))
        async with aiohttp.ClientSession(connector=connector) as session:
            while not stop.is_set():
                started = time.monotonic()
                async with session.get(f"http://127.0.0.1:{self.port}/healthz", timeout=aiohttp.ClientTimeout(5)) as r:
                    await r.read()
                self.latencies.append(time.monotonic() - started)
                self.statuses.append(r.status)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.05)


def post(path: str, port: int, length: int, kind: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {kind}\r\nContent-Length: {length}\r\n\r\n{{"
    ).encode()


LIMIT = 8
ENV = {"AGORA_READ_TIMEOUT": str(READ_TIMEOUT), "AGORA_MAX_CONNECTIONS_PER_ADDRESS": str(LIMIT)}


async def test_slow_and_greedy_clients_are_cut_while_healthz_answers(capsys: pytest.CaptureFixture[str]) -> None:
    async with serving(env=ENV) as (_, port, _line):
        prober = Prober(port)
        stop = asyncio.Event()
        probing = asyncio.create_task(prober.run(stop))
        trickle = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
        plans: list[tuple[bytes, bytes]] = [
            *((trickle, b"X-Slow: 1\r\n") for _ in range(3)),  # slowloris: a header line at a time
            (post("/agent/tool-call/approve", port, 400), b" "),  # slow bodies, a byte at a time
            (post("/agent/ag-ui", port, 400), b" "),
            (post("/a2a", port, 400), b" "),
            (b"", b""),  # connected, saying nothing
            (b"", b""),
        ]
        assert len(plans) == LIMIT
        connections = [await connect(port) for _ in plans]
        tasks = [
            asyncio.create_task(hold(c, opening, drip)) for c, (opening, drip) in zip(connections, plans, strict=True)
        ]
        extra = [await hold(await connect(port)) for _ in range(2)]  # over the limit: refused at once
        held = [await t for t in tasks]
        stop.set()
        await probing

    figures = {
        "slow held s": [None if h.seconds is None else round(h.seconds, 2) for h in held],
        "refused after s": [None if h.seconds is None else round(h.seconds, 3) for h in extra],
        "healthz max s": round(max(prober.latencies), 3),
        "healthz p50 s": round(sorted(prober.latencies)[len(prober.latencies) // 2], 3),
        "healthz answers": len(prober.latencies),
    }
    with capsys.disabled():
        print("\nslow-client figures:", json.dumps(figures))
    for h in held:
        assert h.seconds is not None, "a slow client was still held at the watchdog"
        assert h.seconds < READ_TIMEOUT + SLACK, figures
        assert h.status != 429, h.answer  # these were within the limit: accepted, then cut
    assert [h.status for h in held[3:5]] == [408, 408], [h.answer[:200] for h in held[3:5]]
    for h in extra:
        assert h.status == 429 and h.seconds is not None and h.seconds < 0.5, (h, figures)
        assert json.loads(h.answer.split(b"\r\n\r\n", 1)[1])["code"] == "too_many_connections"
    assert set(prober.statuses) == {200} and len(prober.latencies) >= 5
    assert max(prober.latencies) < 1.0, figures


async def test_web_sockets_count_as_connections_and_free_their_place_on_close() -> None:
    env = {**ENV, "AGORA_MAX_CONNECTIONS_PER_ADDRESS": "3"}
    async with serving(env=env) as (_, port, _line):
        url = f"http://127.0.0.1:{port}/agent/ws"
        connector = aiohttp.TCPConnector(local_addr=(HOSTILE, 0))
        async with aiohttp.ClientSession(connector=connector) as session:
            sockets = []
            for _ in range(3):
                ws = await session.ws_connect(url)
                await ws.send_json({"type": "hello"})
                assert (await ws.receive_json(timeout=5))["type"] == "welcome"
                sockets.append(ws)
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await session.ws_connect(url)
            assert refused.value.status == 429
            async with aiohttp.ClientSession() as other:  # another address is not affected
                async with other.get(f"http://127.0.0.1:{port}/healthz") as answer:
                    assert answer.status == 200
            await sockets.pop().close()
            async with asyncio.timeout(5):  # the server frees the place when it sees the close
                while True:
                    try:
                        sockets.append(await session.ws_connect(url))
                        break
                    except aiohttp.WSServerHandshakeError as exc:
                        assert exc.status == 429
                        await asyncio.sleep(0.05)  # a bounded poll of the server's view
            await sockets[-1].send_json({"type": "hello"})
            assert (await sockets[-1].receive_json(timeout=5))["type"] == "welcome"
            for ws in sockets:
                await ws.close()
