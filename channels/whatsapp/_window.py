"""WhatsApp's customer-service window: free-form messages only within 24 hours of the person's last one.

Both providers (Twilio and the Cloud API) face the same rule, so it lives once, here. Each
inbound message opens (or extends) the window of its sender's address; outside it only an
approved template may go. The window is kept in the channel's own state, so any process knows.
"""

from __future__ import annotations

import time

from gateway import ChannelState

__all__ = ["WINDOW", "CustomerWindow"]

WINDOW = 24 * 3600.0 - 60
"""A minute short of 24 h: a message sent at the edge may arrive after it."""


class CustomerWindow:
    """When each address last wrote (``{p}:window:{address}``, kept as long as the window)."""

    def __init__(self, state: ChannelState, *, window: float = WINDOW) -> None:
        self.state = state
        self.window = window

    async def opened(self, address: str) -> None:
        """``address`` just wrote: the window is open for another ``window`` seconds."""
        await self.state.set(self.state.key("window", address), time.time(), ttl=self.window)

    async def is_open(self, address: str) -> bool:
        """Whether free-form messages may go to ``address`` now."""
        last = await self.state.get(self.state.key("window", address))
        return isinstance(last, int | float) and time.time() - last <= self.window
