"""The channel's parts on their own: formatting, splitting, texts, identity, retries, units, exports."""

from __future__ import annotations

import json
import logging
import types
from typing import Any

import pytest
from aiohttp import web
from twilio.http import HttpClient
from twilio.http.response import Response
from twilio.rest import Client

import channels.whatsapp as whatsapp
from channels.whatsapp import (
    JsonAsyncTwilioHttpClient,
    OutboundMessage,
    RetryPolicy,
    SettingsSenderResolver,
    TwilioSender,
    WhatsAppSender,
    WhatsAppSendError,
    button_title,
    language_for,
    parse_decision,
    split_message,
    texts_for,
    thread_per_sender,
    to_whatsapp,
)
from gateway._push import units as _units
from gateway.events import TextEndEvent, ToolCompletedEvent, ToolStartedEvent, UiEvent

from .conftest import ACCOUNT_SID, ALICE, AUTH_TOKEN, MESSAGES_URL, MakeGateway, RecordingHttp


def test_exports_are_sorted_and_complete() -> None:
    names = whatsapp.__all__
    # isort's order, as in every package of ours: CONSTANTS, then Classes, then functions.
    assert names == sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    public = {
        name
        for name, value in vars(whatsapp).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(names) == public


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and *italic* and __also bold__", "*bold* and _italic_ and *also bold*"),
        ("***both*** ~~gone~~ _kept_", "*_both_* ~gone~ _kept_"),
        ("# Title\n## Sub **title** ##", "*Title*\n*Sub title*"),
        ("* one\n+ two\n  * nested\n1. first", "- one\n- two\n  - nested\n1. first"),
        (
            "[the docs](https://x.example/docs) and [https://a.example](https://a.example)",
            "the docs (https://x.example/docs) and https://a.example",
        ),
        (
            "![a chart](https://x.example/c.png) <https://x.example/raw>",
            "a chart (https://x.example/c.png) https://x.example/raw",
        ),
        ("`**not bold**` and\n```python\nx = 2 * 3 * 4\n```", "`**not bold**` and\n```x = 2 * 3 * 4```"),
        ("| a | b |\n|---|:--:|\n| 1 | 2 |", "a · b\n1 · 2"),
        ("above\n\n---\n\n\n\nbelow", "above\n\nbelow"),
        ("2 * 3 * 4 = 24, a\\*b", "2 * 3 * 4 = 24, a*b"),
        ("> quoted **words**", "> quoted *words*"),
    ],
)
def test_markdown_to_whatsapp(markdown: str, expected: str) -> None:
    assert to_whatsapp(markdown) == expected


def test_split_prefers_paragraphs_then_sentences_then_words() -> None:
    assert split_message("") == [] and split_message("short") == ["short"]
    paragraphs = ["a" * 900, "b" * 900, "c" * 100]
    assert split_message("\n\n".join(paragraphs)) == ["a" * 900, "b" * 900 + "\n\n" + "c" * 100]
    sentences = " ".join(f"Sentence number {i} ends here." for i in range(200))
    pieces = split_message(sentences, limit=300)
    assert all(len(p) <= 300 and p.endswith("ends here.") for p in pieces)
    assert " ".join(pieces) == sentences
    assert split_message("x" * 3500) == ["x" * 1600, "x" * 1600, "x" * 300]
    words = "word " * 1000
    assert all(len(p) <= 1600 for p in split_message(words)) and "".join(split_message(words)).count("word") == 1000
    with pytest.raises(ValueError):
        split_message("x", limit=0)


def test_decisions_and_texts() -> None:
    assert parse_decision("Yes") == (True, None)
    assert parse_decision(" sim 2 ") == (True, 2)
    assert parse_decision("NÃO #3!") == (False, 3)
    assert parse_decision("no.") == (False, None)
    assert parse_decision("yes please refund") is None and parse_decision("nothing") is None
    assert texts_for("pt").language == "pt-BR" and texts_for("pt_BR").reject == "Recusar"
    assert texts_for("de").language == "en" and texts_for(None).language == "en"
    assert button_title("Refund", "Approve") == "Refund" and button_title("  ", "Approve") == "Approve"
    long = button_title("Approve the very long refund now", "Approve")
    assert len(long) == 20 and long.endswith("…")
    assert texts_for("en").via("web") == "on the web" and texts_for("en").via("slack") == "slack"


async def test_identity() -> None:
    sender = WhatsAppSender.from_webhook(f"whatsapp:{ALICE}", ALICE.lstrip("+"), "Alice")
    assert (sender.address, sender.e164, sender.profile_name) == (f"whatsapp:{ALICE}", ALICE, "Alice")
    assert WhatsAppSender.from_webhook("whatsapp:+1 555 123 0001").e164 == "+15551230001"
    with pytest.raises(ValueError):
        WhatsAppSender.from_webhook("sms:nobody")
    resolver = SettingsSenderResolver(roles={"15551230001": ["admin"]}, allow_unknown=False)
    actor = await resolver.resolve(sender)
    assert actor is not None and (actor.id, actor.roles) == (f"whatsapp:{ALICE}", ["admin"])
    stranger = WhatsAppSender.from_webhook("whatsapp:+447700900123")
    assert await resolver.resolve(stranger) is None
    assert (await SettingsSenderResolver().resolve(stranger)).roles == ["member"]  # type: ignore[union-attr]
    assert thread_per_sender(actor, sender) == "whatsapp-15551230001"
    assert language_for(sender) == "en" and language_for(stranger, {"+447700900123": ["pt-BR"]}) == "pt-BR"
    assert language_for(WhatsAppSender.from_webhook("whatsapp:+5511987650002")) == "pt-BR"


def test_retry_delays_grow_and_are_capped() -> None:
    policy = RetryPolicy(attempts=5, base_delay=1.0, factor=2.0, max_delay=3.0)
    assert 0.75 <= policy.delay(1) <= 1.0 and 1.5 <= policy.delay(2) <= 2.0 and 2.25 <= policy.delay(4) <= 3.0
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


async def test_the_sender_maps_errors_and_uses_the_messaging_service() -> None:
    http = RecordingHttp(script=[(400, {"code": 63007, "message": "no such channel", "status": 400}), 503, 503])
    sender = TwilioSender(
        Client(ACCOUNT_SID, AUTH_TOKEN, http_client=http),
        from_=None,
        messaging_service_sid="MG" + "1" * 32,
        retry=RetryPolicy(attempts=2, base_delay=0.001),
    )
    message = OutboundMessage(to=f"whatsapp:{ALICE}", body="hi", media_url="https://gw.example.test/media/x")
    with pytest.raises(WhatsAppSendError) as refused:
        await sender.send(message)
    assert (refused.value.retryable, refused.value.http_status, refused.value.twilio_code) == (False, 400, 63007)
    with pytest.raises(WhatsAppSendError) as unavailable:
        await sender.send(message)
    assert unavailable.value.retryable and unavailable.value.http_status == 503
    sid = await sender.send(message)
    assert sid.startswith("SM")
    data = http.requests[-1].data
    assert data["MessagingServiceSid"] == "MG" + "1" * 32 and "From" not in data
    assert (data["Body"], data["MediaUrl"]) == ("hi", ["https://gw.example.test/media/x"])
    assert [r.status for r in http.requests] == [400, 503, 503, 201]


class SyncRecordingHttp(HttpClient):  # type: ignore[misc]
    """A synchronous twilio HTTP client: the sender must run it off the event loop."""

    def __init__(self) -> None:
        super().__init__(logging.getLogger("tests.twilio.sync"), is_async=False)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def request(self, method: str, uri: str, **kwargs: Any) -> Response:
        import threading

        assert threading.current_thread() is not threading.main_thread()
        self.calls.append((uri, dict(kwargs.get("data") or {})))
        return Response(201, json.dumps({"sid": f"SM{len(self.calls):032d}", "status": "queued"}))


async def test_a_synchronous_twilio_client_runs_in_a_worker_thread() -> None:
    http = SyncRecordingHttp()
    sender = TwilioSender(Client(ACCOUNT_SID, AUTH_TOKEN, http_client=http), from_="whatsapp:+14155238886")
    assert await sender.send(OutboundMessage(to=f"whatsapp:{ALICE}", body="hello")) == "SM" + "1".zfill(32)
    assert http.calls == [(MESSAGES_URL, {"To": f"whatsapp:{ALICE}", "From": "whatsapp:+14155238886", "Body": "hello"})]


async def test_the_json_http_client_sends_json_bodies_as_json(aiohttp_server: Any) -> None:
    seen: list[tuple[str, bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.content_type, await request.read()))
        return web.json_response({"sid": "HX1"}, status=201)

    app = web.Application()
    app.router.add_post("/v1/Content", handler)
    server = await aiohttp_server(app)
    client = JsonAsyncTwilioHttpClient()
    try:
        url = str(server.make_url("/v1/Content"))
        body = {"friendly_name": "x", "types": {"twilio/text": {"body": "{{1}}"}}}
        response = await client.request("POST", url, data=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 201
        await client.request("POST", url, data={"To": "whatsapp:+1"}, headers={})
    finally:
        await client.close()
    assert seen[0] == ("application/json", json.dumps(body).encode())
    assert seen[1] == ("application/x-www-form-urlencoded", b"To=whatsapp%3A%2B1")


def _event(cls: type[Any], seq: int, **fields: Any) -> Any:
    return cls(seq=seq, thread_id="t", run_id="r", **fields)


def test_a_calls_ui_events_are_delivered_after_its_outcome() -> None:
    started = _event(ToolStartedEvent, 1, tool_call_id="c1", tool="x", kind="read", input={}, running="Going")
    card = _event(UiEvent, 2, id="u1", component="KpiCards", props={}, tool_call_id="c1")
    other = _event(UiEvent, 3, id="u2", component="KpiCards", props={}, tool_call_id="c2")
    done = _event(ToolCompletedEvent, 4, tool_call_id="c2", tool="x", done="Done")
    text = _event(TextEndEvent, 5, message_id="m", text="hi")
    units = _units([started, card, other, done, text])
    assert [[e.seq for e in unit] for unit in units] == [[1], [2], [4, 3], [5]]
    # A unit delivered in part resumes with the same shape, whatever was read with it.
    assert [[e.seq for e in unit] for unit in _units([other, done, text], resume=[4, 3])] == [[4, 3], [5]]


async def test_a_long_answer_interrupted_midway_resumes_where_it_stopped(make_gateway: MakeGateway) -> None:
    import aiohttp

    from gateway import Agent, Runtime
    from gateway.models import ScriptedModel, ScriptStep

    text = "\n\n".join(f"Paragraph {i}. " + "words " * 250 for i in range(3))
    runtime = Runtime(agents=[Agent(name="a")], model=ScriptedModel([ScriptStep(text=text)]))
    gw = await make_gateway(runtime, http=RecordingHttp(script=[201, *[aiohttp.ClientConnectionError()] * 3]))
    await gw.say("talk")
    await gw.http.wait_for(lambda h: len(h.bodies()) >= 3)
    await gw.settle()
    bodies = gw.http.bodies()
    assert [b.split(".")[0] for b in bodies] == ["Paragraph 0", "Paragraph 1", "Paragraph 2"]
