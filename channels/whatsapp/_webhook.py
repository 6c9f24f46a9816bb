"""The webhooks: ``POST /channels/whatsapp`` (inbound messages) and ``.../status`` (status callbacks).

Both check Twilio's signature before anything else: a request that fails answers 403 and
changes nothing. An inbound message is then claimed once by its ``MessageSid`` (a replay answers
200 and does nothing), answered at once with empty TwiML, and handled in the background.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from aiohttp import web
from multidict import MultiDict, MultiDictProxy
from twilio.request_validator import (
    HMAC_SHA1,
    HMAC_SHA256,
    SIGNATURE_HEADER,
    SIGNATURE_SETTINGS_HEADER,
    RequestValidator,
    get_signature_algorithm,
)

if TYPE_CHECKING:
    from ._channel import WhatsAppChannel

__all__ = ["EMPTY_TWIML", "WebhookVerifier", "inbound_handler", "status_handler"]

logger = logging.getLogger("channels.whatsapp.webhook")

EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>'
_MAX_FORM = 512 * 1024
"""A 4096-character message of 4-byte characters, percent-encoded, is about 50 KB."""


class WebhookVerifier:
    """Checks ``X-Twilio-Signature`` over the public URL Twilio called and every form field.

    The account's Auth Token signs with HMAC-SHA1. When Twilio signs with a SharedKey it adds
    ``X-Twilio-Webhooks-Signature-Settings: key=...,algorithm=HMAC_SHA256`` and the key's secret
    (``whatsapp_shared_key``) is the one to check with.

    The URL is ``public_base_url`` + the request's path and query. Without it, a proxy's
    ``X-Forwarded-Proto`` / ``X-Forwarded-Host`` are used when ``trust_forwarded``, else what the
    request itself says. Twilio signs the URL with or without the default port; both pass.
    """

    def __init__(
        self,
        *,
        auth_token: str | None,
        shared_key: str | None = None,
        public_base_url: str | None = None,
        trust_forwarded: bool = False,
    ) -> None:
        self.auth_token = auth_token
        self.shared_key = shared_key
        self.public_base_url = public_base_url.rstrip("/") if public_base_url else None
        self.trust_forwarded = trust_forwarded

    @property
    def configured(self) -> bool:
        """Whether any secret to check signatures with is set."""
        return bool(self.auth_token or self.shared_key)

    def public_url(self, request: web.Request) -> str:
        """The URL Twilio called, as it signed it."""
        if self.public_base_url:
            base = self.public_base_url
        elif self.trust_forwarded and request.headers.get("X-Forwarded-Host"):
            proto = request.headers.get("X-Forwarded-Proto", request.scheme).split(",")[0].strip()
            host = request.headers["X-Forwarded-Host"].split(",")[0].strip()
            base = f"{proto}://{host}"
        else:
            base = f"{request.scheme}://{request.host}"
        return base + request.raw_path

    def verify(self, request: web.Request, params: MultiDictProxy[str] | MultiDict[str]) -> bool:
        """Whether the request carries a valid signature of this URL and these params."""
        signature = request.headers.get(SIGNATURE_HEADER)
        if not signature:
            return False
        algorithm = get_signature_algorithm(request.headers.get(SIGNATURE_SETTINGS_HEADER)).upper()
        secret = {HMAC_SHA1: self.auth_token, HMAC_SHA256: self.shared_key}.get(algorithm)
        if not secret:
            return False
        valid: bool = RequestValidator(secret).validate(
            self.public_url(request), params, signature, algorithm=algorithm
        )
        return valid


async def _signed_form(request: web.Request, verifier: WebhookVerifier) -> MultiDict[str] | None:
    """The request's form fields when its signature is valid, else ``None``.

    Raises:
        HTTPRequestEntityTooLarge: The body is larger than any Twilio webhook (413).
    """
    if request.content_length is not None and request.content_length > _MAX_FORM:
        raise web.HTTPRequestEntityTooLarge(max_size=_MAX_FORM, actual_size=request.content_length)
    if request.content_type not in ("application/x-www-form-urlencoded", ""):
        return None
    body = await request.read()  # kept by the request: post() below parses these bytes
    if len(body) > _MAX_FORM:  # a chunked body says no length up front
        raise web.HTTPRequestEntityTooLarge(max_size=_MAX_FORM, actual_size=len(body))
    try:
        raw = await request.post()
    except ValueError:  # not UTF-8 (UnicodeDecodeError), or not a form: Twilio sends neither
        return None
    form: MultiDict[str] = MultiDict()
    for key, value in raw.items():
        if not isinstance(value, str):
            return None
        form.add(key, value)
    return form if verifier.verify(request, form) else None


def _forbidden() -> web.Response:
    return web.json_response({"code": "forbidden", "message": "Invalid Twilio signature"}, status=403)


def _twiml() -> web.Response:
    return web.Response(text=EMPTY_TWIML, content_type="text/xml")


def _channel(request: web.Request) -> WhatsAppChannel:
    from ._channel import WHATSAPP

    return request.app[WHATSAPP]


async def inbound_handler(request: web.Request) -> web.Response:
    """``POST /channels/whatsapp``: verify, dedupe, answer empty TwiML, handle in the background."""
    channel = _channel(request)
    if not channel.enabled:
        return web.json_response({"code": "whatsapp_not_configured", "message": channel.disabled_reason}, status=503)
    form = await _signed_form(request, channel.verifier)
    if form is None:
        logger.warning("refused an unsigned or tampered WhatsApp webhook from %s", request.remote)
        return _forbidden()
    message_sid = form.get("MessageSid") or form.get("SmsMessageSid") or ""
    if not message_sid:
        logger.info("signed WhatsApp webhook without MessageSid: ignored")
        return _twiml()
    if not await channel.state.claim_message(message_sid):
        logger.info("WhatsApp message %s was already received: ignored", message_sid)
        return _twiml()
    fields: dict[str, Any] = {key: form.get(key) for key in form}
    channel.delivery.spawn(channel.inbound.handle(fields), name=f"agora-wa-inbound-{message_sid}")
    return _twiml()


async def status_handler(request: web.Request) -> web.Response:
    """``POST /channels/whatsapp/status``: record a message's status; resend what may succeed."""
    channel = _channel(request)
    if not channel.enabled:
        return web.json_response({"code": "whatsapp_not_configured", "message": channel.disabled_reason}, status=503)
    form = await _signed_form(request, channel.verifier)
    if form is None:
        logger.warning("refused an unsigned or tampered WhatsApp status callback from %s", request.remote)
        return _forbidden()
    await channel.status.on_status({key: str(form.get(key)) for key in form})
    return _twiml()
