"""Webhook notifications shaped as Meta's reference shows them, and their signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Any

from .graph import PNID

APP_SECRET = "test-meta-app-secret"
VERIFY_TOKEN = "test-verify-token"
ALICE = "15551230001"
BRUNA = "5511987650002"


def wamid() -> str:
    return "wamid." + uuid.uuid4().hex.upper()


def signature(body: bytes, secret: str = APP_SECRET) -> str:
    """``X-Hub-Signature-256`` computed over the exact bytes, as Meta does."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def notification(value: dict[str, Any], *, pnid: str = PNID) -> dict[str, Any]:
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {"display_phone_number": "15550783881", "phone_number_id": pnid},
                            **value,
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


def message(kind: str, content: dict[str, Any], *, number: str = ALICE, id: str | None = None) -> dict[str, Any]:
    """A notification of one inbound message of ``kind`` (``text``, ``interactive``, ``button``...)."""
    item = {"from": number, "id": id or wamid(), "timestamp": "1749416383", "type": kind, kind: content}
    contacts = [{"profile": {"name": "Alice"}, "wa_id": number}]
    return notification({"contacts": contacts, "messages": [item]})


def text(body: str, *, number: str = ALICE, id: str | None = None) -> dict[str, Any]:
    return message("text", {"body": body}, number=number, id=id)


def button_reply(button_id: str, title: str, *, number: str = ALICE) -> dict[str, Any]:
    reply = {"type": "button_reply", "button_reply": {"id": button_id, "title": title}}
    return message("interactive", reply, number=number)


def quick_reply(payload: str, label: str, *, number: str = ALICE) -> dict[str, Any]:
    return message("button", {"payload": payload, "text": label}, number=number)


def status(message_id: str, state: str, *, number: str = ALICE, code: int | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"id": message_id, "status": state, "timestamp": "1750263773", "recipient_id": number}
    if code is not None:
        item["errors"] = [{"code": code, "title": f"error {code}", "message": f"error {code}"}]
    return notification({"statuses": [item]})


def dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()
