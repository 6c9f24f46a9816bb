"""The MCP channel: the gateway's governed tools to any MCP client, over Streamable HTTP at ``/mcp``.

``initialize`` opens a session (kept in the store, bound to the bearer actor); ``tools/list`` is
what the registry offers that actor and agent; ``tools/call`` runs the tool as a direct-call run,
with the same gates, validation, narration and approvals as a model's call. See docs/mcp.md.
"""

from ._calls import APPROVAL_ID_PREFIX, MCP_CAPABILITIES
from ._channel import MAX_BATCH, MAX_BODY, MCP_CHANNEL, VERSIONS, McpChannel, setup
from ._sessions import DEFAULT_SESSION_TTL, McpSession, SessionBook

__all__ = [
    "APPROVAL_ID_PREFIX",
    "DEFAULT_SESSION_TTL",
    "MAX_BATCH",
    "MAX_BODY",
    "MCP_CAPABILITIES",
    "MCP_CHANNEL",
    "VERSIONS",
    "McpChannel",
    "McpSession",
    "SessionBook",
    "setup",
]
