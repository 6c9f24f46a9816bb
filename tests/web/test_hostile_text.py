"""Text a person may send that a store cannot keep as it is: a turn all the same, on every store.

Found by trying the SQL stores as an attacker (issue 14): PostgreSQL's ``text`` cannot hold a NUL
character, and the start of a thread's first message is kept as text (its title).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gateway import Runtime
from gateway.models import ScriptedModel, ScriptStep, UserMessage
from gateway.stores import Store

from .conftest import ALICE, connect, token_for


def _echo(request: Any, index: int) -> ScriptStep:
    return ScriptStep(text=f"You said {request.last_user_text!r}")


async def test_a_message_with_a_nul_character_is_a_turn_on_every_store(
    make_client: Any, each_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(Runtime(tools=[], model=ScriptedModel(_echo), store=each_store))
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello())["thread_id"]
    with caplog.at_level(logging.INFO):
        frames = await ws.turn("before\u0000after")
    assert frames[-1]["type"] == "run-finished" and frames[-1]["status"] == "completed", frames[-1]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    # Kept as a lone surrogate is: the replacement character in its place, on every store alike.
    assert (await each_store.get_messages(thread_id))[0] == UserMessage(content="before\ufffdafter")
    listed = await client.get("/agent/threads", headers={"Authorization": f"Bearer {token_for(ALICE)}"})
    assert [line["title"] for line in (await listed.json())["threads"]] == ["before\ufffdafter"]
    assert (await ws.turn("and again"))[-1]["status"] == "completed"  # the socket and the thread go on
