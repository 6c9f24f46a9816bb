"""The WhatsApp channel's settings: Twilio's (``AGORA_TWILIO_*``) and the senders' (``AGORA_WHATSAPP_*``).

Each is read from its own environment prefix (and ``.env``), like the core ``Settings``. The
names the first release documented keep working: ``AGORA_WHATSAPP_FROM``,
``AGORA_WHATSAPP_MESSAGING_SERVICE_SID``, ``AGORA_WHATSAPP_APPROVAL_TEMPLATE_SID`` and
``AGORA_WHATSAPP_SHARED_KEY`` are aliases of the ``AGORA_TWILIO_*`` ones.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gateway import comma_list, comma_map

__all__ = ["TwilioOptions", "WhatsAppSenderOptions"]


def _alias(variable: str, old: str) -> AliasChoices:
    # The environment names only: an alias is read from the environment as written, without the
    # prefix, so the field's own name here would read a bare SHARED_KEY. Arguments still go by
    # the field's name (populate_by_name).
    return AliasChoices(f"AGORA_TWILIO_{variable}", old)


def agent_map(value: Any) -> Any:
    """``{"whatsapp:+1555...": "billing"}`` (JSON) or ``+1555...=billing,...``, keyed by the bare ``+E164``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            value = json.loads(text)
        else:
            pairs = (item.partition("=") for item in text.split(",") if "=" in item)
            value = {key: agent for key, _, agent in pairs}
    if isinstance(value, dict):
        return {str(key).strip().removeprefix("whatsapp:"): str(agent).strip() for key, agent in value.items()}
    return value


class WhatsAppSenderOptions(BaseSettings):
    """Who WhatsApp senders are (``AGORA_WHATSAPP_*``), whichever provider carries them."""

    model_config = SettingsConfigDict(env_prefix="AGORA_WHATSAPP_", env_file=".env", extra="ignore")

    roles: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Roles by sender (``+15551234567=admin|ops,...``); others get ``default_roles``."""
    default_roles: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["member"])
    allow_unknown: bool = True
    """Serve senders missing from ``roles``; False refuses them politely."""
    languages: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Language by sender (``+5511...=pt-BR``)."""

    _lists = field_validator("default_roles", mode="before")(comma_list)
    _maps = field_validator("roles", "languages", mode="before")(comma_map)


class TwilioOptions(BaseSettings):
    """WhatsApp through Twilio (``AGORA_TWILIO_*``). The channel is on when these say how to sign and send."""

    model_config = SettingsConfigDict(
        env_prefix="AGORA_TWILIO_", env_file=".env", extra="ignore", populate_by_name=True
    )

    account_sid: str | None = None
    auth_token: SecretStr | None = None
    from_: str | None = Field(default=None, validation_alias=_alias("FROM", "AGORA_WHATSAPP_FROM"))
    """``whatsapp:+E164``: the sender number (``AGORA_TWILIO_FROM`` or ``AGORA_WHATSAPP_FROM``)."""
    messaging_service_sid: str | None = Field(
        default=None, validation_alias=_alias("MESSAGING_SERVICE_SID", "AGORA_WHATSAPP_MESSAGING_SERVICE_SID")
    )
    approval_template_sid: str | None = Field(
        default=None, validation_alias=_alias("APPROVAL_TEMPLATE_SID", "AGORA_WHATSAPP_APPROVAL_TEMPLATE_SID")
    )
    """An approved template (``HX...``) for approvals outside the 24 h window."""
    shared_key: SecretStr | None = Field(
        default=None, validation_alias=_alias("SHARED_KEY", "AGORA_WHATSAPP_SHARED_KEY")
    )
    """The key of Twilio's HMAC-SHA256 webhook signing (``X-Twilio-Webhooks-Signature-Settings``)."""
    agent: str | None = None
    """The agent WhatsApp messages talk to (``AGORA_TWILIO_AGENT``; the gateway's default when unset)."""
    agents: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """The agent by business number a message was sent to (its ``To``), over ``agent``:
    ``AGORA_TWILIO_AGENTS='{"whatsapp:+15551230000": "billing"}'`` or ``+15551230000=billing,...``."""

    _agents = field_validator("agents", mode="before")(agent_map)

    def agent_for(self, to: str) -> str | None:
        """The agent of a message sent to ``to`` (``whatsapp:+E164``)."""
        return self.agents.get(to.strip().removeprefix("whatsapp:"), self.agent)

    def missing(self, *, has_client: bool = False) -> str | None:
        """Why the channel cannot run with these options, or ``None``."""
        if not (self.auth_token or self.shared_key):
            return "set AGORA_TWILIO_AUTH_TOKEN (or AGORA_TWILIO_SHARED_KEY) to check Twilio's signatures"
        if not (self.from_ or self.messaging_service_sid):
            return (
                "set AGORA_TWILIO_FROM or AGORA_WHATSAPP_FROM (whatsapp:+E164), or AGORA_TWILIO_MESSAGING_SERVICE_SID"
            )
        if not has_client and not (self.account_sid and self.auth_token):
            return "set AGORA_TWILIO_ACCOUNT_SID and AGORA_TWILIO_AUTH_TOKEN to send messages"
        return None

    @property
    def configured(self) -> bool:
        """Whether any Twilio credential is set (the composition root mounts the channel then)."""
        return bool(self.account_sid or self.auth_token or self.shared_key)
