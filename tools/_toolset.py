"""``Toolset``: a source of tools that come and go while the gateway runs (a remote MCP server).

A ``Tool`` is declared once and never changes; a toolset's tools are found at run time (a remote
server lists them, and may list others later). The registry owns its toolsets' lifecycle:
``ToolRegistry.start()`` starts each one, ``ToolRegistry.aclose()`` closes them, and a toolset
adds and retires its tools through the narrow ``ToolsetHost`` it is started with. Its tools are
governed like any other: the same gates, validation, approvals and narration.
"""

from __future__ import annotations

import abc
from typing import Protocol

from ._tool import Tool

__all__ = ["Toolset", "ToolsetHost"]


class ToolsetHost(Protocol):
    """What a toolset may do to the registry it is started by: add and retire its own tools."""

    def add_tool(self, tool: Tool, owner: Toolset) -> bool:
        """Offer ``tool`` from now on; False (and one log line) when its name is already taken.

        The first owner of a name keeps it: a static tool, or another toolset's tool.
        """
        ...

    def remove_tool(self, name: str, owner: Toolset) -> None:
        """Retire the tool of that name if ``owner`` added it (anything else is left alone)."""
        ...


class Toolset(abc.ABC):
    """A source of governed tools found at run time; register it like a tool.

    ``ToolRegistry(tools=[..., toolset])``, ``Runtime(tools=[...])`` and ``Gateway(tools=[...])``
    take one wherever they take tools. Its tools appear once ``start`` has found them.
    """

    name: str
    """Names the toolset in logs and in its tools' ``source``."""

    @abc.abstractmethod
    async def start(self, host: ToolsetHost) -> None:
        """Begin finding tools and adding them to ``host``; never fails for a source that is down.

        Returns once the first attempt settled (connected or not); work goes on in the
        background until ``aclose``.

        Raises:
            RuntimeError: The toolset was started or closed already.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Stop the background work and retire every tool this toolset added (idempotent)."""
