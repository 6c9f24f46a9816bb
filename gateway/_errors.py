"""Errors of the gateway.

The tree (``AgoraError`` and ``UserError`` come from ``tools``)::

    AgoraError
    ├── UserError                      a developer misused the API
    └── GatewayError                   a runtime failure with an HTTP status and a code
        ├── ApprovalNotFoundError      404  no approval with that tool call id
        ├── ApprovalForbiddenError     403  this actor may not decide it
        ├── ApprovalSettledError       409  already decided
        ├── ApprovalExpiredError       410  it lapsed before the decision
        ├── ThreadNotFoundError        404
        ├── ThreadForbiddenError       403  someone else's thread
        ├── ThreadBusyError            409  a run is already running on the thread
        ├── ThreadParkedError          409  a run waits for an approval (the runtime supersedes it)
        ├── RunNotFoundError           404
        ├── RunNotActiveError          409  the run already ended
        ├── UnknownAgentError          404
        ├── ModelError                 502  the model failed (after retries)
        └── StoreUnavailableError      503  the store (Redis) cannot be reached

Channels translate these at their boundary: HTTP answers ``{code, message}`` with ``status``; the
web socket sends an ``error`` frame with ``code``.
"""

from __future__ import annotations

from tools import AgoraError

__all__ = [
    "ApprovalExpiredError",
    "ApprovalForbiddenError",
    "ApprovalNotFoundError",
    "ApprovalSettledError",
    "GatewayError",
    "ModelError",
    "RunNotActiveError",
    "RunNotFoundError",
    "StoreUnavailableError",
    "ThreadBusyError",
    "ThreadParkedError",
    "ThreadForbiddenError",
    "ThreadNotFoundError",
    "UnknownAgentError",
]


class GatewayError(AgoraError):
    """A runtime failure a channel reports to its client.

    Attributes:
        status: The HTTP status that fits.
        code: A short stable code (``approval_expired``...).
    """

    status: int = 500
    code: str = "gateway_error"


class ApprovalNotFoundError(GatewayError):
    """No approval exists with that tool call id."""

    status, code = 404, "approval_not_found"


class ApprovalForbiddenError(GatewayError):
    """The actor may not decide this approval (not the requester, nor of the approver role)."""

    status, code = 403, "approval_forbidden"


class ApprovalSettledError(GatewayError):
    """The approval was already decided."""

    status, code = 409, "approval_settled"


class ApprovalExpiredError(GatewayError):
    """The approval lapsed before this decision; the run was told it expired."""

    status, code = 410, "approval_expired"


class ThreadNotFoundError(GatewayError):
    """No thread with that id."""

    status, code = 404, "thread_not_found"


class ThreadForbiddenError(GatewayError):
    """The thread belongs to another actor."""

    status, code = 403, "thread_forbidden"


class ThreadBusyError(GatewayError):
    """A run is already running on this thread; wait for it or cancel it."""

    status, code = 409, "thread_busy"


class ThreadParkedError(GatewayError):
    """A run on this thread waits for an approval; ``Store.begin_run`` refuses until it is settled.

    The runtime answers by superseding the parked run (its pending actions are rejected), then
    begins the new run.
    """

    status, code = 409, "thread_parked"


class RunNotFoundError(GatewayError):
    """No run with that id."""

    status, code = 404, "run_not_found"


class RunNotActiveError(GatewayError):
    """The run already ended."""

    status, code = 409, "run_not_active"


class UnknownAgentError(GatewayError):
    """No agent with that name."""

    status, code = 404, "unknown_agent"


class ModelError(GatewayError):
    """The model failed (after its retries); the run fails with this code."""

    status, code = 502, "model_error"

    def __init__(
        self, message: str, *, code: str | None = None, retryable: bool = False, public: str | None = None
    ) -> None:
        """Args: message: the full story (logged); public: what people see (``message`` by default)."""
        super().__init__(message)
        if code is not None:
            self.code = code
        self.retryable = retryable
        self.public = public or message


class StoreUnavailableError(GatewayError):
    """The store cannot be reached (Redis down or unreachable)."""

    status, code = 503, "store_unavailable"
