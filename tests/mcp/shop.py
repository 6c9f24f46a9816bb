"""Tools for the two-process tests: a read, an action that counts its runs, in one process's memory."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from gateway import Agent, Runtime
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import Store
from tools import Confirmation, PreflightReady, Tool, ToolContext, ToolPresentation, define_tool


class GiftInput(BaseModel):
    to: str = Field(min_length=1, max_length=40)


class StockInput(BaseModel):
    item: str = Field(min_length=1, max_length=40)


@dataclass
class Shop:
    """What the tools did (shared by both processes of a test: one Python process)."""

    gifts: list[str] = field(default_factory=list)

    def tools(self) -> list[Tool]:
        @define_tool(
            name="stock",
            description="How many of an item are in stock.",
            input=StockInput,
            presentation=ToolPresentation(label="Stock", running="Counting {item}", done="Counted {item}"),
        )
        async def stock(input: StockInput, ctx: ToolContext) -> dict[str, object]:
            return {"item": input.item, "count": 7}

        def preflight(input: GiftInput, ctx: ToolContext, phase: str) -> PreflightReady:
            if phase == "prepare":
                return PreflightReady(
                    confirmation=Confirmation(title=f"Send a gift to {input.to}?", verb="Send", detail="One mug")
                )
            return PreflightReady()

        @define_tool(
            name="send_gift",
            description="Send a gift.",
            input=GiftInput,
            kind="action",
            preflight=preflight,
            presentation=ToolPresentation(label="Gift", running="Sending a gift to {to}", done="Sent a gift to {to}"),
        )
        async def send_gift(input: GiftInput, ctx: ToolContext) -> dict[str, object]:
            self.gifts.append(input.to)
            return {"to": input.to, "sent": True}

        return [stock, send_gift]

    def runtime(self, store: Store, name: str) -> Runtime:
        """A process's runtime over the shared ``store`` (the model is never asked: MCP calls take no step)."""
        return Runtime(
            tools=self.tools(),
            agents=[Agent(name="shop"), Agent(name="staff", roles=["staff"])],
            model=ScriptedModel([ScriptStep(text="unused")]),
            store=store,
            instance_id=name,
        )
