"""``OidcResolver``: actors from an identity provider's tokens (RS256 / ES256), checked against its JWKS.

The provider's keys are fetched from its JWKS URL (aiohttp), kept ``cache_ttl`` seconds, fetched
again then, and at once when a token names a key id the set does not hold (a rotation), at most
once per ``refresh_interval``. While the endpoint is down the keys fetched before keep working up
to ``max_stale`` seconds after their fetch; with no keys at all a token is answered 503
(``IdentityUnavailableError``), never let through.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt
from aiohttp import web

from tools import Actor, UserError

from ._errors import IdentityUnavailableError, InvalidTokenError
from ._identity import DECODE_FAILURES, UNSUPPORTED_ALGORITHM, actor_from_claims, bearer_token, check_times, token_error

__all__ = ["OidcResolver"]

logger = logging.getLogger("gateway.identity")

_MAX_TOKEN = 8192
_MAX_JWKS = 1024 * 1024
_FAMILIES = {"RS": "RSA", "PS": "RSA", "ES": "EC"}
"""Asymmetric algorithms only, by prefix, and the key type each wants (never ``oct``: key confusion)."""


@dataclass(frozen=True)
class _Key:
    kty: str
    key: Any


@dataclass(frozen=True)
class _KeySet:
    keys: dict[str | None, _Key]
    fetched_at: float


class OidcResolver:
    """Verifies an identity provider's bearer tokens (``Authorization: Bearer`` or ``?token=``).

    An ``ActorResolver``: pass it as the app's ``identity`` (alone, or before an
    ``AnonymousCookieResolver``) and every channel that takes a bearer token accepts the
    provider's tokens. The actor's id is ``sub``, its roles ``roles_claim`` (a list or a
    space-separated string), its tenant ``tenant_claim``.

    Args:
        jwks_url: The provider's JWKS document (``https://idp.example.com/.well-known/jwks.json``).
        issuer: The ``iss`` every token must carry (required).
        audience: The ``aud`` a token must name (required; several accepted values as a list).
        roles_claim: The claim holding the actor's roles.
        tenant_claim: The claim holding the actor's tenant; ``None``: no tenant.
        algorithms: The accepted signature algorithms (asymmetric only: ``HS*`` and ``none`` refused).
        leeway: Seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
        cache_ttl: Seconds fetched keys are used before they are fetched again.
        max_stale: Seconds after their fetch keys keep working while the JWKS cannot be fetched.
        refresh_interval: The least seconds between two fetches (an unknown ``kid`` or a failure).
        timeout: Seconds one fetch may take.
    """

    def __init__(
        self,
        jwks_url: str,
        issuer: str,
        audience: str | Sequence[str],
        *,
        roles_claim: str = "roles",
        tenant_claim: str | None = None,
        algorithms: Sequence[str] = ("RS256", "ES256"),
        leeway: float = 30.0,
        cache_ttl: float = 300.0,
        max_stale: float = 3600.0,
        refresh_interval: float = 10.0,
        timeout: float = 5.0,
    ) -> None:
        if not isinstance(jwks_url, str) or not jwks_url.startswith(("https://", "http://")):
            raise UserError("OidcResolver needs the JWKS URL (https://...)")
        if not isinstance(issuer, str) or not issuer.strip():
            raise UserError("OidcResolver needs the issuer its tokens carry (iss)")
        audiences = [audience] if isinstance(audience, str) else list(audience)
        if not audiences or not all(isinstance(a, str) and a.strip() for a in audiences):
            raise UserError("OidcResolver needs the audience its tokens name (aud)")
        chosen = list(algorithms)
        if not chosen or any(_FAMILIES.get(str(a)[:2]) is None for a in chosen):
            raise UserError(f"OidcResolver(algorithms=) takes RS*, PS* and ES* algorithms only, not {chosen!r}")
        for name, value in (
            ("leeway", leeway),
            ("cache_ttl", cache_ttl),
            ("max_stale", max_stale),
            ("refresh_interval", refresh_interval),
            ("timeout", timeout),
        ):
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise UserError(f"OidcResolver({name}=) must be a finite number of seconds, 0 or more")
        self.jwks_url = jwks_url
        self.issuer = issuer
        self.audience = audiences
        self.roles_claim = roles_claim
        self.tenant_claim = tenant_claim
        self.algorithms = tuple(chosen)
        self.leeway = float(leeway)
        self.cache_ttl = float(cache_ttl)
        self.max_stale = max(float(max_stale), float(cache_ttl))
        self.refresh_interval = float(refresh_interval)
        self.timeout = float(timeout)
        self._keys: _KeySet | None = None
        self._tried_at = -math.inf
        self._failure = "never fetched"
        self._lock = asyncio.Lock()

    async def resolve(self, request: web.Request) -> Actor | None:
        """The token's actor; ``None`` without a token.

        Raises:
            InvalidTokenError: A bad token (401).
            IdentityUnavailableError: No provider keys to check it with (503).
        """
        token = bearer_token(request)
        return None if token is None else await self.verify_token(token)

    async def verify_token(self, token: str) -> Actor:
        """The actor of a provider's token.

        Raises:
            InvalidTokenError: Malformed, an algorithm not accepted (``none``, ``HS256``: key
                confusion), an unknown ``kid``, a bad signature, expired, not valid yet, for
                another audience or from another issuer, no ``sub``, or claims no actor can have.
            IdentityUnavailableError: The JWKS cannot be fetched and no keys are kept (503).
        """
        if not isinstance(token, str) or len(token) > _MAX_TOKEN or token.count(".") != 2:
            raise InvalidTokenError("Malformed token")
        try:
            header = jwt.get_unverified_header(token)
        except DECODE_FAILURES:
            raise InvalidTokenError("Malformed token") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidTokenError(UNSUPPORTED_ALGORITHM)
        if kid is not None and not isinstance(kid, str):
            raise InvalidTokenError("Malformed token")
        key = await self._key_for(kid)
        if key.kty != _FAMILIES[alg[:2]]:
            raise InvalidTokenError(UNSUPPORTED_ALGORITHM)  # an EC key named by an RS256 token
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                # The times against time.time(), the gateway's one clock, as actor tokens' are.
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
            check_times(claims, time.time(), self.leeway)
        except DECODE_FAILURES as exc:
            raise token_error(exc) from None
        if not isinstance(claims.get("sub"), str):
            raise InvalidTokenError("Token claims are invalid (sub: not text)")
        return actor_from_claims(
            claims, id_claims=("sub",), roles_claim=self.roles_claim, tenant_claim=self.tenant_claim
        )

    # -- keys ---------------------------------------------------------------------------------------

    def _usable(self, now: float) -> _KeySet | None:
        keys = self._keys
        if keys is not None and now - keys.fetched_at >= self.max_stale:
            self._keys = keys = None  # expired: never trusted past max_stale
        return keys

    async def _key_for(self, kid: str | None) -> _Key:
        now = time.monotonic()
        keys = self._usable(now)
        stale = keys is None or now - keys.fetched_at >= self.cache_ttl
        if stale or _pick(keys, kid) is None:
            await self._refresh()
            keys = self._usable(time.monotonic())
        if keys is None:
            raise IdentityUnavailableError(
                f"The identity provider's keys cannot be fetched from {self.jwks_url} ({self._failure})"
            )
        key = _pick(keys, kid)
        if key is None:
            raise InvalidTokenError("Token names an unknown key (kid)")
        return key

    async def _refresh(self) -> None:
        """Fetch the JWKS again, unless one was tried within ``refresh_interval`` (one at a time)."""
        async with self._lock:
            if time.monotonic() - self._tried_at < self.refresh_interval:
                return
            self._tried_at = time.monotonic()
            try:
                keys = await self._fetch()
            except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
                self._failure = str(exc) or type(exc).__name__
                kept = "keeping the keys fetched before" if self._keys is not None else "no keys to check tokens with"
                logger.warning("JWKS fetch from %s failed: %.200s; %s", self.jwks_url, self._failure, kept)
                return
            self._keys = _KeySet(keys, time.monotonic())

    async def _fetch(self) -> dict[str | None, _Key]:
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(self.jwks_url) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            body = await response.content.read(_MAX_JWKS + 1)
        if len(body) > _MAX_JWKS:
            raise ValueError("the JWKS is larger than 1 MiB")
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise ValueError("the JWKS is not JSON") from None
        entries = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(entries, list):
            raise ValueError("the JWKS has no keys list")
        keys: dict[str | None, _Key] = {}
        for entry in entries:
            key = _read_key(entry)
            if key is not None:
                keys[entry.get("kid") if isinstance(entry.get("kid"), str) else None] = key
        if not keys:
            raise ValueError("the JWKS holds no RSA or EC signing key")
        return keys


def _read_key(entry: Any) -> _Key | None:
    """One JWK as a public key; ``None`` for what is not an RSA or EC signing key (``oct`` included)."""
    if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC"):
        return None
    if entry.get("use") not in (None, "sig"):
        return None
    public = {k: v for k, v in entry.items() if k not in ("d", "p", "q", "dp", "dq", "qi", "oth")}
    try:
        return _Key(entry["kty"], jwt.PyJWK(public).key)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
        return None


def _pick(keys: _KeySet | None, kid: str | None) -> _Key | None:
    """The key ``kid`` names; without a ``kid``, the set's only key."""
    if keys is None:
        return None
    if kid is None:
        return next(iter(keys.keys.values())) if len(keys.keys) == 1 else None
    return keys.keys.get(kid)
