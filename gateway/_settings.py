"""``Settings``: the gateway's configuration, from arguments, ``AGORA_*`` variables or ``.env``."""

from __future__ import annotations

import logging
import re
import secrets
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ._pricing import ModelPrice, parse_pricing
from ._quotas import Quota
from ._store_url import REDIS_SCHEMES, parse_store_url

__all__ = ["Settings", "comma_list", "comma_map"]

logger = logging.getLogger("gateway.settings")

MIN_SECRET_BYTES = 16
"""A shorter secret is refused: it signs cookies, tokens and media URLs."""

_PLACEHOLDER = re.compile(r"^\s*(change|replace)[-_ ]?me", re.IGNORECASE)


def comma_list(value: Any) -> Any:
    """``"a, b,c"`` -> ``["a", "b", "c"]`` (a ``mode="before"`` validator of list settings)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def comma_map(value: Any) -> Any:
    """``"+1555=admin|ops,+1666=member"`` -> ``{"+1555": ["admin", "ops"], ...}`` (a ``mode="before"`` validator)."""
    if isinstance(value, str):
        out: dict[str, Any] = {}
        for item in value.split(","):
            if "=" in item:
                key, _, rest = item.partition("=")
                out[key.strip()] = [r.strip() for r in rest.split("|") if r.strip()]
        return out
    return value


class Settings(BaseSettings):
    """Everything the gateway reads from its environment, once, at start-up.

    Every field may be passed as an argument or set as ``AGORA_<FIELD>`` (upper case) in the
    environment or a ``.env`` file. With nothing set, the gateway runs embedded: the offline demo
    model on http://127.0.0.1:8000/ and, in code (``create_app(Settings())``), an in-process memory
    store; ``agora-gateway serve`` keeps its store in ``./.agora/agora.db`` (SQLite) instead.
    """

    # A refused value is never repeated in the error (a store URL holds its password, a secret is one).
    model_config = SettingsConfigDict(env_prefix="AGORA_", env_file=".env", extra="ignore", hide_input_in_errors=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    public_base_url: str | None = None
    """The URL people and providers (Twilio, Telegram, Meta) reach this gateway at
    (``https://chat.example.com``); media links and webhook signatures are built from it.
    Defaults to ``http://<host>:<port>``."""
    store_url: str | None = None
    """Where threads, runs, approvals and media live: ``memory://``, ``sqlite:///relative.db``
    (``sqlite:////absolute.db``), ``postgresql://...`` or ``redis://...`` (``rediss://``,
    ``unix://``, ``redis+sentinel://``, ``redis+cluster://``). Unset: ``serve`` uses ``sqlite:///.agora/agora.db``,
    ``create_app`` in code an in-process memory store."""
    redis_url: str | None = None
    """A Redis URL: the older name of ``AGORA_STORE_URL`` (``store_url``), which wins when both are set."""
    model: str = "demo"
    """``demo`` (offline, rule-based), ``openai:<model>`` (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``) or
    ``anthropic:<model>`` (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``)."""
    secret: SecretStr | None = None
    """Signs cookies, actor tokens, confirm tokens and media URLs. Set it for more than one
    process; a random one is made per process otherwise."""
    app: str | None = None
    """The app to serve, ``pkg.module:attribute`` naming a ``gateway.Gateway`` (``--app``)."""
    tools_path: str | None = None
    """A folder or package of your tools, discovered at start-up (beside an app's, if any).
    Alone, it serves those tools without the demo's."""
    demo: bool = False
    """Serve the offline demo's tools, page and card (beside an app or ``tools_path``, if any);
    what ``serve`` does when neither is given."""
    trusted_headers: bool = False
    """Trust ``X-Actor-Id`` / ``X-Actor-Roles`` / ``X-Tenant-Ref`` (only behind a proxy that sets them)."""
    trust_forwarded: bool = False
    """Trust ``X-Forwarded-Proto`` / ``X-Forwarded-Host`` and the last ``X-Forwarded-For`` hop
    (only behind a proxy that sets them)."""
    token_audience: str | None = None
    """When set, an actor token's ``aud`` must name it (``sign_actor_token(..., audience=)``); a
    token with an ``aud`` is refused when it is not set."""
    token_issuer: str | None = None
    """When set, an actor token's ``iss`` must be it (``sign_actor_token(..., issuer=)``)."""
    token_leeway: float = Field(default=0.0, ge=0, le=300, allow_inf_nan=False)
    """Seconds of clock skew allowed on an actor token's ``exp``, ``nbf`` and ``iat``."""
    oidc_jwks_url: str | None = None
    """An identity provider's JWKS URL: its RS256 / ES256 bearer tokens are accepted beside the
    gateway's own (``gateway.OidcResolver``); needs ``oidc_issuer`` and ``oidc_audience``."""
    oidc_issuer: str | None = None
    """The ``iss`` the identity provider's tokens carry."""
    oidc_audience: str | None = None
    """The ``aud`` the identity provider's tokens must name (this gateway's client id)."""
    oidc_roles_claim: str = "roles"
    """The claim of a provider's token that holds the actor's roles (a list or a space-separated string)."""
    oidc_tenant_claim: str | None = None
    """The claim of a provider's token that holds the actor's tenant; unset: no tenant."""
    anonymous: bool = True
    """Give visitors without a token an anonymous identity (a signed cookie)."""
    turn_rate_per_minute: float = Field(default=30.0, gt=0)
    """Turns one actor may start per minute (a burst of ``turn_burst`` is allowed)."""
    turn_burst: int = Field(default=10, ge=1)
    read_timeout: float = Field(default=5.0, gt=0)
    """Seconds a client has to send a request's headers (from connecting, or from the previous
    answer on a kept-alive connection: an idle connection closes after it too), and as many again
    for its body (an upload, ``POST /agent/attachments``, has the largest file's time at 64 KiB/s
    more). A client still sending when it runs out is cut (a late body answers 408)."""
    max_connections_per_address: int = Field(default=128, ge=1)
    """Connections one address may hold open at once, web sockets included; more are answered 429
    and closed. With ``trust_forwarded``: requests in flight (a web socket is one for its whole
    life) per forwarded address, since every connection comes from the proxy."""
    metrics_token: SecretStr | None = None
    """When set, ``GET /metrics`` wants ``Authorization: Bearer <token>`` (401 otherwise)."""
    media_ttl: int = Field(default=3600, ge=60)
    """Seconds a rendered media URL stays valid."""
    lease_ttl: float = Field(default=15.0, gt=0)
    retention_days: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Erase conversations nobody wrote to for this many days (fractions allowed), in the
    background, never one with a run running or waiting for an approval. None: keep them."""

    guard_max_input_chars: int | None = Field(default=None, ge=1)
    """Refuse a person's message longer than this (``gateway.MaxInputLength`` on every agent)."""
    guard_blocked_patterns: list[str] = Field(default_factory=list)
    """Regular expressions (a JSON list) a person's message and the model's text must not match
    (``gateway.BlockedPatterns`` on every agent, case-insensitive)."""
    redact_pii: bool = False
    """Redact e-mail addresses, phone numbers and card numbers in what reaches the model
    (``gateway.PiiRedactor`` on every agent's input) and in log lines (``configure_logging``)."""
    pricing: Annotated[dict[str, ModelPrice] | None, NoDecode] = None
    """Prices of models by ``Model.name``, US dollars per million tokens: JSON
    (``{"openai:gpt-4o": {"input": 2.5, "output": 10}}``) or the path of a JSON file. Unset: no
    model is priced and every ``cost_usd`` is null (unknown, never 0)."""
    quota_day: int | None = Field(default=None, ge=1)
    """Tokens (input plus output) one actor may use per UTC day, across agents and processes, with
    agents that declare no ``Agent(quota=...)``. Unset: no daily budget."""
    quota_month: int | None = Field(default=None, ge=1)
    """Tokens one actor may use per UTC month, as ``quota_day``. Unset: no monthly budget."""
    quota_warn_at: float = Field(default=0.8, gt=0, le=1, allow_inf_nan=False)
    """The share of a budget from which a run warns (``quota-warning``, once per run)."""
    admin_role: str | None = "admin"
    """The role that may read everyone's usage (``GET /agent/usage?actor=``); empty: nobody."""

    attachment_types: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"]
    )
    """Media types people may attach (comma-separated), checked against the file's own bytes:
    ``image/png``, ``image/jpeg``, ``image/gif``, ``image/webp`` and ``application/pdf`` are
    recognised. Empty: attachments are refused."""
    attachment_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=64 * 1024 * 1024)
    """Largest attachment, in bytes (an upload or a provider's media; at most 64 MiB)."""

    @field_validator("attachment_types", mode="before")
    @classmethod
    def _attachment_types(cls, value: Any) -> Any:
        value = comma_list(value)
        if isinstance(value, list):
            return [str(item).strip().lower() for item in value]
        return value

    @field_validator("pricing", mode="before")
    @classmethod
    def _pricing(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, dict) and all(isinstance(v, ModelPrice) for v in value.values()):
            return value
        return parse_pricing(value)  # a ValueError says what is wrong

    def default_quota(self) -> Quota | None:
        """The quota of agents without their own (``quota_day`` / ``quota_month``), or ``None``."""
        if self.quota_day is None and self.quota_month is None:
            return None
        return Quota(day=self.quota_day, month=self.quota_month, warn_at=self.quota_warn_at)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, secret: SecretStr | None) -> SecretStr | None:
        if secret is not None and len(secret.get_secret_value().encode("utf-8")) < MIN_SECRET_BYTES:
            raise ValueError(f"must be at least {MIN_SECRET_BYTES} bytes (make one with: openssl rand -hex 32)")
        if secret is not None and _PLACEHOLDER.match(secret.get_secret_value()):
            # A value copied from an example is known to everyone who has the example: anyone
            # could sign a token for any actor (the first starters wrote "change-me-to-a-long-random-string").
            raise ValueError("is a placeholder from an example; make one with: openssl rand -hex 32")
        return secret

    @field_validator("store_url", "redis_url")
    @classmethod
    def _store_url(cls, url: str | None, info: ValidationInfo) -> str | None:
        if url is None or not url.strip():
            return None  # "AGORA_STORE_URL=" in a .env: not set
        location = parse_store_url(url)  # a ValueError names the accepted schemes
        if info.field_name == "redis_url" and location.kind != "redis":
            raise ValueError(f"names a Redis URL only ({', '.join(REDIS_SCHEMES)}); set AGORA_STORE_URL instead")
        return url

    @field_validator(
        "token_audience",
        "token_issuer",
        "oidc_jwks_url",
        "oidc_issuer",
        "oidc_audience",
        "oidc_tenant_claim",
        "admin_role",
    )
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _defaults(self) -> Settings:
        oidc = {
            "oidc_jwks_url": self.oidc_jwks_url,
            "oidc_issuer": self.oidc_issuer,
            "oidc_audience": self.oidc_audience,
        }
        if any(oidc.values()) and not all(oidc.values()):
            missing = ", ".join(f"AGORA_{name.upper()}" for name, value in oidc.items() if not value)
            raise ValueError(f"an identity provider needs AGORA_OIDC_JWKS_URL, _ISSUER and _AUDIENCE: set {missing}")
        if self.oidc_jwks_url and not self.oidc_jwks_url.startswith(("https://", "http://")):
            raise ValueError("oidc_jwks_url must be an http(s) URL")
        if self.public_base_url:
            self.public_base_url = self.public_base_url.rstrip("/")
        return self

    def secret_bytes(self) -> bytes:
        """The signing secret; made once per process (and logged as such) when not configured."""
        if self.secret is None:
            logger.warning("AGORA_SECRET is not set: using a random per-process secret (fine for one process)")
            self.secret = SecretStr(secrets.token_urlsafe(32))
        return self.secret.get_secret_value().encode("utf-8")

    def resolved_store_url(self) -> str:
        """The store this configuration names: ``store_url``, else ``redis_url``, else ``memory://``."""
        return self.store_url or self.redis_url or "memory://"

    def base_url(self) -> str:
        """The public base URL (``public_base_url``, else ``listen_url()``)."""
        return self.public_base_url or self.listen_url()

    def listen_url(self) -> str:
        """Where this process listens, as a URL (``0.0.0.0`` and ``::`` read as ``127.0.0.1``)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"
