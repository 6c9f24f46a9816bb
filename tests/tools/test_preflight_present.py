"""preflight(input, ctx, phase) results and present(output, ctx) components."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

import tools


class RefundInput(BaseModel):
    order_id: str
    amount: int


# -- result types and their dict forms -------------------------------------------------------------


def test_preflight_results_and_their_dict_forms() -> None:
    confirmation = tools.Confirmation(title="Refund 30 on o1?", verb="Refund", detail="Card ending 4242")
    ready = tools.PreflightReady(confirmation=confirmation)
    denied = tools.PreflightDenied(reason="Order already refunded")
    completed = tools.PreflightCompleted(output={"refunded": 0})

    assert tools.PreflightReady().model_dump() == {"status": "ready", "confirmation": None}
    assert ready.model_dump() == {
        "status": "ready",
        "confirmation": {"title": "Refund 30 on o1?", "verb": "Refund", "detail": "Card ending 4242"},
    }
    assert denied.model_dump() == {"status": "denied", "reason": "Order already refunded"}
    assert completed.model_dump() == {"status": "completed", "output": {"refunded": 0}, "done": None}
    worded = tools.PreflightCompleted(output={"refunded": 0}, done="Order o1 was already refunded")
    from_dict = tools.as_preflight_result({"status": "completed", "done": "Order o1 was already refunded"})
    assert isinstance(from_dict, tools.PreflightCompleted) and from_dict.done == worded.done
    for result in (ready, denied, completed, worded):
        assert tools.as_preflight_result(result) is result
        assert tools.as_preflight_result(result.model_dump()) == result


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, tools.PreflightReady()),
        ({"status": "ready"}, tools.PreflightReady()),
        ({"status": "denied", "reason": "no"}, tools.PreflightDenied(reason="no")),
        ({"status": "completed"}, tools.PreflightCompleted(output=None)),
        (
            {"status": "ready", "confirmation": {"title": "Go?"}},
            tools.PreflightReady(confirmation=tools.Confirmation(title="Go?")),
        ),
    ],
)
def test_as_preflight_result_normalizes(value: Any, expected: Any) -> None:
    assert tools.as_preflight_result(value) == expected


@pytest.mark.parametrize(
    "value",
    [{"status": "maybe"}, {"status": "denied"}, {"reason": "no"}, "ready", True, {"status": "ready", "extra": 1}],
)
def test_as_preflight_result_refuses_garbage(value: Any) -> None:
    with pytest.raises(ValidationError):
        tools.as_preflight_result(value)


def test_confirmation_verb_defaults_to_approve() -> None:
    assert tools.Confirmation(title="Go?").verb == tools.DEFAULT_CONFIRM_VERB == "Approve"


# -- preflight in the registry ---------------------------------------------------------------------


class Refunds:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.preflights: list[tuple[RefundInput, str, str]] = []
        self.executed: list[RefundInput] = []

    def tool(self) -> tools.Tool:
        async def preflight(input: RefundInput, ctx: tools.ToolContext, phase: tools.PreflightPhase) -> Any:
            self.preflights.append((input, ctx.actor.id, phase))
            return self.answer

        async def execute(input: RefundInput, ctx: tools.ToolContext) -> dict[str, Any]:
            self.executed.append(input)
            return {"refunded": input.amount}

        return tools.define_tool(
            name="refund", description="Refund.", input=RefundInput, kind="action", preflight=preflight, execute=execute
        )


ARGS = {"order_id": "o1", "amount": 30}


@pytest.mark.parametrize("answer", [None, tools.PreflightReady(), {"status": "ready"}])
async def test_a_ready_preflight_lets_execute_run(answer: Any, ctx: tools.ToolContext) -> None:
    refunds = Refunds(answer)
    assert await tools.ToolRegistry([refunds.tool()]).invoke("refund", ARGS, ctx) == {"refunded": 30}
    assert refunds.preflights == [(RefundInput(**ARGS), "u1", "execute")]
    assert refunds.executed == [RefundInput(**ARGS)]


@pytest.mark.parametrize(
    "answer", [tools.PreflightDenied(reason="Already refunded"), {"status": "denied", "reason": "Already refunded"}]
)
async def test_a_denied_preflight_raises_and_skips_execute(answer: Any, ctx: tools.ToolContext) -> None:
    refunds = Refunds(answer)
    with pytest.raises(tools.ToolDeniedError, match="Already refunded") as caught:
        await tools.ToolRegistry([refunds.tool()]).invoke("refund", ARGS, ctx)
    assert caught.value.reason == "Already refunded"
    assert caught.value.tool == "refund"
    assert refunds.executed == []


@pytest.mark.parametrize(
    "answer",
    [tools.PreflightCompleted(output={"refunded": 0}), {"status": "completed", "output": {"refunded": 0}}],
)
async def test_a_completed_preflight_returns_its_output_without_execute(answer: Any, ctx: tools.ToolContext) -> None:
    refunds = Refunds(answer)
    assert await tools.ToolRegistry([refunds.tool()]).invoke("refund", ARGS, ctx) == {"refunded": 0}
    assert refunds.executed == []


async def test_preflight_runs_after_validation(ctx: tools.ToolContext) -> None:
    refunds = Refunds(None)
    with pytest.raises(tools.ToolInputInvalidError):
        await tools.ToolRegistry([refunds.tool()]).invoke("refund", {"order_id": "o1"}, ctx)
    assert refunds.preflights == []


async def test_prepare_phase_confirmation_feeds_resolve_confirmation(ctx: tools.ToolContext) -> None:
    answer = {"status": "ready", "confirmation": {"title": "Refund 30 to Ana?", "verb": "Refund"}}
    refunds = Refunds(answer)
    tool = refunds.tool()
    verdict = await tools.ToolRegistry.preflight(tool, tool.validate_input(ARGS), ctx, "prepare")
    assert refunds.preflights[0][2] == "prepare"
    assert isinstance(verdict, tools.PreflightReady)
    assert tools.resolve_confirmation(tool.name, ARGS, tool.presentation, verdict) == tools.Confirmation(
        title="Refund 30 to Ana?", verb="Refund"
    )


async def test_a_tool_without_preflight_is_ready(ctx: tools.ToolContext) -> None:
    tool = tools.define_tool(name="t", description="d", kind="action", execute=lambda i, c: None)
    assert await tools.ToolRegistry.preflight(tool, tools.EmptyInput(), ctx, "prepare") == tools.PreflightReady()


async def test_a_class_action_tool_preflight_method(ctx: tools.ToolContext) -> None:
    class Purge(tools.ActionTool):
        description = "Purge."

        def preflight(self, input: Any, c: tools.ToolContext, phase: str) -> tools.PreflightDenied:
            return tools.PreflightDenied(reason=f"frozen during {phase}")

        async def execute(self, input: Any, c: tools.ToolContext) -> None:
            raise AssertionError("must not run")

    with pytest.raises(tools.ToolDeniedError, match="frozen during execute"):
        await tools.ToolRegistry([Purge]).invoke("purge", {}, ctx)


def test_a_read_class_tool_may_not_have_a_preflight() -> None:
    class Peek(tools.ReadTool):
        description = "Peek."

        def preflight(self, input: Any, c: Any, phase: str) -> None: ...

        async def execute(self, input: Any, c: Any) -> None: ...

    with pytest.raises(tools.ToolDefinitionError, match="preflight applies to action tools only"):
        tools.as_tool(Peek)


# -- present ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        (None, []),
        (tools.UiComponent("Chart", {"n": 3}), [tools.UiComponent("Chart", {"n": 3})]),
        (
            [tools.UiComponent("Chart", {"n": 3}), {"component": "Note", "props": {"text": "hi"}, "id": "n1"}],
            [tools.UiComponent("Chart", {"n": 3}), tools.UiComponent("Note", {"text": "hi"}, id="n1")],
        ),
        ((tools.UiComponent("Chart"),), [tools.UiComponent("Chart")]),
        ([], []),
    ],
)
async def test_present_returns_components(
    shown: Any, expected: list[tools.UiComponent], ctx: tools.ToolContext
) -> None:
    calls: list[tuple[Any, tools.ToolContext]] = []

    async def present(output: Any, c: tools.ToolContext) -> Any:
        calls.append((output, c))
        return shown

    tool = tools.define_tool(name="t", description="d", execute=lambda i, c: None, present=present)
    assert await tools.ToolRegistry.present(tool, {"n": 3}, ctx) == expected
    assert calls == [({"n": 3}, ctx)]


async def test_present_as_a_sync_method(ctx: tools.ToolContext) -> None:
    class Weather(tools.ReadTool):
        description = "Weather."

        def present(self, output: dict[str, int], c: tools.ToolContext) -> tools.UiComponent:
            return tools.UiComponent("WeatherCard", {"temp": output["temp"]}, fallback_text=f"{output['temp']} C")

        async def execute(self, input: Any, c: Any) -> dict[str, int]:
            return {"temp": 21}

    registry = tools.ToolRegistry([Weather])
    tool = registry.get("weather")
    assert tool is not None
    output = await registry.invoke("weather", {}, ctx)
    [card] = await registry.present(tool, output, ctx)
    assert (card.component, card.props, card.fallback_text) == ("WeatherCard", {"temp": 21}, "21 C")


async def test_a_tool_without_present_shows_nothing(ctx: tools.ToolContext) -> None:
    tool = tools.define_tool(name="t", description="d", execute=lambda i, c: None)
    assert await tools.ToolRegistry.present(tool, {"n": 1}, ctx) == []


async def test_present_returning_a_bad_component_raises(ctx: tools.ToolContext) -> None:
    tool = tools.define_tool(
        name="t", description="d", execute=lambda i, c: None, present=lambda o, c: {"component": "not valid"}
    )
    with pytest.raises(ValidationError, match="component"):
        await tools.ToolRegistry.present(tool, None, ctx)
