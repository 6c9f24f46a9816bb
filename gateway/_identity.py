"""Who is talking: actor resolvers and the signed actor tokens apps give their users.

An actor token is a JWT (HS256) whose claims are ``id`` (or ``sub``), ``roles``, ``tenant`` and
``exp``, so an app may sign it with ``sign_actor_token`` or any JWT library.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

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


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_HEADER = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())


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


def sign_actor_token(actor: Actor, secret: str | bytes | SecretStr, ttl: float = 3600) -> str:
    """A signed token for ``actor`` that expires in ``ttl`` seconds (a JWT, HS256).

    Give it to the widget (``<agora-chat token="...">``) or send it as ``Authorization: Bearer``.
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
    claims = {"id": actor.id, "roles": list(actor.roles), "tenant": actor.tenant_ref, "exp": int(time.time() + ttl)}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signature = _b64(hmac.new(key, f"{_HEADER}.{payload}".encode(), hashlib.sha256).digest())
    return f"{_HEADER}.{payload}.{signature}"


def verify_actor_token(token: str, secret: str | bytes | SecretStr, *, now: float | None = None) -> Actor:
    """The actor a token speaks for.

    Raises:
        InvalidTokenError: Malformed, not HS256, forged, without a finite ``exp``, expired, before
            its ``nbf``, or naming
            an actor that cannot be (an id or tenant with control characters or lone
            surrogates, longer than 256 characters, not a string, an anonymous id).
    """
    if not isinstance(token, str) or len(token) > _MAX_TOKEN or token.count(".") != 2:
        raise InvalidTokenError("Malformed token")
    header, payload, signature = token.split(".")
    key = _key(secret)
    try:
        if json.loads(_unb64(header)).get("alg") != "HS256":
            raise InvalidTokenError("Unsupported token algorithm")
        expected = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        if not hmac.compare_digest(expected, _unb64(signature)):
            raise InvalidTokenError("Bad token signature")
        # Not parse_json: a lone surrogate in an id must be refused, never made U+FFFD (two
        # different ids would become one). A header of thousands of nested arrays is malformed.
        claims = json.loads(_unb64(payload), parse_constant=_no_constant)
    except (ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise InvalidTokenError("Malformed token") from exc
    if not isinstance(claims, dict):
        raise InvalidTokenError("Malformed token")
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or isinstance(exp, bool) or not math.isfinite(exp):
        raise InvalidTokenError("Token has no expiry")  # NaN or 1e999 would never expire
    moment = time.time() if now is None else now
    if moment >= exp:
        raise InvalidTokenError("Token expired")
    if nbf is not None:
        if not isinstance(nbf, int | float) or isinstance(nbf, bool) or not math.isfinite(nbf):
            raise InvalidTokenError("Malformed token")
        if moment < nbf:
            raise InvalidTokenError("Token not valid yet")
    try:
        actor = Actor(
            id=claims.get("id") or claims.get("sub"), roles=claims.get("roles") or [], tenant_ref=claims.get("tenant")
        )
    except ValidationError as exc:
        raise InvalidTokenError(f"Token claims are invalid ({_first_error(exc)})") from None
    if actor.id.startswith(ANONYMOUS_PREFIX):  # signed elsewhere: anonymous ids are the cookie's alone
        raise InvalidTokenError("Token claims are invalid")
    return actor


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
    """Reads a signed actor token from ``Authorization: Bearer`` or the ``token`` query parameter."""

    def __init__(self, secret: bytes) -> None:
        self.secret = secret

    async def resolve(self, request: web.Request) -> Actor | None:
        """The token's actor; ``None`` without a token."""
        auth = request.headers.get("Authorization", "")
        bearer = auth[:7].lower() == "bearer " or auth.strip().lower() == "bearer"
        token = auth[7:].strip() if bearer else request.query.get("token")
        if not token:
            if bearer or "token" in request.query:
                # A credential sent empty (an unset $TOKEN in a script) is a failed sign-in, never a visitor.
                raise InvalidTokenError("The actor token is empty")
            return None
        return verify_actor_token(token, self.secret)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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
    """Tries resolvers in order; the first actor wins."""

    def __init__(self, resolvers: Sequence[Any]) -> None:
        self.resolvers = list(resolvers)

    async def resolve(self, request: web.Request) -> Actor | None:
        """The first resolver's actor, or ``None``."""
        for resolver in self.resolvers:
            actor: Actor | None = await resolver.resolve(request)
            if actor is not None:
                return actor
        return None

    def attach_cookie(self, request: web.Request, response: web.StreamResponse) -> None:
        """Let cookie-based resolvers set their cookie."""
        for resolver in self.resolvers:
            if isinstance(resolver, AnonymousCookieResolver):
                resolver.attach_cookie(request, response)
