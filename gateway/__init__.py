"""The engine and the server of agora-gateway: runtime, agent loop, events, runs, stores, models."""

from ._agents import Agent
from ._approvals import REQUESTER, ApprovalPolicy, ApprovalRule
from ._errors import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    GatewayError,
    ModelError,
    RunNotActiveError,
    RunNotFoundError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    UnknownAgentError,
)
from ._runtime import Runtime, RuntimeObserver
from .events import RunEvent, Turn

__all__ = [
    "REQUESTER",
    "Agent",
    "ApprovalExpiredError",
    "ApprovalForbiddenError",
    "ApprovalNotFoundError",
    "ApprovalPolicy",
    "ApprovalRule",
    "ApprovalSettledError",
    "GatewayError",
    "ModelError",
    "RunEvent",
    "RunNotActiveError",
    "RunNotFoundError",
    "Runtime",
    "RuntimeObserver",
    "StoreUnavailableError",
    "ThreadBusyError",
    "ThreadForbiddenError",
    "ThreadNotFoundError",
    "Turn",
    "UnknownAgentError",
]
