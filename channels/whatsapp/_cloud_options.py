"""``WhatsAppCloudOptions``: the Cloud API channel's settings, from arguments or ``AGORA_WHATSAPP_CLOUD_*``."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["WhatsAppCloudOptions"]


class WhatsAppCloudOptions(BaseSettings):
    """Everything the WhatsApp Cloud API channel reads, once, at start-up.

    Each field may be passed as an argument or set as ``AGORA_WHATSAPP_CLOUD_<FIELD>``. The
    channel is on when ``access_token``, ``app_secret``, ``verify_token`` and
    ``phone_number_id`` are all set. Who the senders are (roles, languages) is
    ``WhatsAppSenderOptions`` (``AGORA_WHATSAPP_*``), shared with the Twilio provider.
    """

    model_config = SettingsConfigDict(env_prefix="AGORA_WHATSAPP_CLOUD_", env_file=".env", extra="ignore")

    access_token: SecretStr | None = None
    """A system-user access token with ``whatsapp_business_messaging``: sends as the number."""
    app_secret: SecretStr | None = None
    """The Meta app's secret: checks ``X-Hub-Signature-256`` on every notification."""
    verify_token: SecretStr | None = None
    """The token typed in the app dashboard's webhook settings: answers Meta's handshake."""
    phone_number_id: str | None = None
    """The business phone number's id (not the number): messages go from it, and only its
    notifications are read."""
    api_version: str = Field(default="v26.0", pattern=r"^v\d+\.\d+$")
    """The Graph API version in every path (v26.0 is the newest as of this writing)."""
    graph_base: str = "https://graph.facebook.com"
    approval_template: str | None = None
    """An approved template's name, for approvals outside the 24 h window: a body with one
    parameter (the title) and two quick-reply buttons (approve, reject)."""
    approval_template_language: str | None = None
    """The template's language code (``en_US``, ``pt_BR``); by default the sender's language
    with ``_`` (``pt-BR`` -> ``pt_BR``)."""
    key_prefix: str = Field(default="wac", pattern=r"^[a-z][a-z0-9-]{0,15}$")
    """Prefix of the channel's keys in the store's channel state."""
    agent: str | None = None
    """The agent messages to this phone number id talk to (the gateway's default when unset)."""

    @property
    def configured(self) -> bool:
        """Whether any Cloud API credential is set (the composition root mounts the channel then)."""
        return bool(self.access_token or self.app_secret or self.verify_token or self.phone_number_id)

    @property
    def disabled_reason(self) -> str | None:
        """Which settings are missing for the channel to run, or ``None`` when it can."""
        present = {
            "ACCESS_TOKEN": self.access_token,
            "APP_SECRET": self.app_secret,
            "VERIFY_TOKEN": self.verify_token,
            "PHONE_NUMBER_ID": self.phone_number_id,
        }
        missing = [f"AGORA_WHATSAPP_CLOUD_{name}" for name, value in present.items() if not value]
        return f"set {', '.join(missing)}" if missing else None
