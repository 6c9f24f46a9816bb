"""The A2A channel: other agents call ours over A2A JSON-RPC (protocol 1.0, and 0.3).

``setup(app)`` mounts ``GET /.well-known/agent-card.json`` and ``POST /a2a``. A task is a run,
its ``contextId`` the run's thread; approvals are ``TASK_STATE_INPUT_REQUIRED``. See docs/a2a.md.
"""

from ._book import DEFAULT_TASK_TTL, CallerMessage, TaskBook, TaskRecord
from ._card import A2AOptions, build_agent_card
from ._channel import A2A_CHANNEL, A2AChannel, setup
from ._handler import ActorUser, GatewayRequestHandler
from ._jsonrpc import V03_METHODS, V10_METHODS

__all__ = [
    "A2A_CHANNEL",
    "DEFAULT_TASK_TTL",
    "V03_METHODS",
    "V10_METHODS",
    "A2AChannel",
    "A2AOptions",
    "ActorUser",
    "CallerMessage",
    "GatewayRequestHandler",
    "TaskBook",
    "TaskRecord",
    "build_agent_card",
    "setup",
]
