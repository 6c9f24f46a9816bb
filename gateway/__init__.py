"""The engine and the server of agora-gateway: runtime, agent loop, events, runs, stores, models."""

from typing import TYPE_CHECKING, Any

from ._agents import MAX_HANDOFF_DEPTH, Agent, Handoff, Persona, PersonaContext
from ._approvals import REQUESTER, ApprovalPolicy, ApprovalRule
from ._attachments import Attachments
from ._channel import CHANNEL_SERVICES, CHANNELS, Channel, ChannelRuntime, ChannelServices
from ._errors import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    AttachmentForbiddenError,
    AttachmentNotFoundError,
    AttachmentTooLargeError,
    AttachmentTypeError,
    GatewayError,
    IdentityUnavailableError,
    InvalidTokenError,
    ModelError,
    PersonaNotFoundError,
    QueuedMessageNotFoundError,
    QueueFullError,
    QuotaExceededError,
    RateLimitedError,
    RememberRefusedError,
    RunNotActiveError,
    RunNotFoundError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    ThreadParkedError,
    UnauthenticatedError,
    UnknownAgentError,
    UsageForbiddenError,
)
from ._gateway import APP_INSTRUCTIONS, Branding, Gateway
from ._guard import one_line, read_body
from ._guard_builtins import BlockedPatterns, MaxInputLength, PiiRedactor
from ._guards import GuardContext, GuardVerdict, InputGuard, OutputGuard
from ._hooks import EventHooks
from ._identity import (
    ActorResolver,
    AnonymousCookieResolver,
    ChainResolver,
    SignedTokenResolver,
    TrustedHeaderResolver,
    sign_actor_token,
    verify_actor_token,
)
from ._json import parse_json
from ._oidc import OidcResolver
from ._pii import PiiLogFilter
from ._pricing import ModelPrice
from ._push import (
    BUTTON_PREFIX,
    CHAT_TEXTS,
    ApprovalTokens,
    ChannelState,
    ChatApprovals,
    ChatInbound,
    ChatTexts,
    Forwarded,
    InboundMessage,
    InboundOptions,
    MediaFetchError,
    MediaSource,
    ProviderMedia,
    PushCursor,
    PushDelivery,
    PushOptions,
    PushPart,
    PushPort,
    PushSendError,
    PushState,
    PushTarget,
    Redeemed,
    RetryPolicy,
    RoleMap,
    StaffMember,
    Undeliverable,
    clip,
    fetch_media,
    parse_always,
    parse_decision,
    split_message,
    split_telegram,
    texts_for,
    to_plain,
    to_telegram,
    to_whatsapp,
)
from ._queue import Accepted
from ._quotas import Quota
from ._runtime import Runtime, RuntimeObserver
from ._services import SERVICES, DeliveredUi, GatewayServices, MediaRef
from ._settings import Settings, comma_list, comma_map
from ._sse import SseStream, sse_frame
from ._staff import APPROVAL_FEED, ApprovalFeed, PendingApproval, StaffApprovals, may_watch_approvals
from ._tracing import TRACER_NAME, trace_http_status
from ._tracing_setup import configure_tracing
from ._unicode import valid_text
from .events import Attachment, QueueMode, RunEvent, Turn

if TYPE_CHECKING:
    from .app import create_app

__all__ = [
    "APPROVAL_FEED",
    "APP_INSTRUCTIONS",
    "BUTTON_PREFIX",
    "CHANNELS",
    "CHANNEL_SERVICES",
    "CHAT_TEXTS",
    "MAX_HANDOFF_DEPTH",
    "REQUESTER",
    "SERVICES",
    "TRACER_NAME",
    "Accepted",
    "ActorResolver",
    "Agent",
    "AnonymousCookieResolver",
    "ApprovalExpiredError",
    "ApprovalFeed",
    "ApprovalForbiddenError",
    "ApprovalNotFoundError",
    "ApprovalPolicy",
    "ApprovalRule",
    "ApprovalSettledError",
    "ApprovalTokens",
    "Attachment",
    "AttachmentForbiddenError",
    "AttachmentNotFoundError",
    "AttachmentTooLargeError",
    "AttachmentTypeError",
    "Attachments",
    "BlockedPatterns",
    "Branding",
    "ChainResolver",
    "Channel",
    "ChannelRuntime",
    "ChannelServices",
    "ChannelState",
    "ChatApprovals",
    "ChatInbound",
    "ChatTexts",
    "DeliveredUi",
    "EventHooks",
    "Forwarded",
    "Gateway",
    "GatewayError",
    "GatewayServices",
    "GuardContext",
    "GuardVerdict",
    "Handoff",
    "IdentityUnavailableError",
    "InboundMessage",
    "InboundOptions",
    "InputGuard",
    "InvalidTokenError",
    "MaxInputLength",
    "MediaFetchError",
    "MediaRef",
    "MediaSource",
    "ModelError",
    "ModelPrice",
    "OidcResolver",
    "OutputGuard",
    "PendingApproval",
    "Persona",
    "PersonaContext",
    "PersonaNotFoundError",
    "PiiLogFilter",
    "PiiRedactor",
    "ProviderMedia",
    "PushCursor",
    "PushDelivery",
    "PushOptions",
    "PushPart",
    "PushPort",
    "PushSendError",
    "PushState",
    "PushTarget",
    "QueueFullError",
    "QueueMode",
    "QueuedMessageNotFoundError",
    "Quota",
    "QuotaExceededError",
    "RateLimitedError",
    "Redeemed",
    "RememberRefusedError",
    "RetryPolicy",
    "RoleMap",
    "RunEvent",
    "RunNotActiveError",
    "RunNotFoundError",
    "Runtime",
    "RuntimeObserver",
    "Settings",
    "SignedTokenResolver",
    "SseStream",
    "StaffApprovals",
    "StaffMember",
    "StoreUnavailableError",
    "ThreadBusyError",
    "ThreadForbiddenError",
    "ThreadNotFoundError",
    "ThreadParkedError",
    "TrustedHeaderResolver",
    "Turn",
    "UnauthenticatedError",
    "Undeliverable",
    "UnknownAgentError",
    "UsageForbiddenError",
    "clip",
    "comma_list",
    "comma_map",
    "configure_tracing",
    "create_app",
    "fetch_media",
    "may_watch_approvals",
    "one_line",
    "parse_always",
    "parse_decision",
    "parse_json",
    "read_body",
    "sign_actor_token",
    "split_message",
    "split_telegram",
    "sse_frame",
    "texts_for",
    "to_plain",
    "to_telegram",
    "to_whatsapp",
    "trace_http_status",
    "valid_text",
    "verify_actor_token",
]


def __getattr__(name: str) -> Any:
    # create_app assembles the channels, which import this package: import it on first use.
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
