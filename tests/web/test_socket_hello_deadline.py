"""A socket that sends no hello in time is told so and closed; one that said hello is not."""

from __future__ import annotations

import time
from typing import Any

import pytest

from channels.web import _socket
from gateway import Runtime
from gateway.models import ScriptedModel, ScriptStep

from .conftest import ALICE, connect, token_for


def _runtime() -> Runtime:
    return Runtime(model=ScriptedModel(lambda request, index: ScriptStep(text="Hello.")))


async def test_no_hello_in_time_is_refused_and_closed(make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_socket, "HELLO_TIMEOUT", 0.2)
    client = await make_client(_runtime())
    socket = await connect(client, token=token_for(ALICE))
    frame = await socket.recv(timeout=5)
    assert (frame["type"], frame["code"]) == ("error", "hello_required")
    closed = await socket.closed()
    assert closed.data == _socket.CLOSE_BAD_HELLO


async def test_a_frame_before_the_hello_does_not_stop_its_deadline(
    make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_socket, "HELLO_TIMEOUT", 0.5)
    client = await make_client(_runtime())
    socket = await connect(client, token=token_for(ALICE))
    await socket.send({"type": "send", "text": "hi"})
    assert (await socket.recv())["code"] == "hello_required"
    frame = await socket.recv(timeout=5)
    assert (frame["type"], frame["code"]) == ("error", "hello_required")
    assert (await socket.closed()).data == _socket.CLOSE_BAD_HELLO


async def test_a_welcomed_socket_outlives_the_hello_deadline(make_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_socket, "HELLO_TIMEOUT", 0.3)
    client = await make_client(_runtime(), turn_burst=100_000, turn_rate_per_minute=10_000_000)
    socket = await connect(client, token=token_for(ALICE))
    started = time.monotonic()
    await socket.hello()
    # Turns, one after another, until well past the deadline: the socket was never closed.
    # As many as fit (a fast machine does a thousand before the deadline): time, not a count.
    turns = 0
    while time.monotonic() - started <= 0.6:
        frames = await socket.turn("hi")
        assert frames[-1]["type"] == "run-finished"
        assert not any(f.get("code") == "hello_required" for f in frames)
        turns += 1
    assert turns > 0
    assert not socket.ws.closed
