"""``TelegramOptions``: the Telegram channel's configuration, from arguments or ``AGORA_TELEGRAM_*``."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gateway import comma_list, comma_map

__all__ = ["TelegramOptions"]

_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_BOT_TOKEN = re.compile(r"\d{1,20}:[A-Za-z0-9_-]{20,200}")


class TelegramOptions(BaseSettings):
    """What the Telegram channel reads, once, at start-up.

    Every field may be passed as an argument or set as ``AGORA_TELEGRAM_<FIELD>`` in the
    environment or a ``.env`` file (``TelegramOptions(_env_file=None)`` reads no file). The channel
    is on when ``bot_token`` and ``webhook_secret`` are both set.
    """

    model_config = SettingsConfigDict(env_prefix="AGORA_TELEGRAM_", env_file=".env", extra="ignore")

    bot_token: SecretStr | None = None
    """The token @BotFather gave (``123456:ABC-...``). It is in every Bot API URL: never logged."""
    webhook_secret: SecretStr | None = Field(default=None)
    """Sent by Telegram in ``X-Telegram-Bot-Api-Secret-Token`` with every update (1-256 of
    ``A-Za-z0-9_-``); ``setWebhook`` registers it."""
    api_base: str = "https://api.telegram.org"
    """Where the Bot API answers (a local Bot API server, or a test's recorder)."""
    bot_username: str | None = None
    """The bot's @username (without ``@``), for recognising mentions in groups; read with
    ``getMe`` at start when not set."""
    roles: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Roles by Telegram user id (``123=admin|ops,456=member``); others get ``default_roles``."""
    default_roles: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["member"])
    allow_unknown: bool = True
    """Serve users missing from ``roles``; False refuses them politely (once an hour)."""
    languages: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Language by user id (``123=pt-BR``); else the user's ``language_code`` (``pt*`` reads
    pt-BR), else English."""

    agent: str | None = None
    """The agent the bot's chats talk to (the gateway's default when unset)."""

    _split_lists = field_validator("default_roles", mode="before")(comma_list)
    _split_maps = field_validator("roles", "languages", mode="before")(comma_map)

    @field_validator("webhook_secret")
    @classmethod
    def _secret_shape(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and not _SECRET_TOKEN.fullmatch(secret.get_secret_value()):
            raise ValueError("must be 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's secret_token)")
        return secret

    @field_validator("bot_token")
    @classmethod
    def _token_shape(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and not _BOT_TOKEN.fullmatch(token.get_secret_value()):
            raise ValueError("must look like 123456789:AA... (the token @BotFather gave)")
        return token

    @field_validator("bot_username")
    @classmethod
    def _trim(cls, value: str | None) -> str | None:
        return value.strip().removeprefix("@") or None if value else None

    @field_validator("api_base")
    @classmethod
    def _base(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL (https://api.telegram.org)")
        return value

    @property
    def configured(self) -> bool:
        """Whether any Telegram credential is set (the composition root mounts the channel then)."""
        return self.bot_token is not None or self.webhook_secret is not None

    @property
    def disabled_reason(self) -> str | None:
        """Why the channel is off (a variable to set), or ``None`` when it is configured."""
        missing = [
            f"AGORA_TELEGRAM_{name.upper()}" for name in ("bot_token", "webhook_secret") if getattr(self, name) is None
        ]
        return f"Telegram is not configured: set {' and '.join(missing)}" if missing else None

    @property
    def bot_id(self) -> int | None:
        """The bot's own user id: the token's first part (replies to it address the bot)."""
        if self.bot_token is None:
            return None
        return int(self.bot_token.get_secret_value().partition(":")[0])
