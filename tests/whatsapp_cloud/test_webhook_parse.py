"""The webhook's pure parts: Meta's signature, the verification handshake, notifications read."""

from __future__ import annotations

from channels.whatsapp._cloud_webhook import (
    CloudMessage,
    parse_notification,
    sign_body,
    verify_signature,
    verify_subscription,
)

from . import payloads as p
from .graph import PNID

SECRET = p.APP_SECRET.encode()


def test_signature_over_exact_bytes() -> None:
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    header = p.signature(body)
    assert sign_body(SECRET, body) == header
    assert verify_signature(SECRET, body, header)
    assert verify_signature(SECRET, body, header.upper().replace("SHA256=", "sha256="))
    assert not verify_signature(SECRET, body + b" ", header)
    assert not verify_signature(SECRET, body, p.signature(body, "another-secret"))
    assert not verify_signature(SECRET, body, header.removeprefix("sha256="))
    assert not verify_signature(SECRET, body, "sha1=" + header.removeprefix("sha256="))
    assert not verify_signature(SECRET, body, None)
    assert not verify_signature(SECRET, body, "sha256=ünïcode")


def test_subscription_handshake() -> None:
    good = {"hub.mode": "subscribe", "hub.verify_token": p.VERIFY_TOKEN, "hub.challenge": "1158201444"}
    assert verify_subscription(good, p.VERIFY_TOKEN) == "1158201444"
    assert verify_subscription({**good, "hub.verify_token": "wrong"}, p.VERIFY_TOKEN) is None
    assert verify_subscription({**good, "hub.mode": "unsubscribe"}, p.VERIFY_TOKEN) is None
    assert verify_subscription({**good, "hub.challenge": ""}, p.VERIFY_TOKEN) is None
    assert verify_subscription(good, "") is None


def test_messages_read() -> None:
    found = parse_notification(p.dumps(p.text("refund order 1042", id="wamid.A")), phone_number_id=PNID)
    assert found.messages == [
        CloudMessage(id="wamid.A", wa_id=p.ALICE, kind="text", text="refund order 1042", profile_name="Alice")
    ]
    tap = parse_notification(p.dumps(p.button_reply("agora:tok", "Refund")), phone_number_id=PNID).messages[0]
    assert (tap.kind, tap.button, tap.text) == ("button", "agora:tok", "Refund")
    quick = parse_notification(p.dumps(p.quick_reply("agora:t2", "Reject")), phone_number_id=PNID).messages[0]
    assert (quick.kind, quick.button, quick.text) == ("button", "agora:t2", "Reject")
    image = p.message("image", {"id": "MEDIA", "mime_type": "image/jpeg", "caption": "look"})
    seen = parse_notification(p.dumps(image), phone_number_id=PNID).messages[0]
    assert (seen.kind, seen.text) == ("media", "look")


def test_statuses_read() -> None:
    found = parse_notification(p.dumps(p.status("wamid.S", "failed", code=131056)), phone_number_id=PNID)
    (status,) = found.statuses
    assert (status.id, status.status, status.codes, status.recipient_id) == ("wamid.S", "failed", ("131056",), p.ALICE)
    assert status.error == "error 131056 error 131056"


def test_unknown_shapes_skipped_not_fatal() -> None:
    reaction = p.message("reaction", {"message_id": "wamid.X", "emoji": "👍"})
    assert parse_notification(p.dumps(reaction), phone_number_id=PNID).ignored == ["a message of type reaction"]
    other = parse_notification(p.dumps(p.text("hi")), phone_number_id="999")
    assert other.messages == [] and other.ignored == ["change for phone number id " + PNID]
    not_ours = parse_notification(b"[1, 2]", phone_number_id=PNID)
    assert not_ours.ignored == ["not a WhatsApp Business Account notification"]
    broken = p.notification({"messages": [{"type": "text"}], "statuses": [{"status": "sent"}]})
    assert parse_notification(p.dumps(broken), phone_number_id=PNID).ignored == [
        "a message of unknown shape",
        "a status of unknown shape",
    ]
    field = {"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "account_update", "value": {}}]}]}
    assert parse_notification(p.dumps(field), phone_number_id=PNID).ignored == ["change of field account_update"]
