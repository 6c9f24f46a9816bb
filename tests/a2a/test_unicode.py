r"""Lone surrogates (``"\ud83d"`` in the JSON, stray bytes in headers): answers and storage stay UTF-8."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.models import UserMessage as HistoryUserMessage
from gateway.stores import RedisStore

from .conftest import Gateway, RefusalLog

pytestmark = pytest.mark.redis

# Markers json.dumps leaves alone, swapped for escapes it would never write: half a surrogate pair.
LONE = {"<HI>": "\\ud83d", "<LO>": "\\udc00", "<HI2>": "\\ud800", "<LO2>": "\\udfff"}


def raw_json(value: Any) -> bytes:
    """``value`` as JSON bytes, each marker of ``LONE`` replaced with its lone-surrogate escape."""
    text = json.dumps(value)
    for marker, escape in LONE.items():
        text = text.replace(marker, escape)
    return text.encode("ascii")


def send_body(method: str, *, legacy: bool = False) -> bytes:
    """A send whose text part, data part and metadata hold lone surrogates, as raw JSON bytes."""
    text: dict[str, Any] = {"text": "echo hi <HI> there"}
    data: dict[str, Any] = {"data": {"k<LO>": "v<HI2>", "ok": "\U0001f600"}}
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "metadata": {"note<LO2>": "x"}}
    if legacy:
        text, data = {"kind": "text", **text}, {"kind": "data", **data}
        message.update(kind="message", role="user")
    message["parts"] = [text, data]
    return raw_json({"jsonrpc": "2.0", "id": "u-1", "method": method, "params": {"message": message}})


def echo(request: ModelRequest, index: int) -> ScriptStep:
    said = next(m.content for m in reversed(request.messages) if isinstance(m, HistoryUserMessage))
    return ScriptStep(text="You said: " + said.splitlines()[0])


@pytest.fixture
async def echo_gateway(make_gateway: Any, redis_store: RedisStore) -> Gateway:
    gateway: Gateway = await make_gateway(
        Runtime(agents=[Agent(name="assistant")], model=ScriptedModel(echo), store=redis_store)
    )
    return gateway


async def test_lone_surrogates_in_parts_and_metadata_become_u_fffd(
    echo_gateway: Gateway, refusal_log: RefusalLog
) -> None:
    http = echo_gateway.http()
    headers = {"Content-Type": "application/json"}
    response = await http.post(echo_gateway.rpc_url, content=send_body("SendMessage"), headers=headers)
    assert response.status_code == 200
    answer = json.loads(response.content.decode("utf-8"))  # strict UTF-8
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", answer
    assert task["status"]["message"]["parts"] == [{"text": "You said: echo hi \ufffd there"}]
    sent = task["history"][0]
    assert sent["parts"][0] == {"text": "echo hi \ufffd there"}
    assert sent["parts"][1]["data"] == {"k\ufffd": "v\ufffd", "ok": "\U0001f600"}
    assert sent["metadata"] == {"note\ufffd": "x"}

    # The stored record (Redis) holds the same clean message; the thread's history too.
    record = await echo_gateway.channel.book.get(task["id"])
    assert record is not None
    assert record.messages[0].message["parts"][0]["text"] == "echo hi \ufffd there"
    history = await echo_gateway.runtime.store.get_messages(task["contextId"])
    assert history[0].content is not None and history[0].content.startswith("echo hi \ufffd there\n")
    got = await echo_gateway.rpc("GetTask", {"id": task["id"]})
    assert got["result"]["history"] == task["history"]
    refusal_log.none()  # not a refusal, and nothing failed on the way


async def test_lone_surrogates_in_a_stream_and_in_0_3_calls(echo_gateway: Gateway) -> None:
    http = echo_gateway.http()
    headers = {"Content-Type": "application/json"}
    async with http.stream(
        "POST", echo_gateway.rpc_url, content=send_body("SendStreamingMessage"), headers=headers
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = await response.aread()
    text = raw.decode("utf-8")  # strict
    results = [json.loads(line[6:])["result"] for line in text.splitlines() if line.startswith("data: ")]
    # The run may be over before the stream's first event (then that task is the whole stream).
    last = results[-1]["statusUpdate"] if "statusUpdate" in results[-1] else results[-1]["task"]
    assert last["status"]["state"] == "TASK_STATE_COMPLETED", results
    assert last["status"]["message"]["parts"] == [{"text": "You said: echo hi \ufffd there"}]

    legacy = echo_gateway.http(version=None)
    response = await legacy.post(echo_gateway.rpc_url, content=send_body("message/send", legacy=True), headers=headers)
    task = json.loads(response.content.decode("utf-8"))["result"]
    assert task["status"]["state"] == "completed", task
    assert task["history"][0]["parts"][0] == {"kind": "text", "text": "echo hi \ufffd there"}


async def test_stray_bytes_in_the_version_header_and_the_host_are_answered_in_utf_8(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    # aiohttp reads header bytes that are not UTF-8 as lone surrogates (surrogateescape): the
    # answers that echo them (a version refusal; a card built from the Host) must still encode.
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    http = demo.http(version=None)
    refused = await http.post(demo.rpc_url, json=body, headers={"A2A-Version": b"\xff\xfe1"})
    assert refused.status_code == 200
    error = json.loads(refused.content.decode("utf-8"))["error"]
    assert error["code"] == -32009 and "\ufffd\ufffd1" in error["message"]
    assert "\ufffd\ufffd1" in refusal_log.one(-32009)  # one line, no traceback

    card = await http.get(demo.base_url + "/.well-known/agent-card.json", headers={"Host": b"gateway\xff.test"})
    assert card.status_code == 200
    interfaces = json.loads(card.content.decode("utf-8"))["supportedInterfaces"]
    assert interfaces[0]["url"] == "http://gateway\ufffd.test/a2a"
    refusal_log.none()
