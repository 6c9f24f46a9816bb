"""``TwilioOptions`` reads each documented variable: the ``AGORA_TWILIO_*`` names and their aliases."""

from __future__ import annotations

import pytest

from channels.whatsapp import TwilioOptions


@pytest.mark.parametrize("variable", ["AGORA_TWILIO_FROM", "AGORA_WHATSAPP_FROM"])
def test_the_sender_number_is_read_from_either_documented_name(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, "whatsapp:+15550001111")
    options = TwilioOptions(_env_file=None)  # type: ignore[call-arg]
    assert options.from_ == "whatsapp:+15550001111"


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("AGORA_TWILIO_MESSAGING_SERVICE_SID", "messaging_service_sid"),
        ("AGORA_WHATSAPP_MESSAGING_SERVICE_SID", "messaging_service_sid"),
        ("AGORA_TWILIO_APPROVAL_TEMPLATE_SID", "approval_template_sid"),
        ("AGORA_WHATSAPP_APPROVAL_TEMPLATE_SID", "approval_template_sid"),
    ],
)
def test_the_other_aliased_names_are_read_too(variable: str, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, "MG0123")
    assert getattr(TwilioOptions(_env_file=None), field) == "MG0123"  # type: ignore[call-arg]


def test_the_from_argument_still_works_by_its_python_name() -> None:
    assert TwilioOptions(_env_file=None, from_="whatsapp:+1555").from_ == "whatsapp:+1555"  # type: ignore[call-arg]
