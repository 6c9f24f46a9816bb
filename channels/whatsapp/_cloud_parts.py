"""What the Cloud API channel sends: one :class:`CloudPart` per Graph message, and their builders.

=================  ========================================================================
``kind``           ``content`` (the object of that ``type`` in the ``/messages`` body)
=================  ========================================================================
``text``           ``{body, preview_url: false}``, the body at most 4096 characters
``interactive``    ``{type: "button", body: {text}, footer: {text}, action: {buttons: [{type:
                   "reply", reply: {id: "agora:<token>", title}}]}}``: at most 3 buttons, titles
                   at most 20 characters, body 1024, footer 60
``image``          ``{id, caption}``; ``id`` is the media id the upload gave (filled when sent)
``document``       ``{id, caption, filename}``
``template``       ``{name, language: {code}, components: [body with the title as its text
                   parameter, one ``quick_reply`` button component per button with its payload]}``
=================  ========================================================================

A media part names the stored page it uploads (``media``: the media store's token, MIME type and
filename); the upload happens when the part is sent, so a retried part uploads again and a part
recorded as given up holds no Graph id that expired.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway import clip

from ._outbound import MAX_CAPTION

__all__ = [
    "MAX_BUTTONS",
    "MAX_CAPTION",
    "MAX_TEXT",
    "Button",
    "CloudMedia",
    "CloudPart",
    "approval_buttons",
    "approval_template",
    "media_part",
    "text_part",
]

MAX_TEXT = 4096
"""Characters in a text message's body."""
MAX_BUTTONS = 3
MAX_BUTTON_TITLE = 20
_MAX_BODY = 1024
_MAX_FOOTER = 60


@dataclass(frozen=True, kw_only=True)
class CloudMedia:
    """A stored page to upload before its message goes."""

    token: str
    mime: str
    filename: str


@dataclass(frozen=True, kw_only=True)
class CloudPart:
    """One Graph message: its ``type``, that type's object, and what it needs first."""

    kind: str
    content: dict[str, Any]
    media: CloudMedia | None = None
    template: dict[str, Any] | None = None
    """For an approval sent in the window: the template to send instead when Meta answers that
    the window had closed (``131047``)."""

    def with_media_id(self, media_id: str) -> CloudPart:
        """The part with the uploaded media's id in its content."""
        return replace(self, content={"id": media_id, **self.content})

    def to_json(self) -> dict[str, Any]:
        """The part as JSON (recorded when given up on, kept to resend after a failed status)."""
        out: dict[str, Any] = {"kind": self.kind, "content": self.content}
        if self.media is not None:
            out["media"] = {"token": self.media.token, "mime": self.media.mime, "filename": self.media.filename}
        if self.template is not None:
            out["template"] = self.template
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CloudPart:
        """The part ``to_json`` gave."""
        media = data.get("media")
        return cls(
            kind=str(data["kind"]),
            content=dict(data["content"]),
            media=CloudMedia(**media) if isinstance(media, dict) else None,
            template=data.get("template"),
        )


def text_part(body: str) -> CloudPart:
    """A text message (``body`` already converted and split to at most 4096 characters)."""
    return CloudPart(kind="text", content={"body": body[:MAX_TEXT], "preview_url": False})


@dataclass(frozen=True, kw_only=True)
class Button:
    """One reply button: its id (``agora:<token>``) and its label."""

    id: str
    title: str


def approval_buttons(*, body: str, footer: str, buttons: list[Button], template: dict[str, Any] | None) -> CloudPart:
    """An interactive reply-buttons message (at most three buttons)."""
    if not 1 <= len(buttons) <= MAX_BUTTONS:
        raise ValueError(f"a reply-buttons message has 1 to {MAX_BUTTONS} buttons, not {len(buttons)}")
    content: dict[str, Any] = {
        "type": "button",
        "body": {"text": clip(body, _MAX_BODY)},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": b.id, "title": clip(b.title, MAX_BUTTON_TITLE)}} for b in buttons
            ]
        },
    }
    if footer.strip():
        content["footer"] = {"text": clip(footer, _MAX_FOOTER)}
    return CloudPart(kind="interactive", content=content, template=template)


def approval_template(*, name: str, language: str, title: str, payloads: list[str]) -> dict[str, Any]:
    """The ``template`` object of an approval outside the window: the title, one payload per button."""
    components: list[dict[str, Any]] = [{"type": "body", "parameters": [{"type": "text", "text": clip(title, 1024)}]}]
    components += [
        {
            "type": "button",
            "sub_type": "quick_reply",
            "index": str(i),
            "parameters": [{"type": "payload", "payload": p}],
        }
        for i, p in enumerate(payloads)
    ]
    return {"name": name, "language": {"code": language}, "components": components}


def media_part(*, token: str, mime: str, filename: str, caption: str | None) -> CloudPart:
    """An image (``image/*``) or a document (anything else, a PDF) message of one stored page."""
    kind = "image" if mime.startswith("image/") else "document"
    content: dict[str, Any] = {}
    if caption and caption.strip():
        content["caption"] = clip(caption, MAX_CAPTION)
    if kind == "document":
        content["filename"] = filename
    return CloudPart(kind=kind, content=content, media=CloudMedia(token=token, mime=mime, filename=filename))
