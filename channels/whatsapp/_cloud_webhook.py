"""The Cloud API's webhook: Meta's verification handshake, its signature, and what a notification holds.

- **Verification** (``GET``): Meta calls the callback URL with ``hub.mode=subscribe``,
  ``hub.verify_token`` (the token typed in the app dashboard) and ``hub.challenge``; the answer
  echoes the challenge when the token matches (compared in constant time), 403 otherwise.
- **Signature** (``POST``): ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body under
  the app secret>``, checked in constant time over the exact bytes received, before anything is
  parsed.
- **Notifications**: ``{object: "whatsapp_business_account", entry: [{id, changes: [{field:
  "messages", value: {metadata: {phone_number_id}, contacts: [...], messages: [...], statuses:
  [...]}}]}]}``. Each message and status is read on its own: one of a shape we do not know is
  skipped (and named in :attr:`Notification.ignored`), the others still count.

Messages, by ``type``:

=================  =====================================================================
``text``           ``text.body``
``interactive``    ``interactive.button_reply.{id, title}`` (a reply button tapped), or
                   ``interactive.list_reply.{id, title}``
``button``         ``button.{payload, text}`` (a template's quick-reply button tapped)
media and others   ``image`` / ``video`` / ``document`` / ``audio`` / ``sticker`` / ``location``
                   / ``contacts`` / ``unsupported``: not read (``has_media``), a caption kept
``reaction``...    reactions, system notices, orders: skipped
=================  =====================================================================
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway import one_line, parse_json

__all__ = [
    "MAX_NOTIFICATION",
    "SIGNATURE_HEADER",
    "CloudMessage",
    "CloudStatus",
    "Notification",
    "parse_notification",
    "sign_body",
    "verify_signature",
    "verify_subscription",
]

SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_NOTIFICATION = 1024 * 1024
"""Bytes a notification may have; Meta's are a few KB (a batch of messages and statuses)."""
_MEDIA = frozenset({"image", "video", "document", "audio", "sticker", "location", "contacts", "unsupported"})
_CHALLENGE_CHARS = 256


def sign_body(app_secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends with ``body``: ``sha256=<hex>``."""
    return "sha256=" + hmac.new(app_secret, body, hashlib.sha256).hexdigest()


def verify_signature(app_secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of exactly ``body`` under ``app_secret`` (constant time)."""
    if not header or not app_secret:
        return False
    scheme, _, given = header.strip().partition("=")
    if scheme.lower() != "sha256" or not given:
        return False
    expected = hmac.new(app_secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode("ascii"), given.strip().lower().encode("utf-8", "replace"))


def verify_subscription(query: Mapping[str, str], verify_token: str) -> str | None:
    """The challenge to echo when ``query`` is Meta's handshake with our token, else ``None``."""
    if query.get("hub.mode") != "subscribe" or not verify_token:
        return None
    given = query.get("hub.verify_token", "")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), verify_token.encode("utf-8")):
        return None
    challenge = query.get("hub.challenge", "")
    if not challenge or len(challenge) > _CHALLENGE_CHARS or not challenge.isprintable():
        return None
    return challenge


# -- the wire shapes (only the fields we read; Meta adds fields freely) ---------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Text(_Wire):
    body: str


class _Reply(_Wire):
    id: str
    title: str = ""


class _Interactive(_Wire):
    type: str
    button_reply: _Reply | None = None
    list_reply: _Reply | None = None


class _Button(_Wire):
    payload: str = ""
    text: str = ""


class _Media(_Wire):
    caption: str | None = None
    id: str | None = None
    mime_type: str | None = None
    filename: str | None = None


class _Message(_Wire):
    from_: str = Field(alias="from")
    id: str = Field(min_length=1)
    type: str
    text: _Text | None = None
    interactive: _Interactive | None = None
    button: _Button | None = None
    image: _Media | None = None
    video: _Media | None = None
    document: _Media | None = None


class _StatusError(_Wire):
    code: int | str
    title: str | None = None
    message: str | None = None


class _Status(_Wire):
    id: str = Field(min_length=1)
    status: str
    recipient_id: str = ""
    errors: list[_StatusError] = []


class _Profile(_Wire):
    name: str | None = None


class _Contact(_Wire):
    wa_id: str
    profile: _Profile | None = None


# -- what the channel reads -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class CloudMessage:
    """One message a person sent to the business number."""

    id: str
    """``wamid...``: unique per message; a repeated delivery has the same id."""
    wa_id: str
    """The person's WhatsApp id (their number, digits only)."""
    kind: Literal["text", "button", "media"]
    text: str = ""
    """The text, a tapped button's title, or a media caption."""
    button: str | None = None
    """A tapped button's id (``interactive``) or payload (a template's quick reply)."""
    profile_name: str | None = None
    media_id: str | None = None
    """An ``image`` or ``document``'s media id (``GraphClient.media_url`` says where to fetch it)."""
    media_mime: str | None = None
    media_name: str = ""


@dataclass(frozen=True, kw_only=True)
class CloudStatus:
    """What Meta reports about a message we sent: ``sent``, ``delivered``, ``read`` or ``failed``."""

    id: str
    status: str
    recipient_id: str = ""
    codes: tuple[str, ...] = ()
    """The error codes of a ``failed`` status (``131047``, ``131056``...)."""
    error: str | None = None
    """The first error's title and message, for the record."""


@dataclass(kw_only=True)
class Notification:
    """What one signed notification holds for our phone number."""

    messages: list[CloudMessage] = field(default_factory=list)
    statuses: list[CloudStatus] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Why each skipped part was skipped (for the log)."""


def parse_notification(body: bytes, *, phone_number_id: str) -> Notification:
    """The messages and statuses of a notification for ``phone_number_id``.

    Changes for another phone number, of another ``field``, and items of unknown shape are
    skipped and named in ``ignored``.

    Raises:
        ValueError: ``body`` is not JSON.
    """
    document = parse_json(body)
    found = Notification()
    if not isinstance(document, dict) or not isinstance(document.get("entry"), list):
        found.ignored.append("not a WhatsApp Business Account notification")
        return found
    for entry in document["entry"]:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else [changes]:
            _read_change(change, phone_number_id, found)
    return found


def _read_change(change: Any, phone_number_id: str, found: Notification) -> None:
    value = change.get("value") if isinstance(change, dict) else None
    if not isinstance(value, dict) or change.get("field") != "messages":
        found.ignored.append(f"change of field {one_line(str(_get(change, 'field')), 40)}")
        return
    number = _get(value.get("metadata"), "phone_number_id")
    if str(number) != phone_number_id:
        found.ignored.append(f"change for phone number id {one_line(str(number), 40)}")
        return
    names = _profiles(value.get("contacts"))
    for item in _items(value.get("messages")):
        message = _message(item, names, found)
        if message is not None:
            found.messages.append(message)
    for item in _items(value.get("statuses")):
        try:
            status = _Status.model_validate(item)
        except ValidationError:
            found.ignored.append("a status of unknown shape")
            continue
        codes = tuple(str(e.code) for e in status.errors)
        first = status.errors[0] if status.errors else None
        error = " ".join(filter(None, [first.title, first.message])) if first else None
        found.statuses.append(
            CloudStatus(id=status.id, status=status.status, recipient_id=status.recipient_id, codes=codes, error=error)
        )


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _profiles(contacts: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    for item in _items(contacts):
        try:
            contact = _Contact.model_validate(item)
        except ValidationError:
            continue
        if contact.profile is not None and contact.profile.name:
            names[contact.wa_id] = contact.profile.name
    return names


def _message(item: Any, names: dict[str, str], found: Notification) -> CloudMessage | None:
    try:
        message = _Message.model_validate(item)
    except ValidationError:
        found.ignored.append("a message of unknown shape")
        return None
    base: dict[str, Any] = {"id": message.id, "wa_id": message.from_, "profile_name": names.get(message.from_)}
    if message.type == "text" and message.text is not None:
        return CloudMessage(kind="text", text=message.text.body, **base)
    if message.type == "interactive" and message.interactive is not None:
        reply = message.interactive.button_reply or message.interactive.list_reply
        if reply is not None:
            return CloudMessage(kind="button", text=reply.title, button=reply.id, **base)
    if message.type == "button" and message.button is not None:
        return CloudMessage(kind="button", text=message.button.text, button=message.button.payload or None, **base)
    if message.type in _MEDIA:
        media = {"image": message.image, "video": message.video, "document": message.document}.get(message.type)
        caption = media.caption if media is not None else None
        if media is not None and media.id and message.type in ("image", "document"):
            return CloudMessage(
                kind="media",
                text=caption or "",
                media_id=media.id,
                media_mime=media.mime_type,
                media_name=media.filename or "",
                **base,
            )
        return CloudMessage(kind="media", text=caption or "", **base)
    found.ignored.append(f"a message of type {one_line(message.type, 40)}")
    return None
