"""The engine and the server of agora-gateway: runtime, agent loop, events, runs, stores, models."""

from typing import TYPE_CHECKING, Any

from ._agents import Agent
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
    InvalidTokenError,
    ModelError,
    QueuedMessageNotFoundError,
    QueueFullError,
    RateLimitedError,
    RunNotActiveError,
    RunNotFoundError,
    StoreUnavailableError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    ThreadParkedError,
    UnauthenticatedError,
    UnknownAgentError,
)
from ._gateway import APP_INSTRUCTIONS, Branding, Gateway
from ._guard import one_line, read_body
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
from ._push import (
    BUTTON_PREFIX,
    CHAT_TEXTS,
    ApprovalTokens,
    ChannelState,
    ChatApprovals,
    ChatInbound,
    ChatTexts,
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
    Undeliverable,
    clip,
    fetch_media,
    parse_decision,
    split_message,
    split_telegram,
    texts_for,
    to_plain,
    to_telegram,
    to_whatsapp,
)
from ._runtime import Runtime, RuntimeObserver
from ._services import SERVICES, DeliveredUi, GatewayServices, MediaRef
from ._settings import Settings, comma_list, comma_map
from ._sse import SseStream, sse_frame
from ._unicode import valid_text
from .events import Attachment, QueueMode, RunEvent, Turn

if TYPE_CHECKING:
    from .app import create_app

__all__ = [
    "APP_INSTRUCTIONS",
    "BUTTON_PREFIX",
    "CHANNELS",
    "CHANNEL_SERVICES",
    "CHAT_TEXTS",
    "REQUESTER",
    "SERVICES",
    "ActorResolver",
    "Agent",
    "AnonymousCookieResolver",
    "ApprovalExpiredError",
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
    "Gateway",
    "GatewayError",
    "GatewayServices",
    "InboundMessage",
    "InboundOptions",
    "InvalidTokenError",
    "MediaFetchError",
    "MediaRef",
    "MediaSource",
    "ModelError",
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
    "RateLimitedError",
    "Redeemed",
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
    "clip",
    "comma_list",
    "comma_map",
    "create_app",
    "fetch_media",
    "one_line",
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
    "valid_text",
    "verify_actor_token",
]


def __getattr__(name: str) -> Any:
    # create_app assembles the channels, which import this package: import it on first use.
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
