"""The webhook's gate: ``POST /channels/telegram`` is checked here before anything else happens.

Telegram does not sign its updates. ``setWebhook`` registers a ``secret_token`` and Telegram
sends it back in ``X-Telegram-Bot-Api-Secret-Token`` with every update, so the header is the
proof: compared in constant time, and a request without it is refused 403 before its body is
read, so nothing it carries is recorded. Then the body: at most 1 MB (413), JSON (400), an
``Update`` with an ``update_id`` (400).
"""

from __future__ import annotations

import hmac

from aiohttp import web
from pydantic import SecretStr, ValidationError

from gateway import GatewayError, parse_json, read_body

from ._updates import Update

__all__ = ["MAX_UPDATE_BYTES", "SECRET_HEADER", "TelegramWebhookError", "WebhookGate"]

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_UPDATE_BYTES = 1024 * 1024
"""A text update is a few KB; files arrive as ids, never inline."""


class TelegramWebhookError(GatewayError):
    """A webhook request refused: 403 (secret), 413 (size), 400 (not an update)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class WebhookGate:
    """Reads an ``Update`` from a webhook request that proves it comes from Telegram."""

    def __init__(self, secret: SecretStr) -> None:
        self._secret = secret.get_secret_value().encode()

    def verify(self, request: web.Request) -> bool:
        """Whether the request carries our secret token (compared in constant time)."""
        sent = request.headers.get(SECRET_HEADER, "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(sent, self._secret)

    async def read(self, request: web.Request) -> Update:
        """The update the request carries.

        Raises:
            TelegramWebhookError: The secret token is missing or wrong (403), the body is over
                1 MB (413), not JSON or not an update (400).
        """
        if not self.verify(request):
            raise TelegramWebhookError(403, "forbidden", f"Missing or wrong {SECRET_HEADER}")
        try:
            raw = await read_body(request, MAX_UPDATE_BYTES)
        except web.HTTPRequestEntityTooLarge as exc:
            raise _too_large(request.content_length or MAX_UPDATE_BYTES + 1) from exc
        try:
            body = parse_json(raw)
        except ValueError:
            raise TelegramWebhookError(400, "invalid_json", "The body is not JSON") from None
        try:
            return Update.model_validate(body)
        except ValidationError as exc:
            where = ".".join(map(str, exc.errors()[0]["loc"])) or "body"
            raise TelegramWebhookError(400, "invalid_update", f"Not a Telegram update ({where})") from None


def _too_large(size: int) -> TelegramWebhookError:
    return TelegramWebhookError(413, "payload_too_large", f"An update is at most {MAX_UPDATE_BYTES} bytes, not {size}")
