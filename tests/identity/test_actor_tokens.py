"""Actor tokens (HS256) through PyJWT: what the hand-written check let through is refused now."""

from __future__ import annotations

import time
import warnings
from typing import Any

import jwt
import pytest

from gateway import InvalidTokenError, Settings, SignedTokenResolver, sign_actor_token, verify_actor_token
from tools import Actor

from .conftest import SECRET, SigningKey

ALICE = Actor(id="alice", roles=["member"], tenant_ref="acme")


def pyjwt(claims: dict[str, Any], secret: str = SECRET, algorithm: str = "HS256") -> str:
    """A token as an app signs it with PyJWT, not with ``sign_actor_token``."""
    now = int(time.time())
    payload = {"id": "alice", "roles": ["member"], "tenant": "acme", "iat": now, "exp": now + 300, **claims}
    with warnings.catch_warnings():  # the tests' secrets are shorter than PyJWT recommends
        warnings.simplefilter("ignore", jwt.InsecureKeyLengthWarning)
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, secret, algorithm=algorithm)


def test_a_signed_token_carries_iat_and_nbf_and_verifies() -> None:
    token = sign_actor_token(ALICE, SECRET, 60)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["iat"] == claims["nbf"] and claims["exp"] - claims["iat"] in (59, 60, 61)
    assert "aud" not in claims and "iss" not in claims
    assert verify_actor_token(token, SECRET) == ALICE


def test_a_token_signed_by_pyjwt_verifies() -> None:
    assert verify_actor_token(pyjwt({}), SECRET) == ALICE
    assert verify_actor_token(pyjwt({"id": None, "sub": "bob", "tenant": None}), SECRET) == Actor(
        id="bob", roles=["member"]
    )


def rs256(signer: SigningKey) -> str:
    return jwt.encode({"id": "alice", "exp": int(time.time()) + 60}, signer.private, algorithm="RS256")


REFUSED: dict[str, tuple[Any, str]] = {
    "a future nbf": (lambda s: pyjwt({"nbf": int(time.time()) + 600}), "Token not valid yet"),
    "a future iat": (lambda s: pyjwt({"iat": int(time.time()) + 600}), "Token not valid yet"),
    "a foreign aud": (lambda s: pyjwt({"aud": "another-app"}), "Token is for another audience"),
    "an expired exp": (lambda s: pyjwt({"exp": int(time.time()) - 1}), "Token expired"),
    "no exp": (lambda s: pyjwt({"exp": None}), "Token has no expiry"),
    "a bad signature": (lambda s: pyjwt({}, secret="another-secret-of-sixteen-bytes"), "Bad token signature"),
    "alg none": (
        lambda s: jwt.encode({"id": "alice", "exp": int(time.time()) + 60}, "", algorithm="none"),
        "Unsupported",
    ),
    "RS256": (rs256, "Unsupported token algorithm"),
    "HS512": (lambda s: pyjwt({}, algorithm="HS512"), "Unsupported token algorithm"),
    "an anonymous id": (lambda s: pyjwt({"id": "anon:x"}), "Token claims are invalid"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_what_the_hand_written_check_let_through_is_refused(case: str, rsa_signer: SigningKey) -> None:
    make, reason = REFUSED[case]
    with pytest.raises(InvalidTokenError) as refused:
        verify_actor_token(make(rsa_signer), SECRET)
    assert refused.value.status == 401 and str(refused.value).startswith(reason)


def test_audience_and_issuer_when_configured() -> None:
    token = sign_actor_token(ALICE, SECRET, audience="agora", issuer="https://app.example.test")
    assert verify_actor_token(token, SECRET, audience="agora", issuer="https://app.example.test") == ALICE
    with pytest.raises(InvalidTokenError, match="another audience"):
        verify_actor_token(token, SECRET, audience="other", issuer="https://app.example.test")
    with pytest.raises(InvalidTokenError, match="another issuer"):
        verify_actor_token(token, SECRET, audience="agora", issuer="https://evil.example.test")
    with pytest.raises(InvalidTokenError, match="aud claim"):  # an audience is configured: a token must name it
        verify_actor_token(sign_actor_token(ALICE, SECRET), SECRET, audience="agora")


def test_the_leeway_and_the_moment_of_the_check() -> None:
    late = pyjwt({"exp": int(time.time()) - 5})
    assert verify_actor_token(late, SECRET, leeway=30) == ALICE
    with pytest.raises(InvalidTokenError, match="expired"):
        verify_actor_token(late, SECRET)
    token = sign_actor_token(ALICE, SECRET, 60)
    assert verify_actor_token(token, SECRET, now=time.time() + 30) == ALICE
    with pytest.raises(InvalidTokenError, match="expired"):
        verify_actor_token(token, SECRET, now=time.time() + 120)
    with pytest.raises(InvalidTokenError, match="not valid yet"):
        verify_actor_token(token, SECRET, now=time.time() - 120)


async def test_a_resolver_with_an_audience_wants_it(make_client: Any) -> None:
    client = await make_client(token_audience="agora", token_issuer="https://app.example.test", anonymous=False)
    good = sign_actor_token(ALICE, SECRET, audience="agora", issuer="https://app.example.test")
    ok = await client.get("/agent/threads", headers={"Authorization": f"Bearer {good}"})
    assert ok.status == 200, await ok.text()
    for token in (sign_actor_token(ALICE, SECRET), sign_actor_token(ALICE, SECRET, audience="other")):
        refused = await client.get("/agent/threads", headers={"Authorization": f"Bearer {token}"})
        assert refused.status == 401 and (await refused.json())["code"] == "invalid_token"


def test_settings_want_the_whole_identity_provider() -> None:
    with pytest.raises(ValueError, match="AGORA_OIDC_AUDIENCE"):
        Settings(_env_file=None, oidc_jwks_url="https://idp.example.test/jwks", oidc_issuer="x")
    with pytest.raises(ValueError):
        SignedTokenResolver(b"k" * 16, leeway=-1)
