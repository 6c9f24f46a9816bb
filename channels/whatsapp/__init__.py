"""The WhatsApp channel, through Twilio or Meta's Cloud API: conversations, approval buttons, images and PDFs.

``WhatsAppChannel(TwilioOptions(...))`` mounts ``POST /channels/whatsapp`` (Twilio's inbound
webhook) and ``POST /channels/whatsapp/status`` (status callbacks); ``create_app`` adds it when
``AGORA_TWILIO_*`` is set. ``WhatsAppCloudChannel(WhatsAppCloudOptions(...))`` mounts
``GET|POST /channels/whatsapp/cloud`` (Meta's Cloud API). Delivery, approvals and texts are the
shared kit's (``gateway``). See ``docs/whatsapp.md`` and ``docs/whatsapp-cloud.md``.
"""

from gateway import RetryPolicy

from ._approvals import BUTTON_PREFIX, MAX_BUTTON_TITLE, ApprovalButtons, button_title
from ._channel import WHATSAPP, WhatsAppChannel, WhatsAppOptions, setup
from ._cloud import CLOUD_PATH, WHATSAPP_CLOUD, WhatsAppCloudChannel
from ._cloud_api import GraphClient
from ._cloud_options import WhatsAppCloudOptions
from ._cloud_parts import CloudPart
from ._cloud_port import CloudPort
from ._cloud_status import CloudStatuses
from ._identity import (
    SenderResolver,
    SettingsSenderResolver,
    ThreadNamer,
    WhatsAppSender,
    keyed_thread_namer,
    language_for,
    thread_per_sender,
)
from ._inbound import InboundOptions, WhatsAppInbound
from ._markdown import MAX_BODY, split_message, to_whatsapp
from ._options import TwilioOptions, WhatsAppSenderOptions
from ._outbound import WHATSAPP_CAPABILITIES, DeliveryOptions, WhatsAppDelivery, WhatsAppPort
from ._sender import JsonAsyncTwilioHttpClient, OutboundMessage, TwilioSender, WhatsAppSendError
from ._state import ChannelState, Conversation, Cursor
from ._status import RETRYABLE_STATUS_CODES, StatusCallbacks
from ._texts import TEXTS, WhatsAppTexts, parse_decision, texts_for
from ._webhook import EMPTY_TWIML, WebhookVerifier

__all__ = [
    "BUTTON_PREFIX",
    "CLOUD_PATH",
    "EMPTY_TWIML",
    "MAX_BODY",
    "MAX_BUTTON_TITLE",
    "RETRYABLE_STATUS_CODES",
    "TEXTS",
    "WHATSAPP",
    "WHATSAPP_CAPABILITIES",
    "WHATSAPP_CLOUD",
    "ApprovalButtons",
    "ChannelState",
    "CloudPart",
    "CloudPort",
    "CloudStatuses",
    "Conversation",
    "Cursor",
    "DeliveryOptions",
    "GraphClient",
    "InboundOptions",
    "JsonAsyncTwilioHttpClient",
    "OutboundMessage",
    "RetryPolicy",
    "SenderResolver",
    "SettingsSenderResolver",
    "StatusCallbacks",
    "ThreadNamer",
    "TwilioOptions",
    "TwilioSender",
    "WebhookVerifier",
    "WhatsAppChannel",
    "WhatsAppCloudChannel",
    "WhatsAppCloudOptions",
    "WhatsAppDelivery",
    "WhatsAppInbound",
    "WhatsAppOptions",
    "WhatsAppPort",
    "WhatsAppSendError",
    "WhatsAppSender",
    "WhatsAppSenderOptions",
    "WhatsAppTexts",
    "button_title",
    "keyed_thread_namer",
    "language_for",
    "parse_decision",
    "setup",
    "split_message",
    "texts_for",
    "thread_per_sender",
    "to_whatsapp",
]
