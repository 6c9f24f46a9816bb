"""Keys made in the test, a JWKS server on loopback, and tokens signed with PyJWT."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import jwt
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pytest_aiohttp import AiohttpServer

from gateway import Gateway, Runtime, Settings

from ..conftest import channels_for, serve

SECRET = "test-secret-for-the-identity-tests"
ISSUER = "https://idp.example.test/"
AUDIENCE = "agora-gateway"

Client = TestClient[web.Request, web.Application]


@dataclass
class SigningKey:
    """A private key the test's identity provider signs with, published under ``kid``."""

    kid: str
    alg: str
    private: Any

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.algorithms.RSAAlgorithm if self.alg.startswith("RS") else jwt.algorithms.ECAlgorithm
        public: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**public, "kid": self.kid, "use": "sig", "alg": self.alg}

    def sign(self, claims: dict[str, Any] | None = None, *, headers: dict[str, Any] | None = None, **extra: Any) -> str:
        """A provider token: ``sub``, ``iss``, ``aud``, ``iat``, ``exp`` in five minutes, then ``claims``."""
        now = int(time.time())
        payload = {"sub": "user-1", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 300}
        payload.update(claims or {}, **extra)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(payload, self.private, algorithm=self.alg, headers={"kid": self.kid, **(headers or {})})


def rsa_key(kid: str | None = None) -> SigningKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return SigningKey(kid or f"rsa-{uuid.uuid4().hex[:8]}", "RS256", private)


def ec_key(kid: str | None = None) -> SigningKey:
    return SigningKey(kid or f"ec-{uuid.uuid4().hex[:8]}", "ES256", ec.generate_private_key(ec.SECP256R1()))


@pytest.fixture(scope="session")
def rsa_signer() -> SigningKey:
    """One RSA key for the session (making one takes tens of milliseconds)."""
    return rsa_key("rsa-1")


@pytest.fixture(scope="session")
def ec_signer() -> SigningKey:
    return ec_key("ec-1")


@dataclass
class Jwks:
    """The identity provider's JWKS endpoint: what it publishes, whether it is up, how often it was read."""

    keys: list[SigningKey]
    url: str = ""
    down: bool = False
    fetches: int = 0
    extra: list[dict[str, Any]] = field(default_factory=list)
    server: TestServer | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.fetches += 1
        if self.down:
            return web.json_response({"error": "down"}, status=503)
        return web.json_response({"keys": [key.jwk() for key in self.keys] + self.extra})


@pytest.fixture
async def jwks(aiohttp_server: AiohttpServer, rsa_signer: SigningKey, ec_signer: SigningKey) -> AsyncIterator[Jwks]:
    """A JWKS server on loopback publishing the session's RSA and EC keys."""
    state = Jwks(keys=[rsa_signer, ec_signer])
    app = web.Application()
    app.router.add_get("/jwks.json", state.handle)
    server = await aiohttp_server(app)
    state.url = str(server.make_url("/jwks.json"))
    state.server = server
    yield state


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@pytest.fixture
async def make_client(aiohttp_client: Any) -> AsyncIterator[Callable[..., Awaitable[Client]]]:
    """An app under the test client: ``create_app`` on ``overrides``' settings, or ``app``'s ``Gateway``."""
    runtimes: list[Runtime] = []

    async def make(*, app: Gateway | None = None, **overrides: Any) -> Client:
        channels = channels_for(overrides)
        config = settings(**overrides)
        runtime = app.runtime(config) if app is not None else None
        if runtime is not None:
            runtimes.append(runtime)
        client: Client = await aiohttp_client(serve(config, runtime, app, channels))
        return client

    yield make
    for runtime in runtimes:
        await runtime.aclose()
