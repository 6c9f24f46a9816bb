"""The examples work as written: the tool module, and the two processes on the ports given."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio as redis

from gateway import Runtime, Turn
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from tools import Actor, discover_tools

from .conftest import drop_prefix

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


async def test_the_example_tool_module_is_discovered_and_runs() -> None:
    tools = discover_tools(EXAMPLES / "shop_tools.py")
    assert sorted(t.name for t in tools) == ["discontinue_product", "reorder", "stock_level"]
    kinds = {t.name: t.kind for t in tools}
    assert kinds == {"stock_level": "read", "reorder": "action", "discontinue_product": "read"}

    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="stock_level", args={"sku": "espresso-beans"})]),
            ScriptStep(tool_calls=[ToolCallRequest(name="reorder", args={"sku": "espresso-beans", "units": 10})]),
            ScriptStep(text="Ordered."),
        ]
    )
    runtime = Runtime(tools=tools, model=model)
    actor = Actor(id="shopkeeper", roles=["member"])
    try:
        run_id = await runtime.start_turn(Turn(thread_id="ex-1", actor=actor, text="restock beans"))
        assert await runtime.wait(run_id, timeout=5) == "awaiting-approval"
        events: list[Any] = [e async for e in runtime.events("ex-1")]
        card = next(e for e in events if e.type == "ui")
        assert card.props["items"][0] == {"label": "espresso-beans", "value": 42, "unit": "units"}
        request = next(e for e in events if e.type == "approval-requested")
        assert request.confirmation.title == "Order 10 x espresso-beans?"
        await runtime.decide(request.tool_call_id, actor)
        assert await runtime.wait(run_id, timeout=5) == "completed"
    finally:
        await runtime.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def next_frame(ws: aiohttp.ClientWebSocketResponse, wanted: str, **fields: Any) -> dict[str, Any]:
    """The next frame of type ``wanted`` (with ``fields``), skipping the others; 30 s at most."""
    async with asyncio.timeout(30):
        while True:
            frame: dict[str, Any] = await ws.receive_json()
            if frame["type"] == wanted and all(frame.get(k) == v for k, v in fields.items()):
                return frame


async def test_two_processes_take_their_ports_and_share_one_redis(redis_url: str, tmp_path: Path) -> None:
    first, second = free_port(), free_port()
    prefix = f"test-{uuid.uuid4().hex[:12]}"  # the keys both processes write: this test's own
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "GATEWAY_BIN": str(Path(sys.executable).with_name("agora-gateway")),
        "AGORA_STORE_URL": f"{redis_url}{'&' if '?' in redis_url else '?'}prefix={prefix}",
        "AGORA_SECRET": "a-secret-both-processes-share",
    }
    script = subprocess.Popen(
        [str(EXAMPLES / "two_processes.sh"), str(first), str(second)],
        cwd=tmp_path,  # no .env of the checkout
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert script.stdout is not None
        lines: list[str] = []  # each process says where it listens, then its tools per agent
        while len(lines) < 2:
            line = await asyncio.wait_for(asyncio.to_thread(script.stdout.readline), 30)
            assert line, "the script ended before both gateways listened"
            if line.startswith("agora-gateway listening on "):
                lines.append(line)
        listening = sorted(int(re.search(r"127\.0\.0\.1:(\d+)/", line).group(1)) for line in lines)  # type: ignore[union-attr]
        assert listening == sorted([first, second]) and all("store: redis" in line for line in lines), lines

        # A refund asked on the first process, approved through the second's API, completes, and
        # the socket on the first sees it all: the run, its approval and the events are in Redis.
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            async with http.ws_connect(f"http://127.0.0.1:{first}/agent/ws") as ws:
                await ws.send_json({"type": "hello"})
                thread_id = (await next_frame(ws, "welcome"))["thread_id"]
                await ws.send_json({"type": "send", "text": "refund order 1042"})
                asked = await next_frame(ws, "approval-requested")
                await next_frame(ws, "run-finished", status="awaiting-approval")
                approve = {"tool_call_id": asked["tool_call_id"]}
                async with http.post(f"http://127.0.0.1:{second}/agent/tool-call/approve", json=approve) as answer:
                    assert answer.status == 200, await answer.text()
                settled = await next_frame(ws, "approval-settled")
                assert settled["status"] == "approved"
                done = await next_frame(ws, "tool-completed", tool="refund_order")
                assert "1042" in done["done"]
                await next_frame(ws, "run-finished", status="completed")
        client = redis.Redis.from_url(redis_url)  # both processes wrote under the test's own prefix
        try:
            assert await client.hget(f"{prefix}:{{{thread_id}}}:thread", "seq") is not None
        finally:
            await client.aclose()
    finally:
        if script.poll() is None:
            script.terminate()  # the script stops both gateways on its way out
        await asyncio.to_thread(script.wait, 30)
        if script.stdout is not None:
            script.stdout.close()
        await drop_prefix(redis_url, prefix)
    for port in (first, second):
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            pass


def test_sign_token_signs_what_the_gateway_accepts_and_refuses_bad_input_in_one_line() -> None:
    from gateway import verify_actor_token

    secret = "a-secret-shared-with-the-gateway"

    def sign(*args: str, secret: str | None = secret) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **({"AGORA_SECRET": secret} if secret else {})}
        command = [sys.executable, str(EXAMPLES / "sign_token.py"), *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)

    signed = sign("user-7", "member,admin", "acme", "--ttl", "60")
    assert signed.returncode == 0, signed.stderr
    actor = verify_actor_token(signed.stdout.strip(), secret.encode())
    assert (actor.id, list(actor.roles), actor.tenant_ref) == ("user-7", ["member", "admin"], "acme")
    for refused, said in [
        (sign(secret=None), "set AGORA_SECRET"),
        (sign("anon:someone"), "anonymous visitors"),
        (sign("a\x01b"), "control characters"),
        (sign("--ttl", "0"), "--ttl must be a positive number"),
    ]:
        assert refused.returncode == 2 and refused.stdout == "" and said in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
