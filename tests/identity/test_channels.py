"""An identity provider's tokens on every channel that takes a bearer token, through real routes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aiohttp import WSMsgType

from gateway import SERVICES, Gateway, OidcResolver, sign_actor_token
from tools import Actor

from ..conftest import JsonLog
from .conftest import AUDIENCE, ISSUER, SECRET, Client, Jwks, SigningKey
from .test_oidc_resolver import BAD_TOKENS

CHAINED = {"HS256 keyed with the public key": "Bad token signature"}
"""Where the app's own HS256 check, first in the chain, has the reason: the key is not its secret."""


async def oidc_app(make_client: Any, jwks: Jwks, **overrides: Any) -> Client:
    """``create_app`` with the provider configured through its settings (anonymous visitors allowed)."""
    client: Client = await make_client(
        oidc_jwks_url=jwks.url, oidc_issuer=ISSUER, oidc_audience=AUDIENCE, oidc_tenant_claim="org", **overrides
    )
    return client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def run_input(thread_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": f"r-{uuid.uuid4().hex[:8]}",
        "messages": [{"id": "m1", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }


async def runs(client: Client) -> list[Any]:
    return list(await client.app[SERVICES].runtime.store.recent_runs(limit=10))


async def test_provider_and_app_tokens_side_by_side(make_client: Any, jwks: Jwks, rsa_signer: SigningKey) -> None:
    client = await oidc_app(make_client, jwks)
    provider = await client.get("/agent/threads", headers=bearer(rsa_signer.sign(roles=["member"], org="acme")))
    assert provider.status == 200, await provider.text()
    own = await client.get("/agent/threads", headers=bearer(sign_actor_token(Actor(id="app-user"), SECRET)))
    assert own.status == 200, await own.text()
    by_query = await client.get(f"/agent/threads?token={rsa_signer.sign()}")
    assert by_query.status == 200


@pytest.mark.parametrize("case", list(BAD_TOKENS))
async def test_every_bad_token_is_401_on_a_route_with_one_log_line(
    case: str, make_client: Any, jwks: Jwks, rsa_signer: SigningKey, json_log: JsonLog
) -> None:
    client = await oidc_app(make_client, jwks)
    make, reason = BAD_TOKENS[case]
    reason = CHAINED.get(case, reason)
    response = await client.get("/agent/threads", headers=bearer(make(rsa_signer)))
    assert response.status == 401, await response.text()  # never an anonymous visitor instead
    body = await response.json()
    assert body["code"] == "invalid_token" and body["message"].startswith(reason)
    assert "Set-Cookie" not in response.headers
    refusals = [line for line in json_log.lines() if "refused 401" in line["message"]]
    assert len(refusals) == 1 and not any("exc_info" in line or "traceback" in line for line in json_log.lines())


async def test_a_bad_token_runs_nothing_and_a_good_one_runs_as_its_actor(
    make_client: Any, jwks: Jwks, rsa_signer: SigningKey
) -> None:
    client = await oidc_app(make_client, jwks)
    forged = rsa_signer.sign(aud="someone-else")
    refused = await client.post("/agent/ag-ui", json=run_input("t-bad"), headers=bearer(forged))
    assert refused.status == 401
    assert await runs(client) == []
    good = await client.post("/agent/ag-ui", json=run_input("t-good"), headers=bearer(rsa_signer.sign(org="acme")))
    assert good.status == 200
    await good.read()
    (run,) = await runs(client)
    assert run.turn.actor == Actor(id="user-1", tenant_ref="acme")


async def test_no_provider_keys_is_503_with_its_reason(
    make_client: Any, jwks: Jwks, rsa_signer: SigningKey, json_log: JsonLog
) -> None:
    jwks.down = True
    client = await oidc_app(make_client, jwks)
    response = await client.get("/agent/threads", headers=bearer(rsa_signer.sign()))
    assert response.status == 503
    body = await response.json()
    assert body["code"] == "identity_unavailable" and "cannot be fetched" in body["message"]
    assert await runs(client) == []


async def test_the_web_socket_takes_a_provider_token_in_the_header_or_the_hello(
    make_client: Any, jwks: Jwks, ec_signer: SigningKey
) -> None:
    client = await oidc_app(make_client, jwks)
    async with client.ws_connect("/agent/ws", headers=bearer(ec_signer.sign(sub="by-header"))) as ws:
        await ws.send_str(json.dumps({"type": "hello"}))
        welcome = json.loads((await ws.receive(timeout=5)).data)
        assert welcome["type"] == "welcome" and welcome["actor"]["id"] == "by-header"
    async with client.ws_connect("/agent/ws") as ws:
        await ws.send_str(json.dumps({"type": "hello", "token": ec_signer.sign(sub="by-hello")}))
        welcome = json.loads((await ws.receive(timeout=5)).data)
        assert welcome["type"] == "welcome" and welcome["actor"]["id"] == "by-hello"


async def test_the_web_socket_refuses_a_bad_provider_token(make_client: Any, jwks: Jwks, ec_signer: SigningKey) -> None:
    client = await oidc_app(make_client, jwks)
    upgrade = await client.get("/agent/ws", headers=bearer(ec_signer.sign(iss="https://evil.example.test/")))
    assert upgrade.status == 401 and (await upgrade.json())["code"] == "invalid_token"
    async with client.ws_connect("/agent/ws") as ws:
        await ws.send_str(json.dumps({"type": "hello", "token": ec_signer.sign(aud="someone-else")}))
        error = json.loads((await ws.receive(timeout=5)).data)
        assert error["type"] == "error" and error["code"] == "invalid_token"
        closing = await ws.receive(timeout=5)
        assert closing.type in (WSMsgType.CLOSE, WSMsgType.CLOSED) and ws.close_code == 4401
    assert await runs(client) == []


@pytest.mark.parametrize("path", ["/a2a", "/mcp"])
async def test_a2a_and_mcp_take_the_providers_tokens(
    path: str, make_client: Any, jwks: Jwks, rsa_signer: SigningKey
) -> None:
    client = await oidc_app(make_client, jwks)
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    if path == "/mcp":
        call["method"] = "initialize"
        call["params"] = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
    refused = await client.post(path, json=call, headers=bearer(rsa_signer.sign(nbf=2**31)))
    assert refused.status == 401 and (await refused.json())["code"] == "invalid_token"
    accepted = await client.post(
        path, json=call, headers={**bearer(rsa_signer.sign()), "Accept": "application/json, text/event-stream"}
    )
    assert accepted.status == 200, await accepted.text()


async def test_a_hello_with_no_provider_keys_is_told_to_try_again(
    make_client: Any, jwks: Jwks, ec_signer: SigningKey
) -> None:
    jwks.down = True
    client = await oidc_app(make_client, jwks)
    async with client.ws_connect("/agent/ws") as ws:
        await ws.send_str(json.dumps({"type": "hello", "token": ec_signer.sign()}))
        error = json.loads((await ws.receive(timeout=5)).data)
        assert error["type"] == "error" and error["code"] == "identity_unavailable"
        await ws.receive(timeout=5)
        assert ws.close_code == 1013
    assert await runs(client) == []


async def test_an_app_whose_identity_is_the_provider_alone(
    make_client: Any, jwks: Jwks, rsa_signer: SigningKey
) -> None:
    app = Gateway(identity=OidcResolver(jwks.url, ISSUER, AUDIENCE, roles_claim="groups"))
    client = await make_client(app=app)
    async with client.ws_connect("/agent/ws") as ws:
        await ws.send_str(json.dumps({"type": "hello", "token": rsa_signer.sign(groups=["ops"])}))
        welcome = json.loads((await ws.receive(timeout=5)).data)
        assert welcome["type"] == "welcome" and welcome["actor"]["roles"] == ["ops"]
    own = sign_actor_token(Actor(id="app-user"), SECRET)  # no SignedTokenResolver: the app's own tokens are not taken
    refused = await client.get("/agent/threads", headers=bearer(own))
    assert refused.status == 401 and (await refused.json())["message"] == "Unsupported token algorithm"
    nobody = await client.get("/agent/threads")
    assert nobody.status == 401 and (await nobody.json())["code"] == "unauthenticated"
