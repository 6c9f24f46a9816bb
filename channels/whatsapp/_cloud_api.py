"""The WhatsApp Cloud API (Meta's Graph API): send messages, upload media, one error type.

=========================================  ===========================================================
request                                    what it is
=========================================  ===========================================================
``POST /{version}/{phone-number-id}/messages``  JSON ``{messaging_product: "whatsapp", recipient_type:
                                           "individual", to, type, <type>: {...}}``; answers
                                           ``{messages: [{id: "wamid..."}]}``
``POST /{version}/{phone-number-id}/media``     multipart: ``file`` (with filename and MIME type),
                                           ``type`` (the MIME type), ``messaging_product=whatsapp``;
                                           answers ``{id}``, the media id an ``image`` / ``document``
                                           message names
=========================================  ===========================================================

Every request carries ``Authorization: Bearer <access token>``; the token is never logged and
never part of an error's text. Graph errors (``{error: {code, message, error_data: {details}}}``),
HTTP statuses and the network are translated in one place (:func:`_graph_error`) to
:class:`gateway.PushSendError` (``provider_code``: Graph's code, as a string), whose
``retryable`` says whether the same request may succeed later:

- HTTP 429 and 5xx, an unreachable Graph, a timeout: retryable;
- throttling codes (``4`` app call limit, ``80007`` account rate limit, ``130429`` throughput,
  ``131056`` pair rate limit) and ``2`` (service temporarily unavailable), whatever the status:
  retryable;
- every other answer of 400-499: final (a bad number, a closed 24 h window (``131047``), a bad
  template...).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp

from gateway import PushSendError, parse_json, trace_http_status

__all__ = ["RETRYABLE_GRAPH_CODES", "GraphClient", "message_payload"]

RETRYABLE_GRAPH_CODES = frozenset({2, 4, 80007, 130429, 131056})
"""Graph error codes worth a retry: service unavailable, app / account / throughput / pair limits."""
_TIMEOUT = aiohttp.ClientTimeout(total=30, connect=10)


def _retry_after(headers: Any) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return max(0.0, seconds) if seconds is not None and math.isfinite(seconds) else None  # not inf, not nan


def _graph_error(status: int, body: bytes, headers: Any, what: str) -> PushSendError:
    """The error of a non-2xx answer: Graph's code and details, retryable or not."""
    code: int | None = None
    detail = ""
    # parse_json: nested too deep is a ValueError too; KeyError: no "error"; OverflowError: a code of 1e400
    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError, OverflowError):
        error = parse_json(body)["error"]
        code = int(error["code"]) if error.get("code") is not None else None
        detail = str(error.get("message") or "")
        details = (error.get("error_data") or {}).get("details")
        if details:
            detail = f"{detail} ({details})"
    retryable = status == 429 or status >= 500 or code in RETRYABLE_GRAPH_CODES
    text = (
        f"Graph {what}: HTTP {status}"
        + (f", code {code}" if code is not None else "")
        + (f": {detail}" if detail else "")
    )
    return PushSendError(
        text[:500],
        retryable=retryable,
        retry_after=_retry_after(headers),
        http_status=status,
        provider_code=str(code) if code is not None else None,
    )


@contextlib.contextmanager
def _network_errors(what: str) -> Iterator[None]:
    """Translate an unreachable Graph or a timeout to a retryable ``PushSendError``."""
    try:
        yield
    except aiohttp.ClientError as exc:
        raise PushSendError(f"Graph {what}: unreachable ({type(exc).__name__})", retryable=True) from exc
    except TimeoutError as exc:
        raise PushSendError(f"Graph {what}: timed out", retryable=True) from exc


@dataclass(kw_only=True)
class GraphClient:
    """Sends as one business phone number through the Graph API.

    ``session`` is used as given (tests pass one, or point ``graph_base`` at a loopback server);
    without one, :meth:`open` makes one and :meth:`aclose` closes it.
    """

    access_token: str = field(repr=False)
    phone_number_id: str
    api_version: str = "v26.0"
    graph_base: str = "https://graph.facebook.com"
    session: aiohttp.ClientSession | None = field(default=None, repr=False)
    _own_session: bool = field(default=False, repr=False)

    def url(self, edge: str) -> str:
        """``{graph_base}/{version}/{phone-number-id}/{edge}``."""
        return f"{self.graph_base.rstrip('/')}/{self.api_version}/{self.phone_number_id}/{edge}"

    async def open(self) -> None:
        """Make the HTTP session when none was given."""
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=_TIMEOUT)
            self._own_session = True

    async def aclose(self) -> None:
        """Close the session this client made (a given one is its owner's to close)."""
        if self._own_session and self.session is not None:
            await self.session.close()
            self.session = None
            self._own_session = False

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.access_token}"}

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            raise RuntimeError("GraphClient is not open: call open() first")
        return self.session

    async def send_message(self, to: str, kind: str, content: dict[str, Any]) -> str:
        """Send one message of ``kind`` (``text``, ``interactive``, ``image``...) to ``to``.

        ``to`` is the person's WhatsApp number (digits, or ``+E164``); ``content`` is the object
        of that ``kind`` (``{"body": "..."}`` for text). Returns the message id (``wamid...``).

        Raises:
            PushSendError: Graph refused it or could not be reached (``retryable`` says more).
        """
        return await self.post_message(message_payload(to, kind, content))

    async def post_message(self, payload: dict[str, Any]) -> str:
        """Post a complete ``/messages`` payload (as :func:`message_payload` builds); the ``wamid``.

        Raises:
            PushSendError: Graph refused it or could not be reached.
        """
        answer = await self._post("messages", "send", json=payload)
        try:
            return str(answer["messages"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise PushSendError("Graph send: the answer names no message id", retryable=False) from None

    async def upload_media(self, data: bytes, *, mime: str, filename: str) -> str:
        """Upload a file for this phone number; the media id to send it by.

        Raises:
            PushSendError: Graph refused it or could not be reached.
        """
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", data, filename=filename, content_type=mime)
        answer = await self._post("media", "upload", data=form)
        media_id = answer.get("id")
        if not media_id:
            raise PushSendError("Graph upload: the answer names no media id", retryable=False)
        return str(media_id)

    async def media_url(self, media_id: str) -> tuple[str, str | None]:
        """Where a received media item is downloaded (with this token), and the type Meta says it is.

        ``GET {graph_base}/{version}/{media-id}`` answers ``{url, mime_type, file_size, id}``;
        the ``url`` lives a few minutes and wants the same bearer token.

        Raises:
            PushSendError: Graph refused it or could not be reached.
        """
        url = f"{self.graph_base.rstrip('/')}/{self.api_version}/{quote(media_id, safe='')}"
        with _network_errors("media"):
            async with self._session().get(url, headers=self._headers()) as response:
                raw = await response.read()
                if response.status >= 400:
                    raise _graph_error(response.status, raw, response.headers, "media")
        try:
            answer = parse_json(raw)
        except ValueError:
            raise PushSendError("Graph media: the answer is not JSON", retryable=False) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("url"), str):
            raise PushSendError("Graph media: the answer names no url", retryable=False)
        mime = answer.get("mime_type")
        return answer["url"], mime if isinstance(mime, str) else None

    def bearer(self) -> dict[str, str]:
        """The ``Authorization`` header of this phone number's token (a media download wants it)."""
        return self._headers()

    async def _post(self, edge: str, what: str, **body: Any) -> dict[str, Any]:
        with _network_errors(what):
            async with self._session().post(self.url(edge), headers=self._headers(), **body) as response:
                raw = await response.read()
                trace_http_status(response.status)
                if response.status >= 400:
                    raise _graph_error(response.status, raw, response.headers, what)
        try:
            answer = parse_json(raw)
        except ValueError:
            raise PushSendError(f"Graph {what}: the answer is not JSON", retryable=False) from None
        if not isinstance(answer, dict):
            raise PushSendError(f"Graph {what}: the answer is not an object", retryable=False)
        return answer


def message_payload(to: str, kind: str, content: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of one ``/messages`` request."""
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to.removeprefix("whatsapp:").lstrip("+"),
        "type": kind,
        kind: content,
    }
