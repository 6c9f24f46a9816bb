"""``ScriptedModel``: the requests it records, and the option not to."""

from __future__ import annotations

from gateway.events import Usage
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, TextChunk


def request(step: int) -> ModelRequest:
    return ModelRequest(agent="a", instructions="", messages=[], step=step)


async def chunks(model: ScriptedModel, step: int) -> list[object]:
    return [chunk async for chunk in model.stream(request(step))]


async def test_a_scripted_model_records_every_request_by_default() -> None:
    model = ScriptedModel([ScriptStep(text="one"), ScriptStep(text="two")])
    assert await chunks(model, 0) == [TextChunk("one"), Usage(model_calls=1)]
    await chunks(model, 1)
    assert [r.step for r in model.requests] == [0, 1] and model.calls == 2


async def test_keep_requests_false_answers_the_same_and_records_none() -> None:
    kept, unkept = (
        ScriptedModel(lambda r, i: ScriptStep(text=f"step {i}")),
        ScriptedModel(lambda r, i: ScriptStep(text=f"step {i}"), keep_requests=False),
    )
    for step in range(3):
        assert (
            await chunks(unkept, step) == await chunks(kept, step) == [TextChunk(f"step {step}"), Usage(model_calls=1)]
        )
    assert unkept.requests == [] and unkept.calls == 3
    assert len(kept.requests) == 3
