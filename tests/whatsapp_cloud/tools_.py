"""A scripted runtime with a refund action (it asks for approval) and a receipt component."""

from __future__ import annotations

from pydantic import BaseModel

from gateway import Agent, Runtime
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Store
from tools import ConfirmTemplate, ToolContext, ToolPresentation, define_tool


class RefundInput(BaseModel):
    order_id: str


def refund_tool(refunded: list[str], *, receipt: bool = False):  # type: ignore[no-untyped-def]
    @define_tool(
        name="refund_order",
        description="Refund an order.",
        input=RefundInput,
        kind="action",
        presentation=ToolPresentation(
            running="Refunding order {order_id}",
            done="Refunded order {order_id}",
            confirm=ConfirmTemplate(title="Refund order {order_id}?", verb="Refund"),
        ),
    )
    async def refund_order(input: RefundInput, ctx: ToolContext) -> dict[str, str]:
        refunded.append(input.order_id)
        if receipt:
            ctx.emit_ui("Callout", {"tone": "success", "title": "Refunded", "text": f"Order {input.order_id}"})
        return {"order_id": input.order_id}

    return refund_order


def refund_runtime(refunded: list[str], *, receipt: bool = False, store: Store | None = None) -> Runtime:
    model = ScriptedModel(
        [
            ScriptStep(tool_calls=[ToolCallRequest(name="refund_order", args={"order_id": "1042"})]),
            ScriptStep(text="Done: order **1042** is refunded."),
        ]
    )
    tool = refund_tool(refunded, receipt=receipt)
    if store is None:
        return Runtime(tools=[tool], agents=[Agent(name="assistant")], model=model)
    return Runtime(tools=[tool], agents=[Agent(name="assistant")], model=model, store=store)


def text_runtime(*texts: str) -> Runtime:
    return Runtime(tools=[], agents=[Agent(name="assistant")], model=ScriptedModel([ScriptStep(text=t) for t in texts]))
