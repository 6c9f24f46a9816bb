"""``WebOptions``: the web socket's own settings (``AGORA_WS_*`` and ``AGORA_ALLOWED_ORIGINS``)."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gateway import comma_list

__all__ = ["WEB_OPTIONS", "WebOptions"]


class WebOptions(BaseSettings):
    """Limits and origins of the widget's web socket, read from ``AGORA_WS_*`` (and ``.env``)."""

    model_config = SettingsConfigDict(env_prefix="AGORA_WS_", env_file=".env", extra="ignore", populate_by_name=True)

    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("AGORA_ALLOWED_ORIGINS", "AGORA_WS_ALLOWED_ORIGINS"),
    )
    """Origins (``https://app.example.com``) allowed to open the web socket besides our own."""
    frame_limit: int = Field(default=64 * 1024, ge=1024)
    """Bytes in one web-socket frame; larger frames are refused with an ``error`` frame."""
    send_timeout: float = Field(default=10.0, gt=0)
    """A client that cannot take a frame for this long is disconnected (it may reconnect and replay)."""
    heartbeat: float = Field(default=25.0, gt=0)
    """Seconds between pings."""
    batch_window: float = Field(default=0.016, ge=0, le=1.0)
    """Seconds a text delta waits to share a ``batch`` frame with the next ones (clients that ask)."""

    _lists = field_validator("allowed_origins", mode="before")(comma_list)


WEB_OPTIONS = web.AppKey("agora_web_options", WebOptions)
"""The web channel's options on its app."""
