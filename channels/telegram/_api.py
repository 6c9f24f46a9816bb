"""``TelegramApi``: a small typed client over the Bot API's documented HTTP interface.

Every method is ``POST https://api.telegram.org/bot<token>/<method>``: a JSON body, or
``multipart/form-data`` when a file goes up (``sendPhoto`` / ``sendDocument``). The answer is
``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code": ..., "description": ...,
"parameters": {"retry_after": ...}}``; ``error_code`` mirrors the HTTP status.

How failures map to ``PushSendError`` (one place, :meth:`TelegramApi._answer`):

=========================  ==========  =================================================
Answer                     Retryable   Why
=========================  ==========  =================================================
429 (flood control)        yes         after ``parameters.retry_after`` seconds
5xx, network, timeout      yes         Telegram or the way there is down for now
400, 401, 403, 404, ...    no          bad request, bad token, the user blocked the bot
=========================  ==========  =================================================

The token is part of every URL, so no URL is ever logged or put in an error's text; an
aiohttp error is re-raised ``from None`` because its own text may carry the URL.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import SecretStr

from gateway import PushSendError, parse_json, trace_http_status

__all__ = ["InputFile", "TelegramApi"]

logger = logging.getLogger("channels.telegram.api")

UPLOAD_FIELDS = {"sendPhoto": "photo", "sendDocument": "document"}
"""The methods that upload a file, and the form field the file goes in."""


@dataclass(frozen=True, kw_only=True)
class InputFile:
    """A file to upload: its bytes, the name Telegram shows and its content type."""

    data: bytes
    filename: str
    mime: str


class TelegramApi:
    """Calls Bot API methods for one bot.

    Args:
        token: The bot's token.
        api_base: ``https://api.telegram.org`` or another server speaking the Bot API.
        session: An ``aiohttp.ClientSession`` to use (not closed here); one is made otherwise.
        timeout: Seconds one call may take.
    """

    def __init__(
        self,
        token: SecretStr,
        *,
        api_base: str = "https://api.telegram.org",
        session: aiohttp.ClientSession | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._token = token
        self._base = api_base.rstrip("/")
        self._session = session
        self._owns_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def call(self, method: str, payload: Mapping[str, Any] | None = None) -> Any:
        """Call ``method`` with a JSON body; its ``result``.

        Raises:
            PushSendError: Telegram refused (``ok: false``), or could not be reached.
        """
        return await self._post(method, json=dict(payload or {}))

    async def upload(self, method: str, file: InputFile, payload: Mapping[str, Any]) -> Any:
        """Call ``sendPhoto`` / ``sendDocument`` as ``multipart/form-data`` with ``file``; its ``result``.

        Other fields go as form fields (objects such as ``reply_markup`` JSON-serialized).

        Raises:
            PushSendError: As :meth:`call`.
        """
        form = aiohttp.FormData()
        for key, value in payload.items():
            if value is not None:
                form.add_field(key, value if isinstance(value, str) else json.dumps(value))
        form.add_field(UPLOAD_FIELDS[method], file.data, filename=file.filename, content_type=file.mime)
        return await self._post(method, data=form)

    def file_url(self, file_path: str) -> str:
        """Where a file ``getFile`` named is downloaded: ``<api_base>/file/bot<token>/<file_path>``.

        The URL holds the token: never log it.
        """
        return f"{self._base}/file/bot{self._token.get_secret_value()}/{file_path.lstrip('/')}"

    async def aclose(self) -> None:
        """Close the session this client made (a given one stays open)."""
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    async def _post(self, method: str, **body: Any) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        url = f"{self._base}/bot{self._token.get_secret_value()}/{method}"
        try:
            async with self._session.post(url, timeout=self._timeout, **body) as response:
                raw = await response.read()
                trace_http_status(response.status)
                return self._answer(method, response.status, raw)
        except (TimeoutError, aiohttp.ClientError) as exc:
            # from None: aiohttp's text for some errors holds the URL, and the URL holds the token.
            reason = type(exc).__name__
            raise PushSendError(f"{method}: Telegram unreachable ({reason})", retryable=True) from None

    def _answer(self, method: str, status: int, raw: bytes) -> Any:
        try:
            answer = parse_json(raw)  # nested too deep, NaN or not UTF-8: no answer either
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise PushSendError(
                f"{method}: HTTP {status} without a Bot API answer",
                retryable=status >= 500 or status == 429,
                http_status=status,
            )
        if answer.get("ok") is True:
            return answer.get("result")
        error_code = answer.get("error_code")
        code = error_code if isinstance(error_code, int) else status
        description = str(answer.get("description") or f"error {code}")
        parameters = answer.get("parameters")
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        raise PushSendError(
            f"{method}: {code} {description}",
            retryable=code == 429 or code >= 500,
            retry_after=_seconds(retry_after),
            http_status=status,
            provider_code=code,
        )


def _seconds(value: object) -> float | None:
    """``retry_after`` as seconds, or ``None`` when it is not a finite number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return seconds if math.isfinite(seconds) else None
