"""The A2A channel: other agents call ours over A2A JSON-RPC (protocol 1.0, and 0.3).

``setup(app)`` mounts ``GET /.well-known/agent-card.json`` and ``POST /a2a``. A task is a run,
its ``contextId`` the run's thread; approvals are ``TASK_STATE_INPUT_REQUIRED``. See docs/a2a.md.
"""

from ._book import DEFAULT_TASK_TTL, CallerMessage, TaskBook, TaskRecord
from ._card import A2AOptions, build_agent_card, public_base_url
from ._channel import A2A_CHANNEL, A2AChannel, setup
from ._errors import error_body, map_gateway_errors
from ._handler import ActorUser, GatewayRequestHandler
from ._inbound import MAX_TURN_TEXT, Decision, OutputModes, read_decision, turn_text
from ._jsonrpc import V03_METHODS, V10_METHODS, JsonRpcCall, JsonRpcDispatcher, RefusedCall, RpcResult, read_call
from ._parts import JSON_MEDIA_TYPE, UiParts, agent_message, approval_message, data_part, struct
from ._sse import stream_frames
from ._view import INTERRUPTED_STATES, TERMINAL_STATES, StreamEvent, TaskView, state_of_run

__all__ = [
    "A2A_CHANNEL",
    "DEFAULT_TASK_TTL",
    "INTERRUPTED_STATES",
    "JSON_MEDIA_TYPE",
    "MAX_TURN_TEXT",
    "TERMINAL_STATES",
    "V03_METHODS",
    "V10_METHODS",
    "A2AChannel",
    "A2AOptions",
    "ActorUser",
    "CallerMessage",
    "Decision",
    "GatewayRequestHandler",
    "JsonRpcCall",
    "JsonRpcDispatcher",
    "OutputModes",
    "RefusedCall",
    "RpcResult",
    "StreamEvent",
    "TaskBook",
    "TaskRecord",
    "TaskView",
    "UiParts",
    "agent_message",
    "approval_message",
    "build_agent_card",
    "data_part",
    "error_body",
    "map_gateway_errors",
    "public_base_url",
    "read_call",
    "read_decision",
    "setup",
    "state_of_run",
    "stream_frames",
    "struct",
    "turn_text",
]
