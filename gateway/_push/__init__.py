"""The push kit: what every text channel shares (WhatsApp, Telegram, the Cloud API, yours).

- ``PushDelivery`` / ``PushPort``: durable, any-process delivery of a thread's events;
- ``ChatInbound``: a checked message to a decision or a turn;
- ``ChatApprovals``: single-use button tokens and typed ``yes`` / ``no 2``;
- ``StaffMember`` / ``Forwarded``: a role's approvals on its people's chats (``PushPort.staff_targets``);
- ``ChatTexts``: the gateway's own sentences (en, pt-BR);
- Markdown per target: ``to_whatsapp``, ``to_telegram``, ``to_plain``, and ``split_message``.
"""

from ._approvals import BUTTON_PREFIX, ApprovalTokens, ChatApprovals, Redeemed
from ._delivery import (
    PushDelivery,
    PushOptions,
    PushPart,
    PushPort,
    PushSendError,
    RetryPolicy,
    Undeliverable,
    clip,
    result_line,
    units,
)
from ._inbound import ChatInbound, InboundMessage, InboundOptions
from ._markdown import split_message, to_plain, to_whatsapp
from ._mdv2 import split_telegram, to_telegram
from ._media_fetch import MediaFetchError, MediaSource, ProviderMedia, fetch_media
from ._roles import RoleMap
from ._staff import Forwarded, StaffMember
from ._state import DAY, ChannelState, PushCursor, PushState, PushTarget
from ._texts import CHAT_TEXTS, ChatTexts, parse_always, parse_decision, texts_for

__all__ = [
    "BUTTON_PREFIX",
    "CHAT_TEXTS",
    "DAY",
    "Forwarded",
    "ApprovalTokens",
    "ChannelState",
    "ChatApprovals",
    "ChatInbound",
    "ChatTexts",
    "InboundMessage",
    "InboundOptions",
    "MediaFetchError",
    "MediaSource",
    "ProviderMedia",
    "PushCursor",
    "PushDelivery",
    "PushOptions",
    "PushPart",
    "PushPort",
    "PushSendError",
    "PushState",
    "PushTarget",
    "Redeemed",
    "RetryPolicy",
    "RoleMap",
    "StaffMember",
    "Undeliverable",
    "clip",
    "fetch_media",
    "parse_always",
    "parse_decision",
    "result_line",
    "split_message",
    "split_telegram",
    "texts_for",
    "to_plain",
    "to_telegram",
    "to_whatsapp",
    "units",
]
