"""Guards tests: the engine's runtime fixture, the web app and the WhatsApp gateway fixtures."""

from __future__ import annotations

from typing import Any

from gateway import GuardContext, GuardVerdict
from tests.engine.conftest import make_runtime
from tests.web.conftest import make_client
from tests.whatsapp.conftest import make_gateway

__all__ = ["Recording", "make_client", "make_gateway", "make_runtime"]


class Recording:
    """A guard that answers ``verdict`` on both sides and records what it was given."""

    def __init__(self, verdict: GuardVerdict | None, *, name: str = "recording") -> None:
        self.verdict = verdict
        self.name = name
        self.seen: list[tuple[str, GuardContext]] = []

    async def check_input(self, text: str, ctx: GuardContext) -> Any:
        self.seen.append((text, ctx))
        return self.verdict

    async def check_output(self, text: str, ctx: GuardContext) -> Any:
        self.seen.append((text, ctx))
        return self.verdict
