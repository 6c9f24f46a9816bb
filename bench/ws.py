"""Web-socket throughput and memory: the gateway against a bare aiohttp echo server.

Prints, side by side in one run:
- round trips per second of a bare aiohttp web-socket echo server, and full turns per second
  through the gateway (ScriptedModel: user message -> one read tool -> text reply), each with 1
  and with 100 concurrent clients: a plain client (one event per frame) and a batch client
  (``hello {batch: true}``, as the widget), with the frames each got per turn;
- RSS per idle socket with 1,000 and 5,000 idle sockets, gateway (after ``hello``) vs bare server;
- time from ``agora-gateway serve`` to the first healthy answer;
each on the asyncio loop and, when installed, on uvloop.

Servers and clients run in separate processes (this script re-invokes itself).

    python bench/ws.py [--seconds 5] [--rounds 1] [--idle 1000 5000] [--loops asyncio uvloop]

(``--idle`` with no number skips the idle-socket rows; with ``--rounds N`` each rate is the best of
N runs and each CPU figure the least: the machine is shared.)

Measured on this machine for the bare server (asyncio loop): about 5k round trips/s with one
client, 24k-30k with 100, 14.5 KB RSS per idle socket. Targets: full turns/s at least 10% of echo
round trips/s at 100 clients and 25% with one client; RSS per idle socket at most 1.5x the bare
server's; healthy within 2 s of start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SECRET = "bench-secret-bench-secret-bench"


# -- servers (child processes) ---------------------------------------------------------------------


def _use_loop(name: str) -> None:
    if name == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def serve_echo(port: int, loop: str) -> None:
    from aiohttp import WSMsgType, web

    async def echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type is WSMsgType.TEXT:
                await ws.send_str(message.data)
        return ws

    app = web.Application()
    app.router.add_get("/ws", echo)
    _use_loop(loop)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


def serve_gateway(port: int, loop: str) -> None:
    import logging

    from aiohttp import web
    from pydantic import BaseModel

    from gateway import Runtime, Settings, create_app
    from gateway.cli import tune_gc
    from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
    from tools import ToolPresentation, define_tool

    logging.basicConfig(level=logging.WARNING)

    class CityInput(BaseModel):
        city: str

    @define_tool(
        name="get_weather",
        description="Weather.",
        input=CityInput,
        presentation=ToolPresentation(running="Checking {city}", done="Checked {city}"),
    )
    async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
        return {"city": input.city, "temp": 21}

    tool_step = ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})])
    text_step = ScriptStep(text="It is 21 °C in Lisbon.")
    model = ScriptedModel(lambda request, index: tool_step if request.step == 0 else text_step)
    settings = Settings(
        secret=SECRET, port=port, turn_rate_per_minute=10_000_000, turn_burst=10_000_000, store_url="memory://"
    )
    runtime = Runtime(tools=[get_weather], model=model)
    app = create_app(settings, runtime=runtime)
    _use_loop(loop)
    tune_gc()  # as `agora-gateway serve` does
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=4096)


# -- clients (child processes) ---------------------------------------------------------------------


async def client_echo(port: int, clients: int, seconds: float) -> dict[str, Any]:
    import aiohttp

    count = 0
    async with aiohttp.ClientSession() as session:
        sockets = [await session.ws_connect(f"http://127.0.0.1:{port}/ws") for _ in range(clients)]
        deadline = time.perf_counter() + seconds

        async def worker(ws: Any) -> None:
            nonlocal count
            while time.perf_counter() < deadline:
                await ws.send_str('{"type":"send","text":"Weather in Lisbon?"}')
                await ws.receive()
                count += 1

        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for ws in sockets:
                group.create_task(worker(ws))
        elapsed = time.perf_counter() - started
        for ws in sockets:
            await ws.close()
    return {"rate": count / elapsed, "elapsed": elapsed}


async def _gateway_socket(session: Any, port: int, token: str, *, batch: bool = False) -> Any:
    ws = await session.ws_connect(f"http://127.0.0.1:{port}/agent/ws")
    await ws.send_str(json.dumps({"type": "hello", "token": token, **({"batch": True} if batch else {})}))
    while True:
        frame = json.loads((await ws.receive()).data)
        if frame["type"] == "welcome":
            return ws


async def client_gateway(port: int, clients: int, seconds: float, batch: bool = False) -> dict[str, Any]:
    import aiohttp

    from gateway import sign_actor_token
    from tools import Actor

    count = frames = 0
    async with aiohttp.ClientSession() as session:
        sockets = [
            await _gateway_socket(session, port, sign_actor_token(Actor(id=f"bench-{i}"), SECRET, 3600), batch=batch)
            for i in range(clients)
        ]
        deadline = time.perf_counter() + seconds

        async def worker(ws: Any) -> None:
            nonlocal count, frames
            while time.perf_counter() < deadline:
                await ws.send_str('{"type":"send","text":"Weather in Lisbon?"}')
                finished = False
                while not finished:
                    frame = json.loads((await ws.receive()).data)
                    frames += 1
                    for event in frame["events"] if frame["type"] == "batch" else [frame]:
                        if event["type"] == "error":
                            raise RuntimeError(event)
                        finished = finished or event["type"] == "run-finished"
                count += 1

        started = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for ws in sockets:
                group.create_task(worker(ws))
        elapsed = time.perf_counter() - started
        for ws in sockets:
            await ws.close()
    return {"rate": count / elapsed, "elapsed": elapsed, "frames": frames / max(count, 1)}


async def client_idle(port: int, count: int, kind: str, hold_file: str) -> None:
    """Open ``count`` idle sockets, write 'ready' to ``hold_file``, keep them open until killed."""
    import aiohttp

    from gateway import sign_actor_token
    from tools import Actor

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        sockets = []
        for i in range(count):
            if kind == "echo":
                sockets.append(await session.ws_connect(f"http://127.0.0.1:{port}/ws", autoping=True))
            else:
                token = sign_actor_token(Actor(id=f"idle-{i}"), SECRET, 3600)
                sockets.append(await _gateway_socket(session, port, token))
        Path(hold_file).write_text("ready")
        await asyncio.Event().wait()


# -- orchestration ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)  # noqa: TID251 - the orchestrator is synchronous on purpose
    raise RuntimeError(f"server on {port} did not start")


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], cwd=ROOT)


def run_child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def with_server(kind: str, loop: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = spawn(f"serve-{kind}", str(port), loop)
    wait_port(port)
    return server, port


def measure_rates(kind: str, loop: str, seconds: float, clients: int, client: str = "") -> dict[str, Any]:
    """``client``: ``client-echo``, ``client-gateway`` (the default for the server) or ``client-batch``."""
    server, port = with_server(kind, loop)
    client = client or f"client-{kind}"
    try:
        run_child(client, str(port), "1", "0.5")  # warm up
        before = cpu_seconds(server.pid)
        figures = run_child(client, str(port), str(clients), str(seconds))
        # The server's CPU time per turn (or round trip): steadier than rates on a shared machine.
        figures["cpu_us"] = (cpu_seconds(server.pid) - before) * 1e6 / max(1.0, figures["rate"] * figures["elapsed"])
        return figures
    finally:
        server.terminate()
        server.wait()


def measure_idle(kind: str, loop: str, count: int) -> float:
    server, port = with_server(kind, loop)
    hold = Path(f"/tmp/agora-bench-idle-{os.getpid()}-{kind}-{count}")
    hold.unlink(missing_ok=True)
    holder = None
    try:
        # One socket first so lazily-built state (imports, caches) is not counted per socket.
        warm = spawn("client-idle", str(port), "1", kind, str(hold) + ".warm")
        while not Path(str(hold) + ".warm").exists():
            time.sleep(0.05)  # noqa: TID251
        time.sleep(0.5)  # noqa: TID251
        before = rss_kb(server.pid)
        holder = spawn("client-idle", str(port), str(count), kind, str(hold))
        deadline = time.monotonic() + 180
        while not hold.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("idle sockets did not open")
            time.sleep(0.1)  # noqa: TID251
        time.sleep(1.0)  # noqa: TID251 - let the server settle
        after = rss_kb(server.pid)
        warm.terminate()
        return (after - before) / count
    finally:
        for process in (holder, server):
            if process is not None:
                process.terminate()
                process.wait()
        for path in (hold, Path(str(hold) + ".warm")):
            path.unlink(missing_ok=True)


def measure_startup(loop: str) -> float:
    import urllib.request

    port = free_port()
    env = {**os.environ, "AGORA_PORT": str(port), "AGORA_SECRET": SECRET, "AGORA_STORE_URL": "memory://"}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gateway", "serve"], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.01)  # noqa: TID251
            if time.perf_counter() - started > 30:
                raise RuntimeError("gateway did not become healthy")
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        command, *rest = sys.argv[1:]
        if command == "serve-echo":
            serve_echo(int(rest[0]), rest[1])
        elif command == "serve-gateway":
            serve_gateway(int(rest[0]), rest[1])
        elif command == "client-echo":
            print(json.dumps(asyncio.run(client_echo(int(rest[0]), int(rest[1]), float(rest[2])))))
        elif command in ("client-gateway", "client-batch"):
            batched = command == "client-batch"
            print(json.dumps(asyncio.run(client_gateway(int(rest[0]), int(rest[1]), float(rest[2]), batched))))
        elif command == "client-idle":
            asyncio.run(client_idle(int(rest[0]), int(rest[1]), rest[2], rest[3]))
        return

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--loops", nargs="*", default=["asyncio", "uvloop"])
    args = parser.parse_args()
    loops = []
    for loop in args.loops:
        if loop == "uvloop":
            try:
                import uvloop  # noqa: F401
            except ImportError:
                print("uvloop is not installed (pip install 'agora-gateway[uvloop]'); skipping it")
                continue
        loops.append(loop)

    for loop in loops:
        print(f"\n== event loop: {loop}")
        print(
            f"{'clients':>8} {'echo rt/s':>10} {'plain turns/s':>14} {'ratio':>6} {'frames':>7}"
            f" {'batch turns/s':>14} {'ratio':>6} {'frames':>7} {'target':>7}"
            f" {'server CPU µs: echo':>20} {'plain':>6} {'batch':>6}"
        )
        for clients, target in ((1, 0.25), (args.clients, 0.10)):
            runs: dict[str, list[dict[str, Any]]] = {"echo": [], "plain": [], "batch": []}
            for _ in range(args.rounds):  # interleaved, so a busy spell of the machine hits all three
                runs["echo"].append(measure_rates("echo", loop, args.seconds, clients))
                runs["plain"].append(measure_rates("gateway", loop, args.seconds, clients))
                runs["batch"].append(measure_rates("gateway", loop, args.seconds, clients, "client-batch"))
            echo, plain, batch = (
                {
                    "rate": max(r["rate"] for r in rounds),
                    "cpu_us": min(r["cpu_us"] for r in rounds),
                    "frames": rounds[0].get("frames", 1.0),
                }
                for rounds in runs.values()
            )
            print(
                f"{clients:>8} {echo['rate']:>10,.0f} {plain['rate']:>14,.0f} {plain['rate'] / echo['rate']:>6.1%}"
                f" {plain['frames']:>7.1f} {batch['rate']:>14,.0f} {batch['rate'] / echo['rate']:>6.1%}"
                f" {batch['frames']:>7.1f} {target:>7.0%}"
                f" {echo['cpu_us']:>20,.0f} {plain['cpu_us']:>6,.0f} {batch['cpu_us']:>6,.0f}"
            )
        print("(frames: frames each client got per turn; server CPU: the server process's per turn or round trip)")
        print(f"{'idle':>8} {'echo KB/socket':>15} {'gateway KB/socket':>18} {'ratio':>7} {'target':>7}")
        for count in args.idle:
            echo_kb = measure_idle("echo", loop, count)
            gateway_kb = measure_idle("gateway", loop, count)
            print(f"{count:>8} {echo_kb:>15.1f} {gateway_kb:>18.1f} {gateway_kb / echo_kb:>7.2f}x {'1.5x':>7}")
    startup = measure_startup("uvloop" if "uvloop" in loops else "asyncio")
    print(f"\n`python -m gateway serve` to first healthy answer: {startup:.2f} s (target 2 s)")


if __name__ == "__main__":
    main()
