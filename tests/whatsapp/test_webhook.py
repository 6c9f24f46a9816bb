"""Signatures (HMAC-SHA1 and the SharedKey HMAC-SHA256), MessageSid dedupe, status callbacks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote_plus, urlencode

import pytest
from twilio.request_validator import RequestValidator

from channels.whatsapp import EMPTY_TWIML, WebhookVerifier
from gateway import sign_actor_token
from tools import Actor

from .conftest import (
    ALICE,
    AUTH_TOKEN,
    INBOUND_URL,
    PUBLIC,
    SECRET,
    STATUS_URL,
    Gateway,
    MakeGateway,
    inbound,
    sign,
    thread_of,
)

THREAD = thread_of(ALICE)
TEMPLATE = "HX" + "f" * 32


async def nothing_happened(gw: Gateway) -> None:
    await gw.settle()
    assert gw.http.requests == []
    assert await gw.channel.services.runtime.store.get_thread(THREAD) is None


def test_twilio_documentation_vector_through_the_validator() -> None:
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+12349013030",
        "Digits": "1234",
        "From": "+12349013030",
        "To": "+18005551212",
    }
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert RequestValidator("12345").compute_signature(url, params) == "0/KCTR6DLpKmkAf8muzZqo1nDgQ="


async def test_unsigned_forged_and_tampered_requests_are_refused_without_side_effects(
    make_gateway: MakeGateway,
) -> None:
    gw = await make_gateway()
    fields = inbound("weather in Lisbon")
    path = "/channels/whatsapp"
    attempts: list[dict[str, Any]] = [
        {"data": fields},  # unsigned
        {"data": {**fields, "Body": "refund order 1042"}, "headers": sign(INBOUND_URL, fields)},  # tampered
        {"data": {**fields, "Extra": "1"}, "headers": sign(INBOUND_URL, fields)},  # a field added
        {"data": fields, "headers": sign("http://gw.example.test/channels/whatsapp", fields)},  # another URL
        {
            "data": fields,
            "headers": {"X-Twilio-Signature": RequestValidator("wrong").compute_signature(INBOUND_URL, fields)},
        },
        {  # claims HMAC-SHA256 but is signed with the auth token's SHA1
            "data": fields,
            "headers": {
                **sign(INBOUND_URL, fields),
                "X-Twilio-Webhooks-Signature-Settings": "key=k,algorithm=HMAC_SHA256",
            },
        },
        {  # an algorithm Twilio does not have
            "data": fields,
            "headers": {**sign(INBOUND_URL, fields), "X-Twilio-Webhooks-Signature-Settings": "algorithm=HMAC_MD5"},
        },
        {  # a body that is not UTF-8: no Twilio webhook, and no 500 either
            "data": b"Body=\xff\xfe&From=whatsapp%3A%2B1",
            "headers": {**sign(INBOUND_URL, fields), "Content-Type": "application/x-www-form-urlencoded"},
        },
    ]
    for attempt in attempts:
        response = await gw.client.post(path, **attempt)
        assert response.status == 403, attempt
        assert (await response.json())["code"] == "forbidden"
    await nothing_happened(gw)

    # The MessageSid was not claimed by the refused attempts: the genuine request goes through.
    response = await gw.post(fields)
    assert response.status == 200 and await response.text() == EMPTY_TWIML
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))


async def test_shared_key_hmac_sha256_signatures(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    response = await gw.post(inbound("weather in Porto"), shared_key=True)
    assert response.status == 200
    await gw.http.wait_for(lambda h: any("Porto" in b for b in h.bodies()))

    without_key = await make_gateway(whatsapp_shared_key=None)
    response = await without_key.post(inbound("weather in Porto"), shared_key=True)
    assert response.status == 403
    await nothing_happened(without_key)


async def test_a_replayed_message_sid_answers_200_and_does_nothing(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    fields = inbound("weather in Lisbon")
    assert (await gw.post(fields)).status == 200
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    sent = len(gw.http.requests)
    for _ in range(3):
        replay = await gw.post(fields)
        assert replay.status == 200 and await replay.text() == EMPTY_TWIML
    await gw.settle()
    assert len(gw.http.requests) == sent
    assert len(await gw.channel.services.runtime.store.thread_runs(THREAD)) == 1


async def test_forwarded_headers_count_only_when_trusted(make_gateway: MakeGateway) -> None:
    proxy_url = "https://proxy.example.org/channels/whatsapp"
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "proxy.example.org"}
    trusted = await make_gateway(public_base_url=None, trust_forwarded=True)
    fields = inbound("weather in Lisbon")
    response = await trusted.client.post(
        "/channels/whatsapp", data=fields, headers={**sign(proxy_url, fields), **forwarded}
    )
    assert response.status == 200
    await trusted.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    assert "StatusCallback" not in trusted.http.messages()[0].data  # no public URL to call back

    untrusted = await make_gateway(public_base_url=None, trust_forwarded=False)
    fields = inbound("weather in Lisbon")
    response = await untrusted.client.post(
        "/channels/whatsapp", data=fields, headers={**sign(proxy_url, fields), **forwarded}
    )
    assert response.status == 403


def test_the_public_url_comes_from_the_settings() -> None:
    verifier = WebhookVerifier(auth_token=AUTH_TOKEN, public_base_url=f"{PUBLIC}/")
    assert verifier.public_base_url == PUBLIC and verifier.configured
    assert not WebhookVerifier(auth_token=None).configured


async def test_without_twilio_settings_the_channel_is_off(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(twilio_auth_token=None, whatsapp_shared_key=None)
    response = await gw.post(inbound("hello"))
    assert response.status == 503
    body = await response.json()
    assert body["code"] == "whatsapp_not_configured" and "AGORA_TWILIO_AUTH_TOKEN" in body["message"]
    gw = await make_gateway(whatsapp_from=None)
    assert "AGORA_WHATSAPP_FROM" in (await (await gw.post(inbound("hello"))).json())["message"]


def status(sid: str, state: str, code: str | None = None) -> dict[str, str]:
    fields = {
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": state,
        "SmsStatus": state,
        "AccountSid": "AC" + "0" * 32,
        "From": "whatsapp:+14155238886",
        "To": f"whatsapp:{ALICE}",
        "ChannelPrefix": "whatsapp",
        "ApiVersion": "2010-04-01",
    }
    if code:
        fields["ErrorCode"] = code
    return fields


async def test_status_callbacks_are_recorded_and_retryable_failures_resent(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    await gw.say("weather in Lisbon")
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    first = gw.http.messages()[0]
    sent_sid = first.sid
    unsigned = await gw.client.post("/channels/whatsapp/status", data=status(sent_sid, "failed", "30008"))
    assert unsigned.status == 403

    assert (await gw.post(status(sent_sid, "delivered"), url=STATUS_URL)).status == 200
    record = await gw.channel.state.status(sent_sid)
    assert record is not None and record["status"] == "delivered"

    count = len(gw.http.messages())
    for _ in range(2):  # Twilio may repeat a callback: one resend only
        assert (await gw.post(status(sent_sid, "failed", "30008"), url=STATUS_URL)).status == 200
    await gw.settle()
    resent = gw.http.messages()[count:]
    assert len(resent) == 1
    assert {k: resent[0].data[k] for k in ("To", "From", "Body")} == {k: first.data[k] for k in ("To", "From", "Body")}

    # A failure that a resend cannot fix is recorded for the thread.
    third_sid = gw.http.messages()[2].sid
    await gw.post(status(third_sid, "undelivered", "63024"), url=STATUS_URL)
    await gw.settle()
    failures = await gw.channel.state.failures(THREAD)
    assert failures[-1]["reason"] == "twilio 63024" and failures[-1]["event"] == "text-end"
    assert len(gw.http.messages()) == count + 1


async def test_outside_the_window_twilio_refusal_resends_the_approval_with_the_template(
    make_gateway: MakeGateway,
) -> None:
    gw = await make_gateway(whatsapp_approval_template_sid=TEMPLATE)
    await gw.say("refund order 1042")
    await gw.http.wait_messages(1)
    await gw.settle()
    approval = gw.http.messages()[0]
    await gw.post(status(approval.sid, "failed", "63016"), url=STATUS_URL)
    await gw.settle()
    resent = gw.http.messages()[-1]
    assert resent.data["ContentSid"] == TEMPLATE
    assert resent.variables == approval.variables  # the same title, detail and button tokens
    # The template refused as well: recorded, not resent again.
    await gw.post(status(resent.sid, "failed", "63016"), url=STATUS_URL)
    await gw.settle()
    assert len(gw.http.messages()) == 2
    assert "template was refused" in (await gw.channel.state.failures(THREAD))[-1]["reason"]


async def test_a_status_for_an_unknown_message_is_only_recorded(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    sid = "SM" + uuid.uuid4().hex
    assert (await gw.post(status(sid, "failed", "30008"), url=STATUS_URL)).status == 200
    await gw.settle()
    assert gw.http.requests == []
    assert (await gw.channel.state.status(sid) or {}).get("error_code") == "30008"


async def test_a_body_larger_than_any_twilio_webhook_is_refused(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    fields = inbound("x" * 600_000)
    response = await gw.client.post("/channels/whatsapp", data=fields, headers=sign(INBOUND_URL, fields))
    assert response.status == 413
    await nothing_happened(gw)


async def test_a_chunked_body_larger_than_any_twilio_webhook_is_refused(make_gateway: MakeGateway) -> None:
    gw = await make_gateway()
    fields = inbound("x" * 600_000)
    encoded = urlencode(fields).encode()

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the size is known only once read
        for start in range(0, len(encoded), 64 * 1024):
            yield encoded[start : start + 64 * 1024]

    headers = {**sign(INBOUND_URL, fields), "Content-Type": "application/x-www-form-urlencoded"}
    response = await gw.client.post("/channels/whatsapp", data=chunks(), headers=headers)
    assert response.status == 413
    await nothing_happened(gw)


@pytest.mark.parametrize(
    ("encoded", "stored"),
    [
        ("weather+in+Lisbon+%ED%A0%BD", "weather in Lisbon \ufffd\ufffd\ufffd"),  # U+D83D alone, as UTF-8 cannot be
        ("weather+in+Lisbon+%FF", "weather in Lisbon \ufffd"),  # a byte that is never UTF-8
        ("weather+in+Lisbon+%F0%9F%98", "weather in Lisbon \ufffd"),  # an emoji cut short
    ],
)
async def test_a_body_of_invalid_utf8_is_stored_with_replacement_characters(
    make_gateway: MakeGateway, encoded: str, stored: str
) -> None:
    gw = await make_gateway()
    fields = inbound(stored)  # the form as decoded: what the signature covers
    form = "&".join(f"{quote_plus(key)}={quote_plus(value)}" for key, value in fields.items() if key != "Body")
    response = await gw.client.post(
        "/channels/whatsapp",
        data=f"{form}&Body={encoded}".encode("ascii"),
        headers={**sign(INBOUND_URL, fields), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status == 200, await response.text()
    await gw.http.wait_for(lambda h: any(b.startswith("It's") for b in h.bodies()))
    await gw.settle()
    messages = await gw.channel.services.runtime.store.get_messages(THREAD)
    assert messages[0].role == "user" and messages[0].content == stored
    assert all(m.model_dump_json().encode("utf-8") for m in messages)  # every message has a UTF-8 form
    owner = sign_actor_token(Actor(id=f"whatsapp:{ALICE}"), SECRET, 60)
    history = await gw.client.get(f"/agent/threads/{THREAD}", headers={"Authorization": f"Bearer {owner}"})
    assert history.status == 200
    assert (await history.json())["messages"][0]["content"] == stored
