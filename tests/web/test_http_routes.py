"""The HTTP API: catalog, decisions, cancel, history, media, health, metrics, the demo page."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

import gateway._identity as identity
import gateway.stores._records as records
from gateway import SERVICES, create_app
from renderers import MediaStore
from tools import Actor, UserError

from .conftest import ALICE, BOB, SECRET, connect, settings, token_for


def auth(actor: Any = ALICE) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(actor)}"}


async def park_refund(client: Any, order: str = "1042") -> tuple[str, str]:
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello())["thread_id"]
    frames = await ws.turn(f"refund order {order}")
    await ws.ws.close()
    request = next(f for f in frames if f["type"] == "approval-requested")
    return thread_id, request["tool_call_id"]


async def test_tool_catalog_is_the_gated_list_with_presentation(make_client: Any) -> None:
    client = await make_client()
    response = await client.get("/agent/tools?agent=assistant", headers=auth())
    assert response.status == 200
    catalog = {entry["name"]: entry for entry in await response.json()}
    assert set(catalog) == {
        "get_weather",
        "list_orders",
        "sales_report",
        "get_invoice",
        "refund_order",
        "cancel_subscription",
    }
    assert catalog["refund_order"]["kind"] == "action"
    assert catalog["refund_order"]["presentation"]["confirm"] == {"title": "Refund order {order_id}?", "verb": "Refund"}
    assert (await client.get("/agent/tools", headers=auth())).status == 200
    missing = await client.get("/agent/tools?agent=nobody", headers=auth())
    assert missing.status == 404 and (await missing.json())["code"] == "unknown_agent"


async def test_http_decisions_and_their_errors(make_client: Any, monkeypatch: Any) -> None:
    client = await make_client()
    runtime = client.app[SERVICES].runtime
    _, call_id = await park_refund(client)
    body = {"tool_call_id": call_id}
    wrong_type = await client.post("/agent/tool-call/approve", data="tool_call_id=x", headers=auth())
    assert wrong_type.status == 415 and (await wrong_type.json())["code"] == "unsupported_media_type"
    invalid = await client.post("/agent/tool-call/approve", json={"tool_call": call_id}, headers=auth())
    assert invalid.status == 400 and (await invalid.json())["code"] == "invalid_request"
    huge = await client.post(
        "/agent/tool-call/reject", json={"tool_call_id": call_id, "reason": "x" * 100_000}, headers=auth()
    )
    assert huge.status == 413
    unknown = await client.post("/agent/tool-call/approve", json={"tool_call_id": "tc_nope"}, headers=auth())
    assert unknown.status == 404 and (await unknown.json())["code"] == "approval_not_found"
    forbidden = await client.post("/agent/tool-call/approve", json=body, headers=auth(BOB))
    assert forbidden.status == 403 and (await forbidden.json())["code"] == "approval_forbidden"
    assert (await runtime.store.get_approval(call_id)).status == "pending"
    ok = await client.post("/agent/tool-call/approve", json=body, headers=auth())
    assert ok.status == 200 and await ok.json() == {"tool_call_id": call_id, "status": "approved"}
    again = await client.post("/agent/tool-call/reject", json=body, headers=auth())
    assert again.status == 409 and (await again.json())["code"] == "approval_settled"

    _, late_id = await park_refund(client, "1040")
    future = records.time.time() + 30 * 24 * 3600
    monkeypatch.setattr(records.time, "time", lambda: future)
    gone = await client.post("/agent/tool-call/approve", json={"tool_call_id": late_id}, headers=auth())
    assert gone.status == 410 and (await gone.json())["code"] == "approval_expired"


async def test_identity_on_http(make_client: Any, monkeypatch: Any) -> None:
    client = await make_client(anonymous=False)
    missing = await client.get("/agent/tools")
    assert missing.status == 401 and (await missing.json())["code"] == "unauthenticated"
    bad = await client.get("/agent/tools", headers={"Authorization": "Bearer nope"})
    assert bad.status == 401 and (await bad.json())["code"] == "invalid_token"
    assert (await client.get(f"/agent/tools?token={token_for(ALICE)}")).status == 200
    # Anonymous ids belong to the cookie: a token may not claim one, even one signed with the secret.
    with pytest.raises(UserError, match="anonymous"):
        token_for(Actor(id="anon:abc"))
    forged = identity._b64(b'{"alg":"HS256","typ":"JWT"}') + "." + identity._b64(b'{"id":"anon:abc","exp":9999999999}')
    forged += "." + identity._b64(hmac.new(SECRET.encode(), forged.encode(), hashlib.sha256).digest())
    posing = await client.get("/agent/tools", headers={"Authorization": f"Bearer {forged}"})
    assert posing.status == 401 and (await posing.json())["code"] == "invalid_token"
    soon = token_for(ALICE, ttl=60)
    later = identity.time.time() + 120
    monkeypatch.setattr(identity.time, "time", lambda: later)
    expired = await client.get("/agent/tools", headers={"Authorization": f"Bearer {soon}"})
    assert expired.status == 401 and "expired" in (await expired.json())["message"]


@pytest.mark.parametrize(
    ("headers", "query"), [({"Authorization": "Bearer "}, ""), ({"Authorization": "Bearer"}, ""), ({}, "?token=")]
)
async def test_an_empty_credential_is_a_failed_sign_in_not_a_visitor(
    make_client: Any, headers: dict[str, str], query: str
) -> None:
    """An unset ``$TOKEN`` in a script sends ``Bearer `` : 401, no cookie, never the anonymous visitor."""
    client = await make_client()
    answer = await client.get(f"/agent/threads{query}", headers=headers)
    assert answer.status == 401 and (await answer.json())["code"] == "invalid_token"
    assert "agora_anon" not in answer.headers.get("Set-Cookie", "")


async def test_anonymous_visitors_get_a_stable_signed_cookie(make_client: Any) -> None:
    client = await make_client()
    page = await client.get("/")
    assert page.status == 200 and "agora-chat" in await page.text()
    cookie = page.cookies["agora_anon"]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    ws = await connect(client)
    welcome = await ws.hello()
    assert welcome["actor"]["id"].startswith("anon:")
    ws2 = await connect(client)
    assert (await ws2.hello())["actor"]["id"] == welcome["actor"]["id"]
    client.session.cookie_jar.clear()
    client.session.cookie_jar.update_cookies({"agora_anon": "forged.value"}, response_url=page.url)
    ws3 = await connect(client)
    assert (await ws3.hello())["actor"]["id"] != welcome["actor"]["id"]
    for socket in (ws, ws2, ws3):
        await socket.ws.close()


async def test_thread_history_and_cancel_are_owner_only(make_client: Any) -> None:
    client = await make_client()
    thread_id, call_id = await park_refund(client)
    assert (await client.get(f"/agent/threads/{thread_id}", headers=auth(BOB))).status == 403
    assert (await client.get("/agent/threads/nope", headers=auth())).status == 404
    history = await (await client.get(f"/agent/threads/{thread_id}", headers=auth())).json()
    assert history["pending_approvals"][0]["tool_call_id"] == call_id
    run_id = history["events"][0]["run_id"]
    other = await client.post(f"/agent/runs/{run_id}/cancel", headers=auth(BOB))
    assert other.status == 403
    cancelled = await client.post(f"/agent/runs/{run_id}/cancel", headers=auth())
    assert cancelled.status == 200 and (await cancelled.json())["status"] == "cancelled"
    again = await client.post(f"/agent/runs/{run_id}/cancel", headers=auth())
    assert again.status == 409 and (await again.json())["code"] == "run_not_active"
    assert (await client.post("/agent/runs/run_nope/cancel", headers=auth())).status == 404


async def test_media_tokens_are_signed_and_expire(make_client: Any) -> None:
    client = await make_client()
    media: MediaStore = client.app[SERVICES].media
    token = await media.put(b"\x89PNG fake bytes", "image/png", filename="card.png")
    ok = await client.get(f"/media/{token}")
    assert ok.status == 200 and ok.content_type == "image/png" and await ok.read() == b"\x89PNG fake bytes"
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    assert (await client.get(f"/media/{tampered}")).status == 403
    now = [1_000_000.0]
    client.app[SERVICES].media = clocked = MediaStore(SECRET, ttl=60, clock=lambda: now[0])
    short = await clocked.put(b"x", "image/png")
    assert (await client.get(f"/media/{short}")).status == 200
    now[0] += 61
    expired = await client.get(f"/media/{short}")
    assert expired.status == 410 and (await expired.json())["code"] == "media_expired"
    other = MediaStore(b"another secret, long enough")
    assert (await client.get(f"/media/{await other.put(b'x', 'image/png')}")).status == 403


async def test_health_and_metrics(make_client: Any) -> None:
    client = await make_client()
    health = await client.get("/healthz")
    assert health.status == 200 and (await health.json())["status"] == "ok"
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    await ws.turn("weather in Lisbon")
    text = await (await client.get("/metrics")).text()
    assert 'agora_turns_total{channel="web"} 1.0' in text
    assert 'agora_tool_calls_total{status="completed",tool="get_weather"} 1.0' in text
    assert 'agora_runs_finished_total{status="completed"} 1.0' in text
    assert "agora_websockets_open 1.0" in text
    frames_out = next(
        line for line in text.splitlines() if line.startswith('agora_websocket_frames_total{direction="out"}')
    )
    assert float(frames_out.split()[-1]) >= 6  # welcome, and the turn's events
    assert 'agora_renders_total{format="html"}' in text
    assert "agora_tool_seconds_bucket" in text and "agora_http_request_seconds_bucket" in text
    await ws.ws.close()


async def test_metrics_behind_a_token_refuse_anyone_else_without_side_effect(make_client: Any) -> None:
    token = "scrape-me-" + "7" * 32
    client = await make_client(metrics_token=token)
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": token},
        {"Authorization": f"Basic {token}"},
        {"Authorization": "Bearer sc\u00e9ne".encode().decode("latin-1")},
    ):
        refused = await client.get("/metrics", headers=headers)
        assert refused.status == 401, headers
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert "Set-Cookie" not in refused.headers  # no visitor made, nothing stored
        body = await refused.json()
        assert body["code"] == "unauthenticated" and "agora_" not in json.dumps(body)
    allowed = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
    assert allowed.status == 200
    text = await allowed.text()
    assert 'agora_http_requests_total{route="/metrics",status="401"} 7.0' in text  # the refusals are counted
    assert (await (await make_client()).get("/metrics")).status == 200  # no token set: open, as before


@pytest.mark.parametrize("path", ["/agent/tool-call/approve", "/agent/tool-call/reject"])
async def test_unknown_routes_and_methods_answer_json(make_client: Any, path: str) -> None:
    client = await make_client()
    assert (await client.get(path, headers=auth())).status == 405
    missing = await client.get("/agent/nothing-here")
    assert missing.status == 404 and (await missing.json())["code"] == "not_found"


async def test_a_chunked_json_body_is_read_to_its_end(make_client: Any) -> None:
    client = await make_client()
    _, call_id = await park_refund(client)
    payload = json.dumps({"tool_call_id": call_id, "reason": "x" * 400}).encode()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(payload), 50):
            yield payload[start : start + 50]

    headers = {**auth(), "Content-Type": "application/json"}
    response = await client.post("/agent/tool-call/reject", data=pieces(), headers=headers)
    assert response.status == 200 and (await response.json())["status"] == "rejected"


async def test_media_answer_503_when_their_redis_is_away(make_client: Any) -> None:
    import socket

    import redis.asyncio as redis

    from renderers import RedisMediaBackend

    client = await make_client()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    token = await MediaStore(SECRET).put(b"png", "image/png")
    away = redis.Redis(port=closed_port, socket_connect_timeout=0.2, retry_on_error=[], retry=None)
    client.app[SERVICES].media = MediaStore(SECRET, backend=RedisMediaBackend(away))
    try:
        answer = await client.get(f"/media/{token}")
        assert answer.status == 503 and (await answer.json())["code"] == "media_unavailable"
    finally:
        await away.aclose()


def test_a_sentinel_url_is_accepted_for_media_too() -> None:
    from gateway import Settings, create_app

    app = create_app(Settings(_env_file=None, secret="x" * 32, redis_url="redis+sentinel://127.0.0.1:1/mymaster"))  # type: ignore[call-arg]
    assert app is not None


async def test_text_is_served_as_utf_8_and_the_page_serves_without_anonymous_visitors(make_client: Any) -> None:
    client = await make_client(anonymous=False)
    for path in ("/static/agora-chat.js", "/static/agora-chat.css", "/static/components.css", "/"):
        answer = await client.get(path)
        assert answer.status == 200, path
        assert answer.headers["Content-Type"].endswith("charset=utf-8"), (path, answer.headers["Content-Type"])
    script = await (await client.get("/static/agora-chat.js")).read()
    assert "…".encode() in script  # the reason: the widget's own strings are UTF-8
    assert "Set-Cookie" not in (await client.get("/")).headers  # no anonymous identity handed out


async def test_a_real_fault_still_logs_its_traceback(aiohttp_client: Any, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("a bug")

    app = create_app(settings())
    app.router.add_get("/broken", broken)
    client = await aiohttp_client(app)
    with caplog.at_level(logging.INFO):
        assert (await client.get("/broken")).status == 500
        assert (await client.get("/agent/threads/a%01b")).status == 400
    faults = [r for r in caplog.records if r.exc_info]
    assert len(faults) == 1 and faults[0].name == "aiohttp.server" and "a bug" in str(faults[0].exc_info[1])
    refusals = [r.getMessage() for r in caplog.records if r.name == "gateway.http"]
    assert refusals == ["refused 400 invalid_request GET /agent/threads/{thread_id}: Bad thread id"]
