"""``OidcResolver`` against a JWKS server on loopback: good tokens, every bad one, the JWKS down, rotation."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from gateway import IdentityUnavailableError, InvalidTokenError, OidcResolver
from tools import Actor, UserError

from .conftest import AUDIENCE, ISSUER, Jwks, SigningKey, ec_key, rsa_key


def resolver(jwks: Jwks, **options: Any) -> OidcResolver:
    return OidcResolver(jwks.url, ISSUER, AUDIENCE, **options)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def handmade(header: dict[str, Any], claims: dict[str, Any], key: bytes | None) -> str:
    """A token as an attacker writes it, past what PyJWT would sign."""
    head = b64(json.dumps(header).encode())
    body = b64(json.dumps(claims).encode())
    signature = b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()) if key else ""
    return f"{head}.{body}.{signature}"


def claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"sub": "user-1", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300, **extra}


async def test_an_rs256_token_names_its_actor(jwks: Jwks, rsa_signer: SigningKey) -> None:
    oidc = resolver(jwks, tenant_claim="org")
    actor = await oidc.verify_token(rsa_signer.sign(roles=["member", "ops"], org="acme"))
    assert actor == Actor(id="user-1", roles=["member", "ops"], tenant_ref="acme")


async def test_an_es256_token_with_roles_as_a_scope_string(jwks: Jwks, ec_signer: SigningKey) -> None:
    oidc = resolver(jwks, roles_claim="scope")
    actor = await oidc.verify_token(ec_signer.sign(sub="user-2", scope="read write"))
    assert actor == Actor(id="user-2", roles=["read", "write"])
    assert jwks.fetches == 1  # one fetch serves every token while the keys are fresh
    await oidc.verify_token(ec_signer.sign(sub="user-3"))
    assert jwks.fetches == 1


def expired(signer: SigningKey) -> str:
    now = int(time.time())
    return signer.sign(iat=now - 600, exp=now - 120)


BAD_TOKENS: dict[str, Any] = {
    "a bad signature": (lambda s: rsa_key(s.kid).sign(), "Bad token signature"),
    "alg none": (lambda s: handmade({"alg": "none", "kid": s.kid}, claims(), None), "Unsupported token algorithm"),
    "alg none signed by PyJWT": (
        lambda s: jwt.encode(claims(), "", algorithm="none", headers={"kid": s.kid}),
        "Unsupported token algorithm",
    ),
    # Key confusion: HMAC keyed with the provider's public key, which anyone can read from the JWKS.
    "HS256 keyed with the public key": (
        lambda s: handmade(
            {"alg": "HS256", "kid": s.kid},
            claims(),
            s.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        ),
        "Unsupported token algorithm",
    ),
    "a future nbf": (lambda s: s.sign(nbf=int(time.time()) + 600), "Token not valid yet"),
    "an expired exp": (expired, "Token expired"),
    "a foreign aud": (lambda s: s.sign(aud="someone-else"), "Token is for another audience"),
    "a foreign iss": (lambda s: s.sign(iss="https://evil.example.test/"), "Token is from another issuer"),
    "an unknown kid": (lambda s: rsa_key("kid-nobody-published").sign(), "Token names an unknown key (kid)"),
    "no exp": (lambda s: s.sign(exp=None), "Token has no expiry"),
    "no aud": (lambda s: s.sign(aud=None), "Token has no aud claim"),
    "no sub": (lambda s: s.sign(sub=None), "Token has no sub claim"),
    "an anonymous sub": (lambda s: s.sign(sub="anon:abc"), "Token claims are invalid"),
    "a control character in the sub": (lambda s: s.sign(sub="acme\x1fu1"), "Token claims are invalid"),
    "not a JWT": (lambda s: "not.a.jwt", "Malformed token"),
    "two parts": (lambda s: "abc.def", "Malformed token"),
}


@pytest.mark.parametrize("case", list(BAD_TOKENS))
async def test_every_bad_token_is_refused(case: str, jwks: Jwks, rsa_signer: SigningKey) -> None:
    make, reason = BAD_TOKENS[case]
    oidc = resolver(jwks)
    with pytest.raises(InvalidTokenError) as refused:
        await oidc.verify_token(make(rsa_signer))
    assert refused.value.status == 401
    assert str(refused.value).startswith(reason)


async def test_a_token_naming_an_ec_key_with_an_rsa_algorithm_is_refused(jwks: Jwks, ec_signer: SigningKey) -> None:
    other = rsa_key(ec_signer.kid)  # an RS256 token whose kid names the published EC key
    with pytest.raises(InvalidTokenError, match="Unsupported token algorithm"):
        await resolver(jwks).verify_token(other.sign())


async def test_the_leeway_allows_clock_skew_and_no_more(jwks: Jwks, rsa_signer: SigningKey) -> None:
    now = int(time.time())
    late = rsa_signer.sign(iat=now - 300, exp=now - 10)
    assert (await resolver(jwks, leeway=30).verify_token(late)).id == "user-1"
    with pytest.raises(InvalidTokenError, match="Token expired"):
        await resolver(jwks, leeway=0).verify_token(late)
    early = rsa_signer.sign(nbf=now + 10)
    assert (await resolver(jwks, leeway=30).verify_token(early)).id == "user-1"


async def test_an_unknown_kid_fetches_the_keys_again_at_most_once_per_interval(
    jwks: Jwks, rsa_signer: SigningKey
) -> None:
    oidc = resolver(jwks, refresh_interval=60)
    await oidc.verify_token(rsa_signer.sign())
    assert jwks.fetches == 1
    for _ in range(5):  # a stream of forged kids does not hammer the provider
        with pytest.raises(InvalidTokenError, match="unknown key"):
            await oidc.verify_token(rsa_key().sign())
    assert jwks.fetches == 1


async def test_a_rotated_key_is_fetched_when_a_token_names_it(jwks: Jwks, rsa_signer: SigningKey) -> None:
    oidc = resolver(jwks, refresh_interval=0)
    await oidc.verify_token(rsa_signer.sign())
    new = ec_key("rotated-2")
    jwks.keys = [new]  # the provider rotates: the old key retires, the new one is published
    assert (await oidc.verify_token(new.sign(sub="after-rotation"))).id == "after-rotation"
    assert jwks.fetches == 2


async def test_cached_keys_keep_working_while_the_jwks_is_down_until_they_expire(
    jwks: Jwks, rsa_signer: SigningKey
) -> None:
    oidc = resolver(jwks, cache_ttl=0, max_stale=0.5, refresh_interval=0)
    await oidc.verify_token(rsa_signer.sign())
    jwks.down = True
    assert (await oidc.verify_token(rsa_signer.sign(sub="still-in"))).id == "still-in"
    assert jwks.fetches == 2  # it tried, failed, and kept the keys it had
    await asyncio.sleep(0.55)
    with pytest.raises(IdentityUnavailableError) as unavailable:
        await oidc.verify_token(rsa_signer.sign())
    assert unavailable.value.status == 503 and "HTTP 503" in str(unavailable.value)
    jwks.down = False  # back: the next token fetches the keys again
    assert (await oidc.verify_token(rsa_signer.sign(sub="back"))).id == "back"


async def test_no_keys_at_all_is_503_never_an_open_door(jwks: Jwks, rsa_signer: SigningKey) -> None:
    jwks.down = True
    oidc = resolver(jwks, refresh_interval=60)
    for _ in range(3):
        with pytest.raises(IdentityUnavailableError, match="cannot be fetched"):
            await oidc.verify_token(rsa_signer.sign())
    assert jwks.fetches == 1  # a provider that is down is asked once per interval, not per token


async def test_an_unreachable_jwks_is_503(jwks: Jwks, rsa_signer: SigningKey) -> None:
    assert jwks.server is not None
    url = jwks.url
    await jwks.server.close()
    oidc = OidcResolver(url, ISSUER, AUDIENCE, timeout=2)
    with pytest.raises(IdentityUnavailableError):
        await oidc.verify_token(rsa_signer.sign())


async def test_a_jwks_of_symmetric_keys_only_gives_no_keys(jwks: Jwks, rsa_signer: SigningKey) -> None:
    jwks.keys = []
    jwks.extra = [{"kty": "oct", "kid": rsa_signer.kid, "k": b64(b"a secret anyone could use")}]
    with pytest.raises(IdentityUnavailableError, match="no RSA or EC signing key"):
        await resolver(jwks).verify_token(rsa_signer.sign())


async def test_an_hs256_token_is_refused_before_any_fetch(jwks: Jwks) -> None:
    token = handmade({"alg": "HS256"}, claims(), b"k" * 32)
    with pytest.raises(InvalidTokenError, match="Unsupported token algorithm"):
        await resolver(jwks).verify_token(token)
    assert jwks.fetches == 0


@pytest.mark.parametrize(
    "arguments",
    [
        {"issuer": ""},
        {"audience": ""},
        {"audience": []},
        {"jwks_url": "file:///etc/jwks.json"},
        {"algorithms": ("HS256",)},
        {"algorithms": ("RS256", "none")},
        {"algorithms": ()},
        {"leeway": -1},
        {"cache_ttl": float("inf")},
    ],
)
def test_a_resolver_without_issuer_audience_or_with_symmetric_algorithms_is_refused(arguments: dict[str, Any]) -> None:
    values: dict[str, Any] = {"jwks_url": "https://idp.example.test/jwks.json", "issuer": ISSUER, "audience": AUDIENCE}
    values.update(arguments)
    with pytest.raises(UserError):
        OidcResolver(values.pop("jwks_url"), values.pop("issuer"), values.pop("audience"), **values)
