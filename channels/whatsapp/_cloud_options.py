"""``WhatsAppCloudOptions``: the Cloud API channel's settings, from arguments or ``AGORA_WHATSAPP_CLOUD_*``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["WhatsAppCloudOptions"]


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _pairs(value: Any) -> Any:
    """``"+1555=admin|ops,+1666=member"`` -> ``{"+1555": ["admin", "ops"], ...}``."""
    if isinstance(value, str):
        out: dict[str, Any] = {}
        for item in value.split(","):
            if "=" in item:
                key, _, rest = item.partition("=")
                out[key.strip()] = [r.strip() for r in rest.split("|") if r.strip()]
        return out
    return value


class WhatsAppCloudOptions(BaseSettings):
    """Everything the WhatsApp Cloud API channel reads, once, at start-up.

    Each field may be passed as an argument or set as ``AGORA_WHATSAPP_CLOUD_<FIELD>``. The
    channel is on when ``access_token``, ``app_secret``, ``verify_token`` and
    ``phone_number_id`` are all set.
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
    roles: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Roles by sender (``+15551234567=admin|ops,...``); others get ``default_roles``."""
    default_roles: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["member"])
    allow_unknown: bool = True
    """Serve senders missing from ``roles``; False refuses them politely."""
    languages: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Language by sender (``+5511...=pt-BR``)."""
    key_prefix: str = Field(default="wac", pattern=r"^[a-z][a-z0-9-]{0,15}$")
    """Prefix of the channel's keys in the store's channel state."""

    _split_lists = field_validator("default_roles", mode="before")(_split)
    _split_maps = field_validator("roles", "languages", mode="before")(_pairs)

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
