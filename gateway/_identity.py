"""Who is talking: actor resolvers and the signed actor tokens apps give their users.

An actor token is a JWT (HS256, verified by PyJWT) whose claims are ``id`` (or ``sub``),
``roles``, ``tenant``, ``exp`` and, when present, ``nbf``, ``iat``, ``aud`` and ``iss``, so an app
may sign it with ``sign_actor_token`` or any JWT library. Tokens of an identity provider (RS256,
ES256 against its JWKS) are ``gateway._oidc.OidcResolver``'s.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
import secrets
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import jwt
from aiohttp import web
from pydantic import SecretStr, ValidationError

from tools import Actor, UserError

from ._errors import InvalidTokenError

__all__ = [
    "ANON_COOKIE",
    "ActorResolver",
    "AnonymousCookieResolver",
    "ChainResolver",
    "InvalidTokenError",
    "SignedTokenResolver",
    "TrustedHeaderResolver",
    "sign_actor_token",
    "verify_actor_token",
]

ANON_COOKIE = "agora_anon"
_PENDING_COOKIE = web.RequestKey("agora_pending_cookie", str)
_MAX_TOKEN = 4096

ANONYMOUS_PREFIX = "anon:"
"""Ids of anonymous visitors (``anon:<cookie>``): no signed token may claim one."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


HS256 = "HS256"
UNSUPPORTED_ALGORITHM = "Unsupported token algorithm"
"""What a resolver says of a token signed for another one (an RS256 token to the HS256 check)."""


def _key(secret: str | bytes | SecretStr) -> bytes:
    if isinstance(secret, SecretStr):
        secret = secret.get_secret_value()
    if not isinstance(secret, str | bytes) or not secret:
        raise UserError("an actor token needs a non-empty secret (str, bytes or SecretStr)")
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def _first_error(exc: ValidationError) -> str:
    """The first problem of an actor's claims, named by claim, without echoing the value."""
    error = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"]) or "actor"
    return f"{where}: {error['msg']}"


@contextmanager
def _quiet_key_length() -> Iterator[None]:
    """PyJWT warns under 32 bytes of HMAC key; ``Settings`` already refuses fewer than 16."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
        yield


def sign_actor_token(
    actor: Actor,
    secret: str | bytes | SecretStr,
    ttl: float = 3600,
    *,
    audience: str | None = None,
    issuer: str | None = None,
) -> str:
    """A signed token for ``actor`` that expires in ``ttl`` seconds (a JWT, HS256, made by PyJWT).

    Its claims are ``id``, ``roles``, ``tenant``, ``iat``, ``nbf`` and ``exp`` (and ``aud`` /
    ``iss`` when given: a resolver configured with an audience or issuer wants them). Give it to
    the widget (``<agora-chat token="...">``) or send it as ``Authorization: Bearer``.
    """
    if not isinstance(actor, Actor):
        raise UserError("sign_actor_token() needs an Actor")
    try:  # an Actor built without validation (model_construct) would sign what no resolver accepts
        Actor.model_validate(actor.model_dump())
    except ValidationError as exc:
        raise UserError(f"sign_actor_token(): not a valid actor ({_first_error(exc)})") from None
    if actor.id.startswith(ANONYMOUS_PREFIX):
        raise UserError(
            f"sign_actor_token(): ids starting with {ANONYMOUS_PREFIX!r} are the gateway's anonymous visitors"
        )
    key = _key(secret)
    if ttl <= 0:
        raise UserError("sign_actor_token() needs a positive ttl")
    now = int(time.time())
    claims: dict[str, Any] = {
        "id": actor.id,
        "roles": list(actor.roles),
        "tenant": actor.tenant_ref,
        "iat": now,
        "nbf": now,
        "exp": int(time.time() + ttl),
    }
    if audience is not None:
        claims["aud"] = audience
    if issuer is not None:
        claims["iss"] = issuer
    with _quiet_key_length():
        return jwt.encode(claims, key, algorithm=HS256)


def token_error(exc: Exception) -> InvalidTokenError:
    """What a refused token says, from PyJWT's (or a hostile payload's) exception; never its value."""
    match exc:
        case jwt.ExpiredSignatureError():
            return InvalidTokenError("Token expired")
        case jwt.ImmatureSignatureError():
            return InvalidTokenError("Token not valid yet")
        case jwt.InvalidAudienceError():
            return InvalidTokenError("Token is for another audience")
        case jwt.InvalidIssuerError():
            return InvalidTokenError("Token is from another issuer")
        case jwt.InvalidAlgorithmError():
            return InvalidTokenError(UNSUPPORTED_ALGORITHM)
        case jwt.InvalidSignatureError():
            return InvalidTokenError("Bad token signature")
        case jwt.MissingRequiredClaimError(claim="exp"):
            return InvalidTokenError("Token has no expiry")
        case jwt.MissingRequiredClaimError():
            return InvalidTokenError(f"Token has no {exc.claim} claim")
    return InvalidTokenError("Malformed token")


DECODE_FAILURES = (jwt.InvalidTokenError, ValueError, TypeError, OverflowError, RecursionError, KeyError)
"""What decoding a hostile token may raise: an ``exp`` of ``1e999`` overflows, deep nesting recurses."""


def check_times(claims: dict[str, Any], now: float, leeway: float) -> None:
    """``exp`` (required), ``nbf`` and ``iat`` against ``now``, as PyJWT checks them.

    Raises:
        InvalidTokenError: Missing, not a finite number, expired, or not valid yet.
    """
    for name in ("exp", "nbf", "iat"):
        value = claims.get(name)
        if value is None and name != "exp":
            continue
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise InvalidTokenError("Token has no expiry" if name == "exp" and value is None else "Malformed token")
    if now >= claims["exp"] + leeway:
        raise InvalidTokenError("Token expired")
    if "nbf" in claims and now < claims["nbf"] - leeway:
        raise InvalidTokenError("Token not valid yet")
    if "iat" in claims and now < claims["iat"] - leeway:
        raise InvalidTokenError("Token not valid yet")


def actor_from_claims(
    claims: dict[str, Any], *, id_claims: Sequence[str], roles_claim: str, tenant_claim: str | None
) -> Actor:
    """The ``Actor`` a verified token's claims name.

    Roles are a list of strings or one space-separated string (``"scope"`` style).

    Raises:
        InvalidTokenError: An id, role or tenant that cannot be (control characters, lone
            surrogates, over 256 characters, not text), or an anonymous id.
    """
    actor_id = next((claims[name] for name in id_claims if claims.get(name)), None)
    roles = claims.get(roles_claim) or []
    if isinstance(roles, str):
        roles = roles.split()
    tenant = claims.get(tenant_claim) if tenant_claim else None
    try:
        actor = Actor(id=actor_id, roles=roles, tenant_ref=tenant)
    except ValidationError as exc:
        raise InvalidTokenError(f"Token claims are invalid ({_first_error(exc)})") from None
    if actor.id.startswith(ANONYMOUS_PREFIX):  # signed elsewhere: anonymous ids are the cookie's alone
        raise InvalidTokenError("Token claims are invalid")
    return actor


def verify_actor_token(
    token: str,
    secret: str | bytes | SecretStr,
    *,
    now: float | None = None,
    audience: str | Sequence[str] | None = None,
    issuer: str | None = None,
    leeway: float = 0.0,
) -> Actor:
    """The actor a token speaks for (verified by PyJWT: HS256 only).

    ``exp`` is required; ``nbf`` and ``iat`` are checked when present, ``leeway`` seconds of
    clock skew allowed. A token with an ``aud`` is refused unless ``audience`` names it; with
    ``issuer`` given, ``iss`` must be it. ``now`` (seconds) checks the times at another moment.

    Raises:
        InvalidTokenError: Malformed, not HS256 (``alg: none`` included), forged, without a
            finite ``exp``, expired, before its ``nbf``, for another audience or issuer, or
            naming an actor that cannot be (an id or tenant with control characters or lone
            surrogates, longer than 256 characters, not a string, an anonymous id).
    """
    if not isinstance(token, str) or len(token) > _MAX_TOKEN or token.count(".") != 2:
        raise InvalidTokenError("Malformed token")
    key = _key(secret)
    # PyJWT checks the signature, the algorithm, aud and iss; the times are checked here against
    # time.time(), the clock sign_actor_token and the rest of the gateway read (PyJWT reads datetime's).
    options = {"require": ["exp"], "verify_exp": False, "verify_nbf": False, "verify_iat": False}
    try:
        with _quiet_key_length():
            claims = jwt.decode(
                token,
                key,
                algorithms=[HS256],
                audience=audience,
                issuer=issuer,
                leeway=leeway,
                options=options,  # type: ignore[arg-type]
            )
        check_times(claims, time.time() if now is None else now, leeway)
    except InvalidTokenError:
        raise
    except DECODE_FAILURES as exc:
        raise token_error(exc) from None
    if not isinstance(claims, dict):
        raise InvalidTokenError("Malformed token")
    return actor_from_claims(claims, id_claims=("id", "sub"), roles_claim="roles", tenant_claim="tenant")


def bearer_token(request: web.Request) -> str | None:
    """The token of ``Authorization: Bearer`` or the ``token`` query parameter; ``None`` without one.

    Raises:
        InvalidTokenError: A credential sent empty (an unset ``$TOKEN`` in a script) is a failed
            sign-in, never a visitor.
    """
    auth = request.headers.get("Authorization", "")
    bearer = auth[:7].lower() == "bearer " or auth.strip().lower() == "bearer"
    token = auth[7:].strip() if bearer else request.query.get("token")
    if not token:
        if bearer or "token" in request.query:
            raise InvalidTokenError("The actor token is empty")
        return None
    return token


@runtime_checkable
class ActorResolver(Protocol):
    """Resolves the actor of an HTTP request (or web-socket upgrade); ``None`` when it cannot."""

    async def resolve(self, request: web.Request) -> Actor | None:
        """The actor, ``None`` to let the next resolver try.

        Raises:
            InvalidTokenError: A credential was presented and is bad (do not fall through).
        """
        ...


def _read_cookie(header: str, name: str) -> str:
    """One cookie's value from a ``Cookie`` header.

    Parsed by hand rather than through ``request.cookies``, which keeps a parsed jar on the
    request for the whole life of a web socket (about 0.6 KB per idle socket).
    """
    prefix = name + "="
    for part in header.split(";"):
        part = part.strip()
        if part.startswith(prefix):
            return part[len(prefix) :].strip('"')
    return ""


class SignedTokenResolver:
    """Reads a signed actor token from ``Authorization: Bearer`` or the ``token`` query parameter.

    Args:
        secret: The HS256 key the app signs with (``sign_actor_token``).
        audience: When set, a token's ``aud`` must name it (a token with an ``aud`` is refused
            without it).
        issuer: When set, a token's ``iss`` must be it.
        leeway: Seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
    """

    def __init__(
        self,
        secret: bytes,
        *,
        audience: str | Sequence[str] | None = None,
        issuer: str | None = None,
        leeway: float = 0.0,
    ) -> None:
        if not math.isfinite(leeway) or leeway < 0:
            raise UserError("SignedTokenResolver(leeway=) must be a finite number of seconds, 0 or more")
        self.secret = secret
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway

    async def resolve(self, request: web.Request) -> Actor | None:
        """The token's actor; ``None`` without a token."""
        token = bearer_token(request)
        return None if token is None else await self.verify_token(token)

    async def verify_token(self, token: str) -> Actor:
        """The actor of a token presented some other way (a web socket's ``hello``).

        Raises:
            InvalidTokenError: It is not a good token of this app's.
        """
        return verify_actor_token(token, self.secret, audience=self.audience, issuer=self.issuer, leeway=self.leeway)


_URLSAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")


class AnonymousCookieResolver:
    """Gives each browser a stable anonymous id in a signed, HttpOnly cookie (``agora_anon``)."""

    def __init__(self, secret: bytes, *, secure: bool = False, roles: Sequence[str] = ("anonymous",)) -> None:
        self.secret = secret
        self.secure = secure
        self.roles = list(roles)

    def _sign(self, value: str) -> str:
        return _b64(hmac.new(self.secret, f"{ANONYMOUS_PREFIX}{value}".encode(), hashlib.sha256).digest())[:32]

    async def resolve(self, request: web.Request) -> Actor:
        """The cookie's actor, or a new one (whose cookie ``attach_cookie`` sets on the response)."""
        cookie = _read_cookie(request.headers.get("Cookie", ""), ANON_COOKIE)
        value, _, signature = cookie.partition(".")
        # Both parts are URL-safe base64 (anything else, non-ASCII say, is simply not ours).
        if (
            value
            and len(value) <= 64
            and _URLSAFE.fullmatch(value)
            and _URLSAFE.fullmatch(signature)
            and hmac.compare_digest(self._sign(value), signature)
        ):
            return Actor(id=f"{ANONYMOUS_PREFIX}{value}", roles=self.roles)
        value = secrets.token_urlsafe(16)
        request[_PENDING_COOKIE] = f"{value}.{self._sign(value)}"
        return Actor(id=f"{ANONYMOUS_PREFIX}{value}", roles=self.roles)

    def attach_cookie(self, request: web.Request, response: web.StreamResponse) -> None:
        """Set the new visitor's cookie on ``response`` (before it is prepared)."""
        pending = request.get(_PENDING_COOKIE)
        if pending:
            # Written as a header rather than with set_cookie, whose cookie jar would stay on a
            # web socket's response for the socket's whole life. The value is URL-safe base64.
            secure = "; Secure" if self.secure else ""
            response.headers.add(
                "Set-Cookie",
                f"{ANON_COOKIE}={pending}; Max-Age={365 * 24 * 3600}; Path=/; HttpOnly; SameSite=Lax{secure}",
            )


class TrustedHeaderResolver:
    """Reads ``X-Actor-Id``, ``X-Actor-Roles`` (comma-separated) and ``X-Tenant-Ref``.

    Only safe behind a proxy that sets these headers itself and strips them from clients.
    """

    async def resolve(self, request: web.Request) -> Actor | None:
        """The headers' actor; ``None`` without ``X-Actor-Id``."""
        actor_id = request.headers.get("X-Actor-Id")
        if not actor_id:
            return None
        roles = [r.strip() for r in request.headers.get("X-Actor-Roles", "").split(",") if r.strip()]
        try:
            return Actor(id=actor_id, roles=roles, tenant_ref=request.headers.get("X-Tenant-Ref") or None)
        except ValidationError as exc:
            raise InvalidTokenError(f"Invalid actor headers ({_first_error(exc)})") from None


class ChainResolver:
    """Tries resolvers in order; the first actor wins.

    A bearer token one token resolver (one with ``verify_token``: ``SignedTokenResolver``,
    ``OidcResolver``) refuses is offered to the chain's other token resolvers, so an app's own
    tokens and its identity provider's may be accepted side by side; when none accepts it the
    first refusal stands (401: a bad token never falls through to an anonymous visitor).
    """

    def __init__(self, resolvers: Sequence[Any]) -> None:
        self.resolvers = list(resolvers)

    def token_resolvers(self) -> list[Any]:
        """The resolvers that verify a bearer token (``verify_token``), in order."""
        return [r for r in self.resolvers if callable(getattr(r, "verify_token", None))]

    async def resolve(self, request: web.Request) -> Actor | None:
        """The first resolver's actor, or ``None``."""
        for resolver in self.resolvers:
            try:
                actor: Actor | None = await resolver.resolve(request)
            except InvalidTokenError as refused:
                if not callable(getattr(resolver, "verify_token", None)):
                    raise
                token = bearer_token(request)
                if token is None:
                    raise
                return await self._others(token, resolver, refused)
            if actor is not None:
                return actor
        return None

    async def verify_token(self, token: str) -> Actor:
        """The actor of a token presented some other way (a web socket's ``hello``).

        Raises:
            InvalidTokenError: No token resolver of the chain accepts it (the first one's reason),
                or the chain has none.
        """
        resolvers = self.token_resolvers()
        if not resolvers:
            raise InvalidTokenError("This app accepts no bearer tokens")
        try:
            actor: Actor = await resolvers[0].verify_token(token)
        except InvalidTokenError as refused:
            return await self._others(token, resolvers[0], refused)
        return actor

    async def _others(self, token: str, first: Any, refused: InvalidTokenError) -> Actor:
        """The actor another token resolver finds; else the refusal of the one the token is for.

        The reason told is the first that is not "another algorithm": an RS256 token with a bad
        signature is refused as such, not as a token the HS256 check does not take.
        """
        for resolver in self.token_resolvers():
            if resolver is first:
                continue
            try:
                actor: Actor = await resolver.verify_token(token)
            except InvalidTokenError as other:
                if str(refused) == UNSUPPORTED_ALGORITHM:
                    refused = other
                continue
            return actor
        raise refused

    def attach_cookie(self, request: web.Request, response: web.StreamResponse) -> None:
        """Let cookie-based resolvers set their cookie."""
        for resolver in self.resolvers:
            if isinstance(resolver, AnonymousCookieResolver):
                resolver.attach_cookie(request, response)
