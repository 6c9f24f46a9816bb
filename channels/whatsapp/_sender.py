"""Sending through Twilio: messages and Content templates, with retries and one error type.

Errors of the twilio SDK and of the network are translated in one place (``_twilio_errors``) to
``WhatsAppSendError``, whose ``retryable`` says whether trying again can help: 429 and 5xx
answers and an unreachable Twilio are retried with exponential backoff; other 4xx are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.http.response import Response

from gateway import PushSendError, RetryPolicy, trace_http_status

__all__ = ["JsonAsyncTwilioHttpClient", "OutboundMessage", "RetryPolicy", "TwilioSender", "WhatsAppSendError"]

logger = logging.getLogger("channels.whatsapp.sender")

T = TypeVar("T")


class WhatsAppSendError(PushSendError):
    """Twilio refused a request, or could not be reached (``gateway.PushSendError``).

    Attributes:
        twilio_code: Twilio's error code (``21211``...), when it gave one.
    """

    status, code = 502, "whatsapp_send_failed"

    def __init__(
        self, message: str, *, retryable: bool, http_status: int | None = None, twilio_code: int | None = None
    ) -> None:
        super().__init__(message, retryable=retryable, http_status=http_status, provider_code=twilio_code)
        self.twilio_code = twilio_code

    def details(self) -> dict[str, Any]:
        return {"twilio_code": self.twilio_code}


@contextlib.contextmanager
def _twilio_errors(what: str) -> Iterator[None]:
    """Translate SDK and network errors to ``WhatsAppSendError``."""
    try:
        yield
    except TwilioRestException as exc:
        status = int(exc.status)
        code = exc.code if isinstance(exc.code, int) else None
        raise WhatsAppSendError(
            f"Twilio answered {status} to {what}: {exc.msg}",
            retryable=status == 429 or status >= 500,
            http_status=status,
            twilio_code=code,
        ) from exc
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise WhatsAppSendError(f"Twilio unreachable for {what}: {exc!r}", retryable=True) from exc
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        # The SDK could not read a 2xx answer (not JSON, nested too deep, not an object): Twilio
        # may have done it, so it is never tried again (that could send a message twice).
        raise WhatsAppSendError(
            f"Twilio's answer to {what} could not be read ({type(exc).__name__})", retryable=False
        ) from None
    except TwilioException as exc:
        # TwilioServiceException (RFC 9457 errors) carries a status; a bare TwilioException none.
        raw = getattr(exc, "status", None)
        known = raw if isinstance(raw, int) else None
        retryable = known is None or known == 429 or known >= 500
        raise WhatsAppSendError(f"Twilio failed {what}: {exc}", retryable=retryable, http_status=known) from exc


@dataclass(frozen=True, kw_only=True)
class OutboundMessage:
    """One WhatsApp message: a body, one media with its caption, or a Content template."""

    to: str
    """``whatsapp:+E164``."""
    body: str | None = None
    media_url: str | None = None
    content_sid: str | None = None
    content_variables: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON form, to resend it later."""
        return {
            "to": self.to,
            "body": self.body,
            "media_url": self.media_url,
            "content_sid": self.content_sid,
            "content_variables": self.content_variables,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OutboundMessage:
        """The message ``to_json`` describes."""
        return cls(
            to=data["to"],
            body=data.get("body"),
            media_url=data.get("media_url"),
            content_sid=data.get("content_sid"),
            content_variables=dict(data.get("content_variables") or {}),
        )


class TwilioSender:
    """Sends messages and creates Content templates with a twilio ``Client``.

    Messages go from ``from_`` (``whatsapp:+E164``), or from the messaging service's sender pool
    when only ``messaging_service_sid`` is given.

    With an asynchronous HTTP client (``AsyncTwilioHttpClient``) the SDK's ``*_async`` calls are
    used; a synchronous client runs in a worker thread. Either way the event loop never blocks.
    """

    def __init__(
        self,
        client: Any,
        *,
        from_: str | None,
        messaging_service_sid: str | None = None,
        status_callback: str | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.client = client
        self.from_ = from_
        self.messaging_service_sid = messaging_service_sid
        self.status_callback = status_callback
        self.retry = retry or RetryPolicy()

    @property
    def is_async(self) -> bool:
        """Whether the client's HTTP client is asynchronous."""
        return bool(getattr(self.client.http_client, "is_async", False))

    def _params(self, message: OutboundMessage) -> dict[str, Any]:
        params: dict[str, Any] = {"to": message.to}
        if self.messaging_service_sid:
            params["messaging_service_sid"] = self.messaging_service_sid
        if self.from_:
            params["from_"] = self.from_
        if self.status_callback:
            params["status_callback"] = self.status_callback
        if message.content_sid:
            # Twilio refuses Body or MediaUrl together with ContentSid.
            params["content_sid"] = message.content_sid
            if message.content_variables:
                params["content_variables"] = json.dumps(message.content_variables, ensure_ascii=False)
            return params
        if message.body:
            params["body"] = message.body
        if message.media_url:
            params["media_url"] = [message.media_url]
        return params

    async def send(self, message: OutboundMessage) -> str:
        """Send one message (retrying what may succeed later) and return its ``MessageSid``.

        Raises:
            WhatsAppSendError: Twilio refused it, or the retries ran out.
        """
        if self.client is None:
            raise RuntimeError("TwilioSender has no client yet: the WhatsApp channel is not started")
        params = self._params(message)
        messages = self.client.messages

        async def once() -> str:
            with _twilio_errors("a message"):
                if self.is_async:
                    created = await messages.create_async(**params)
                else:
                    created = await asyncio.to_thread(messages.create, **params)
            return str(created.sid)

        return await self.retry.run(once, f"sending to {message.to}")

    async def create_content(self, request: dict[str, Any]) -> str:
        """Create a Content template (``POST /v1/Content``) and return its ``HX...`` sid.

        Raises:
            WhatsAppSendError: Twilio refused it, or the retries ran out.
        """
        from twilio.rest.content.v1.content import ContentList

        if self.client is None:
            raise RuntimeError("TwilioSender has no client yet: the WhatsApp channel is not started")
        create_request = ContentList.ContentCreateRequest(request)
        contents = self.client.content.v1.contents

        async def once() -> str:
            with _twilio_errors("a content template"):
                if self.is_async:
                    created = await contents.create_async(content_create_request=create_request)
                else:
                    created = await asyncio.to_thread(contents.create, content_create_request=create_request)
            return str(created.sid)

        return await self.retry.run(once, "creating a content template")


class JsonAsyncTwilioHttpClient(AsyncTwilioHttpClient):  # type: ignore[misc]
    """``AsyncTwilioHttpClient`` that sends JSON bodies as JSON.

    twilio 9.x's async client hands every body to aiohttp as form data, even when the SDK marks
    it ``application/json`` (the Content API's ``POST /v1/Content``), so Twilio answers 400; the
    sync client does it right (twilio/twilio-python#932). This sends such bodies as JSON text.
    """

    async def request(
        self,
        method: str,
        url: str,
        params: dict[str, object] | None = None,
        data: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,
        allow_redirects: bool = False,
    ) -> Response:
        """Send the request; a dict body marked ``application/json`` goes out as JSON text."""
        body: Any = data
        if isinstance(data, dict) and headers and "json" in headers.get("Content-Type", ""):
            body = json.dumps(data)
        response: Response = await super().request(
            method,
            url,
            params=params,
            data=body,
            headers=headers,
            auth=auth,
            timeout=timeout,
            allow_redirects=allow_redirects,
        )
        trace_http_status(response.status_code)
        return response
