"""Errors of the gateway and its channels.

The tree (``AgoraError`` and ``UserError`` come from ``tools``; the tools' and the renderers' own
branches are drawn in ``tools/_errors.py`` and ``renderers/_errors.py``)::

    AgoraError                         base of everything this project raises on purpose
    ├── UserError                      a developer misused the API
    ├── GatewayError                   a runtime failure with an HTTP status and a code
    │   ├── UnauthenticatedError       401  no credential identified the caller
    │   ├── InvalidTokenError          401  an actor token is malformed, forged or expired
    │   ├── ApprovalNotFoundError      404  no approval with that tool call id
    │   ├── ApprovalForbiddenError     403  this actor may not decide it
    │   ├── ApprovalSettledError       409  already decided
    │   ├── ApprovalExpiredError       410  it lapsed before the decision
    │   ├── RememberRefusedError       403  "always" asked where the policy forbids it (four eyes)
    │   ├── ConsoleForbiddenError      403  gateway._console: the caller's roles approve nothing
    │   ├── ThreadNotFoundError        404  (also what a store's ``write`` raises for a missing thread)
    │   ├── ThreadForbiddenError       403  someone else's thread
    │   ├── ThreadBusyError            409  a run is already running on the thread
    │   ├── ThreadParkedError          409  a run waits for an approval (the runtime supersedes it)
    │   ├── QueueFullError             429  the thread's queue holds as many messages as it may
    │   ├── QueuedMessageNotFoundError 404  no queued message with that id (it ran, or was removed)
    │   ├── AttachmentNotFoundError    404  no attachment with that id (or it expired)
    │   ├── AttachmentForbiddenError   403  another actor's attachment
    │   ├── AttachmentTooLargeError    413  over the size limit (refused before the whole body is read)
    │   ├── AttachmentTypeError        415  a type outside the accepted list, or bytes that are not it
    │   ├── RunNotFoundError           404
    │   ├── RunNotActiveError          409  the run already ended
    │   ├── UnknownAgentError          404  no agent of that name, or not one this caller may use
    │   ├── PersonaNotFoundError       400  the agent has no persona of that id (or alias)
    │   ├── RateLimitedError           429  too many turns; ``retry_after`` says when to try again
    │   ├── QuotaExceededError         429  the actor used its token budget for the day or month (``period``)
    │   ├── UsageForbiddenError        403  another actor's usage, asked without the admin role
    │   ├── TooManyConnectionsError    429  the address holds as many connections as it may
    │   ├── RequestTimeoutError        408  the body did not arrive in time (also a ``TimeoutError``)
    │   ├── ModelError                 502  the model failed (after retries)
    │   ├── StoreUnavailableError      503  the store cannot be reached: the one store failure type
    │   ├── IdentityUnavailableError   503  gateway._oidc: no identity-provider keys to check a token with
    │   ├── PushSendError              502  a push provider refused a part or was unreachable
    │   │   └── WhatsAppSendError      502  channels.whatsapp: Twilio refused or was unreachable
    │   ├── MediaFetchError            502  a provider's media: a host or address not allowed, or it failed
    │   ├── ConsoleForbiddenError      403  gateway._console: the actor's roles approve nothing
    │   ├── BadCursorError             400  gateway._cursors: a list's cursor this caller was not given
    │   ├── BadRequestError            4xx  gateway._guard: a route's malformed body, id or limit (400, 415)
    │   ├── CloudNotConfiguredError    503  channels.whatsapp: the Cloud API credentials are not set
    │   ├── CloudWebhookRefusedError   403  channels.whatsapp: a forged notification, a wrong verify token
    │   ├── TelegramWebhookError       4xx  channels.telegram: a bad secret (403), size (413) or update (400)
    │   ├── AgUiRequestError           400  channels.ag_ui: the body is not a usable RunAgentInput
    │   ├── InterruptError             409  channels.ag_ui: a resume that does not fit the interrupts
    │   ├── RefusedCall                400  channels.a2a: a JSON-RPC call refused before its method
    │   └── BadMessage                 400  channels.mcp: a JSON-RPC message refused (its code inside)
    └── (private signals)              one module's control flow, never seen outside it: they
                                       subclass ``AgoraError`` directly (``_Closed``, ...)

A store translates its backend's failures at its boundary (``RedisStore``: every call inside
``guarded``): callers see ``StoreUnavailableError``, never ``redis.exceptions``. A channel draws
its errors here, under the class it subclasses.

Channels translate these at their boundary: HTTP answers ``{code, message}`` with ``status``; the
web socket sends an ``error`` frame with ``code``; AG-UI a ``RUN_ERROR``; A2A a JSON-RPC error.
"""

from __future__ import annotations

from tools import AgoraError

__all__ = [
    "ApprovalExpiredError",
    "ApprovalForbiddenError",
    "ApprovalNotFoundError",
    "ApprovalSettledError",
    "GatewayError",
    "IdentityUnavailableError",
    "InvalidTokenError",
    "MediaFetchError",
    "ModelError",
    "QuotaExceededError",
    "RateLimitedError",
    "RememberRefusedError",
    "RequestTimeoutError",
    "RunNotActiveError",
    "RunNotFoundError",
    "StoreUnavailableError",
    "ThreadBusyError",
    "ThreadParkedError",
    "ThreadForbiddenError",
    "ThreadNotFoundError",
    "TooManyConnectionsError",
    "UnauthenticatedError",
    "UnknownAgentError",
    "UsageForbiddenError",
]


class GatewayError(AgoraError):
    """A runtime failure a channel reports to its client.

    Attributes:
        status: The HTTP status that fits.
        code: A short stable code (``approval_expired``...).
    """

    status: int = 500
    code: str = "gateway_error"


class UnauthenticatedError(GatewayError):
    """No credential identified the caller."""

    status, code = 401, "unauthenticated"


class InvalidTokenError(GatewayError):
    """An actor token is malformed, forged or expired."""

    status, code = 401, "invalid_token"


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


class RememberRefusedError(GatewayError):
    """A decision asked to ``remember`` where the policy forbids it; nothing was decided.

    A role's approvals are never remembered (four eyes: each call is decided by a person of the
    role), nor any when ``ApprovalPolicy.allow_remember`` is off.
    """

    status, code = 403, "remember_refused"


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

    The runtime queues the new message behind it (``ApprovalPolicy.on_new_message="queue"``, the
    default) or supersedes the parked run (``"supersede"``: its pending actions are rejected) and
    begins the new run.
    """

    status, code = 409, "thread_parked"


class QueueFullError(GatewayError):
    """The thread's queue holds as many messages as it may (``Agent.queue_limit``)."""

    status, code = 429, "queue_full"


class QueuedMessageNotFoundError(GatewayError):
    """No queued message with that id: it ran already, or was removed."""

    status, code = 404, "queued_message_not_found"


class AttachmentNotFoundError(GatewayError):
    """No attachment with that id (never uploaded, or expired)."""

    status, code = 404, "attachment_not_found"


class AttachmentForbiddenError(GatewayError):
    """The attachment belongs to another actor."""

    status, code = 403, "attachment_forbidden"


class AttachmentTooLargeError(GatewayError):
    """The file is larger than the accepted size."""

    status, code = 413, "attachment_too_large"


class AttachmentTypeError(GatewayError):
    """The file's type is not accepted, or its bytes are not what it claims to be."""

    status, code = 415, "attachment_type"


class MediaFetchError(GatewayError):
    """A provider's media could not be fetched: a host or address not allowed, or the provider failed."""

    status, code = 502, "media_unreachable"


class RunNotFoundError(GatewayError):
    """No run with that id."""

    status, code = 404, "run_not_found"


class RunNotActiveError(GatewayError):
    """The run already ended."""

    status, code = 409, "run_not_active"


class UnknownAgentError(GatewayError):
    """No agent with that name."""

    status, code = 404, "unknown_agent"


class PersonaNotFoundError(GatewayError):
    """The agent has no persona of that id or alias."""

    status, code = 400, "persona_not_found"


class RateLimitedError(GatewayError):
    """Too many turns from this actor; ``retry_after`` says when to try again."""

    status, code = 429, "rate_limited"

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class QuotaExceededError(GatewayError):
    """The actor used its token budget (``Quota``) for the UTC day or month: nothing more runs (429).

    Attributes:
        period: ``day`` or ``month``: the budget that ran out.
        used: Tokens the actor used in the period (across agents and processes).
        limit: The budget.
    """

    status, code = 429, "quota_exceeded"

    def __init__(self, message: str, *, period: str, used: int, limit: int) -> None:
        super().__init__(message)
        self.period = period
        self.used = used
        self.limit = limit


class UsageForbiddenError(GatewayError):
    """Another actor's usage (``GET /agent/usage?actor=``), asked without ``AGORA_ADMIN_ROLE`` (403)."""

    status, code = 403, "usage_forbidden"


class TooManyConnectionsError(GatewayError):
    """The address already holds as many connections as it may (429)."""

    status, code = 429, "too_many_connections"


class RequestTimeoutError(GatewayError, TimeoutError):
    """The request's body did not arrive within ``read_timeout`` (408).

    A ``TimeoutError`` too: aiohttp's lingering read of an unread body stops quietly on it.
    """

    status, code = 408, "request_timeout"


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
    """The store cannot be reached (Redis down, failing over, or silent past the call's deadline).

    The one type a store's failures surface as: every store translates its backend's errors to
    it at its boundary, with the backend's exception as ``__cause__``.
    """

    status, code = 503, "store_unavailable"


class IdentityUnavailableError(GatewayError):
    """No identity-provider keys to check a token with: its JWKS is down and none are kept (503).

    The token is neither accepted nor blamed; the caller may try again later.
    """

    status, code = 503, "identity_unavailable"
