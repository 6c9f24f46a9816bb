"""What a thread id may hold where a turn enters the runtime."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway import Runtime, Turn
from gateway.models import ScriptedModel, ScriptStep
from tools import Actor

ACTOR = Actor(id="u1", roles=["member"], tenant_ref="acme")


@pytest.mark.parametrize(
    "thread_id",
    ["t\x1f1", "t\x1e", "t\x00", "t\n1", "t\r", "t\x7f", "t\x85", "t\x9f", "t\ud800", "\udfff", "t" * 201, ""],
)
def test_turns_refuse_thread_ids_with_control_characters_invalid_unicode_or_length(thread_id: str) -> None:
    with pytest.raises(ValidationError):
        Turn(thread_id=thread_id, actor=ACTOR, text="hi")


@pytest.mark.parametrize("thread_id", ["t1", "a:b.c_d-e", "José Ñandú", "{a}", "}x", "t" * 200])
async def test_other_thread_ids_still_carry_turns(thread_id: str) -> None:
    runtime = Runtime(model=ScriptedModel([ScriptStep(text="Hi.")]))
    try:
        run_id = await runtime.start_turn(Turn(thread_id=thread_id, actor=ACTOR, text="hi"))
        assert await runtime.wait(run_id) == "completed"
        assert (await runtime.check_thread_access(thread_id, ACTOR)).thread_id == thread_id
    finally:
        await runtime.aclose()
