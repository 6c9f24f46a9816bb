"""The Graph message shapes the channel builds, and its options read from the environment."""

from __future__ import annotations

import pytest

from channels.whatsapp._cloud_options import WhatsAppCloudOptions
from channels.whatsapp._cloud_parts import (
    Button,
    CloudPart,
    approval_buttons,
    approval_template,
    media_part,
    text_part,
)


def test_interactive_buttons_shape() -> None:
    template = approval_template(name="agora_approval", language="en", title="Refund?", payloads=["agora:a", "agora:r"])
    part = approval_buttons(
        body="Refund €129.00 for order 1042?\n\nBurr grinder",
        footer="Tap a button, or reply yes or no.",
        buttons=[Button(id="agora:a", title="Refund the whole order now"), Button(id="agora:r", title="Reject")],
        template=template,
    )
    assert part.kind == "interactive"
    assert part.content == {
        "type": "button",
        "body": {"text": "Refund €129.00 for order 1042?\n\nBurr grinder"},
        "footer": {"text": "Tap a button, or reply yes or no."},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": "agora:a", "title": "Refund the whole or…"}},
                {"type": "reply", "reply": {"id": "agora:r", "title": "Reject"}},
            ]
        },
    }
    assert all(len(b["reply"]["title"]) <= 20 for b in part.content["action"]["buttons"])
    assert CloudPart.from_json(part.to_json()) == part
    with pytest.raises(ValueError, match="1 to 3 buttons"):
        approval_buttons(body="x", footer="", buttons=[Button(id=str(i), title="b") for i in range(4)], template=None)


def test_template_shape() -> None:
    assert approval_template(name="agora_approval", language="pt_BR", title="Reembolso?", payloads=["agora:a"]) == {
        "name": "agora_approval",
        "language": {"code": "pt_BR"},
        "components": [
            {"type": "body", "parameters": [{"type": "text", "text": "Reembolso?"}]},
            {
                "type": "button",
                "sub_type": "quick_reply",
                "index": "0",
                "parameters": [{"type": "payload", "payload": "agora:a"}],
            },
        ],
    }


def test_media_and_text_parts() -> None:
    image = media_part(token="t1", mime="image/png", filename="card.png", caption="x" * 2000)
    assert image.kind == "image" and len(image.content["caption"]) == 1024 and "filename" not in image.content
    assert image.with_media_id("M1").content["id"] == "M1"
    pdf = media_part(token="t2", mime="application/pdf", filename="invoice.pdf", caption=None)
    assert (pdf.kind, pdf.content) == ("document", {"filename": "invoice.pdf"})
    assert CloudPart.from_json(pdf.to_json()) == pdf
    assert text_part("hi").content == {"body": "hi", "preview_url": False}


def test_options_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    unset = WhatsAppCloudOptions(_env_file=None)  # type: ignore[call-arg]
    assert not unset.configured
    assert unset.disabled_reason == (
        "set AGORA_WHATSAPP_CLOUD_ACCESS_TOKEN, AGORA_WHATSAPP_CLOUD_APP_SECRET, "
        "AGORA_WHATSAPP_CLOUD_VERIFY_TOKEN, AGORA_WHATSAPP_CLOUD_PHONE_NUMBER_ID"
    )
    for name, value in {
        "ACCESS_TOKEN": "EAA",
        "APP_SECRET": "s",
        "VERIFY_TOKEN": "v",
        "PHONE_NUMBER_ID": "1065",
        "APPROVAL_TEMPLATE": "agora_approval",
    }.items():
        monkeypatch.setenv(f"AGORA_WHATSAPP_CLOUD_{name}", value)
    options = WhatsAppCloudOptions(_env_file=None)  # type: ignore[call-arg]
    assert options.disabled_reason is None
    assert options.approval_template == "agora_approval" and options.configured
    assert options.api_version == "v26.0" and options.graph_base == "https://graph.facebook.com"
    assert "EAA" not in repr(options)


def test_the_composition_root_adds_the_channel_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.app import default_channels

    monkeypatch.chdir("/")  # no .env of the checkout
    for name in ("ACCESS_TOKEN", "APP_SECRET", "VERIFY_TOKEN", "PHONE_NUMBER_ID"):
        monkeypatch.delenv(f"AGORA_WHATSAPP_CLOUD_{name}", raising=False)
    assert "whatsapp-cloud" not in [c.name for c in default_channels()]
    monkeypatch.setenv("AGORA_WHATSAPP_CLOUD_ACCESS_TOKEN", "EAA")
    (cloud,) = [c for c in default_channels() if c.name == "whatsapp-cloud"]
    assert cloud.disabled_reason and "AGORA_WHATSAPP_CLOUD_APP_SECRET" in cloud.disabled_reason
