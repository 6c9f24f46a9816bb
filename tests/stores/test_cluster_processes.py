"""Two ``serve`` processes on one Redis Cluster: an approval asked on one is decided on the other, on every node.

Both run ``AGORA_STORE_URL=redis+cluster://...?prefix=<the test's>`` on the session's cluster.
The first is asked for refunds (on its web socket) until it holds a parked thread on each
master; the second approves each one (``POST /agent/tool-call/approve``), and the refund runs
once. The first's open sockets see the decision made on the second (live events cross
processes through the cluster's sharded pub/sub).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from ..cli.test_serve import serving
from ..cli.test_serve_store import frames_until, get_json, headers
from ..conftest import drop_cluster_prefix
from ._cluster import ClusterServers

pytestmark = pytest.mark.redis


async def _until(session: aiohttp.ClientSession, url: str, done: Any, timeout: float = 20) -> dict[str, Any]:
    """GET ``url`` until ``done(answer)`` holds (with a watchdog): the thread's state as the store has it."""
    async with asyncio.timeout(timeout):
        while True:
            answer = await get_json(session, url)
            if done(answer):
                return dict(answer)
            await asyncio.sleep(0.05)


async def test_an_approval_asked_on_one_process_is_decided_on_the_other_for_threads_of_every_node(
    redis_cluster: ClusterServers, tmp_path: Path
) -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    url = f"{redis_cluster.url}?prefix={prefix}"
    masters = await redis_cluster.master_ports()
    parked: dict[int, tuple[str, str]] = {}  # node -> (thread id, tool call id)
    orders: dict[int, str] = {}
    sockets: list[aiohttp.ClientWebSocketResponse] = []
    try:
        async with (
            serving(cwd=tmp_path, store=url) as (_, asker, _line),
            serving(cwd=tmp_path, store=url) as (_, decider, _line2),
            aiohttp.ClientSession(headers=headers()) as session,
        ):
            ask = f"http://127.0.0.1:{asker}"
            for _ in range(40):  # new conversations until one of them lives on each master
                if len(parked) == len(masters):
                    break
                ws = await session.ws_connect(f"{ask}/agent/ws")
                await ws.send_json({"type": "hello"})
                thread_id = (await frames_until(ws, "welcome"))[-1]["thread_id"]
                node = await redis_cluster.port_of(f"{prefix}:{{{thread_id}}}:thread")
                if node in parked:
                    await ws.close()
                    continue
                # A delivered order of its own per thread: the demo refunds an order once per person.
                order = ("1040", "1041", "1042")[len(parked)]
                await ws.send_json({"type": "send", "text": f"refund order {order}"})
                await frames_until(ws, "ack")  # the thread exists once the send is taken
                state = await _until(
                    session, f"{ask}/agent/threads/{thread_id}", lambda answer: bool(answer["pending_approvals"])
                )
                [pending] = state["pending_approvals"]
                parked[node] = (thread_id, pending["tool_call_id"])
                orders[node] = order
                sockets.append(ws)  # open on the asker: it should see the decision made elsewhere
            assert sorted(parked) == masters, "a parked thread on every master"

            decide = f"http://127.0.0.1:{decider}"
            for thread_id, tool_call_id in parked.values():
                state = await get_json(session, f"{decide}/agent/threads/{thread_id}")
                assert [a["tool_call_id"] for a in state["pending_approvals"]] == [tool_call_id]
                async with session.post(
                    f"{decide}/agent/tool-call/approve", json={"tool_call_id": tool_call_id}
                ) as answer:
                    assert answer.status == 200, await answer.text()
                    assert (await answer.json())["status"] == "approved"
                await _until(
                    session,
                    f"{decide}/agent/threads/{thread_id}",
                    lambda answer: (
                        [e["status"] for e in answer["events"] if e["type"] == "run-finished"][-1:] == ["completed"]
                    ),
                )
            for node, (thread_id, _) in parked.items():
                history = await get_json(session, f"{ask}/agent/threads/{thread_id}")
                events = history["events"]
                refunds = [e for e in events if e["type"] == "tool-completed" and e["tool"] == "refund_order"]
                assert [e["done"] for e in refunds] == [f"Refunded order {orders[node]}"], f"ran once (node {node})"
                assert [e["status"] for e in events if e["type"] == "approval-settled"] == ["approved"]
                statuses = [e["status"] for e in events if e["type"] == "run-finished"]
                assert statuses == ["awaiting-approval", "completed"]
                assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
                assert history["pending_approvals"] == []

            # Live: the asker's sockets saw the runs their threads finished on the decider.
            for ws in sockets:
                frames = await frames_until(ws, "approval-settled", timeout=10)
                assert frames[-1]["status"] == "approved"
                finished = [
                    f for f in await frames_until(ws, "run-finished", timeout=10) if f["type"] == "run-finished"
                ]
                assert finished[-1]["status"] == "completed", json.dumps(finished)
    finally:
        for ws in sockets:
            await ws.close()
        await drop_cluster_prefix(await redis_cluster.master_ports(), prefix)
