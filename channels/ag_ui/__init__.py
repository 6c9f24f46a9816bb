"""The AG-UI channel: ``POST /agent/ag-ui`` (``RunAgentInput`` in, SSE of ``ag_ui.core`` events out).

See ``docs/ag-ui.md`` for the event mapping, the run and interrupt ids and the error behaviour.
"""

from ._channel import AgUiChannel
from ._handlers import AG_UI_OPTIONS, AgUiOptions, run_agent, setup, thread_events
from ._input import (
    AG_UI_DEFAULT_CAPABILITIES,
    MAX_BODY,
    AgUiRequest,
    AgUiRequestError,
    parse_run_input,
    read_run_input,
)
from ._resume import APPROVAL_RESPONSE_SCHEMA, ApprovalAnswer, Decision, InterruptError, ResumePlan, plan_resume
from ._runs import RUN_ID_TTL, RunIds
from ._stream import KEEPALIVE_SECONDS, AgUiStream, encode_frames
from ._translate import (
    CUSTOM_APPROVAL_REQUESTED,
    CUSTOM_APPROVAL_SETTLED,
    CUSTOM_MESSAGE_DEQUEUED,
    CUSTOM_MESSAGE_QUEUED,
    CUSTOM_QUOTA_WARNING,
    CUSTOM_UI,
    AgUiTranslator,
    RunNamer,
    UiDeliverer,
)

__all__ = [
    "AG_UI_DEFAULT_CAPABILITIES",
    "AG_UI_OPTIONS",
    "APPROVAL_RESPONSE_SCHEMA",
    "CUSTOM_APPROVAL_REQUESTED",
    "CUSTOM_APPROVAL_SETTLED",
    "CUSTOM_MESSAGE_DEQUEUED",
    "CUSTOM_MESSAGE_QUEUED",
    "CUSTOM_QUOTA_WARNING",
    "CUSTOM_UI",
    "KEEPALIVE_SECONDS",
    "MAX_BODY",
    "RUN_ID_TTL",
    "AgUiChannel",
    "AgUiOptions",
    "AgUiRequest",
    "AgUiRequestError",
    "AgUiStream",
    "AgUiTranslator",
    "ApprovalAnswer",
    "Decision",
    "InterruptError",
    "ResumePlan",
    "RunIds",
    "RunNamer",
    "UiDeliverer",
    "encode_frames",
    "parse_run_input",
    "plan_resume",
    "read_run_input",
    "run_agent",
    "setup",
    "thread_events",
]
