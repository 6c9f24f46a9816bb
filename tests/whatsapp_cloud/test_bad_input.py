"""Bad input on the Cloud API webhook: 4xx and nothing recorded, replays ignored, buttons refused."""

from __future__ import annotations

import io
import logging

import pytest

from channels.whatsapp import WhatsAppSenderOptions

from . import payloads as p
from .conftest import PATH, Cloud, MakeCloud, thread_of
from .tools_ import refund_runtime, text_runtime

THREAD = thread_of(p.ALICE)


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gateway.http"]


async def test_forged_signature_is_403_and_nothing_is_recorded(
    make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    caplog.set_level(logging.INFO, "gateway.http")
    wamid = p.wamid()
    genuine = p.dumps(p.text("hi", id=wamid))
    for signature in [p.signature(genuine, "not-the-app-secret"), "sha256=" + "0" * 64, "garbage"]:
        response = await cloud.post(genuine, signature=signature)
        assert response.status == 403
    tampered = await cloud.post(genuine.replace(b'"hi"', b'"ho"'), signature=p.signature(genuine))
    assert tampered.status == 403
    unsigned = await cloud.client.post(PATH, data=genuine, headers={"Content-Type": "application/json"})
    assert unsigned.status == 403 and (await unsigned.json())["code"] == "forbidden"
    lines = refusal_lines(caplog)
    assert len(lines) == 5 and all("refused 403 forbidden" in line and PATH in line for line in lines)
    await cloud.settle()
    state = cloud.channel.delivery.state
    assert cloud.graph.requests == [] and await state.get(state.key("msg", wamid)) is None
    assert await state.target(THREAD) is None

    # The genuine notification still goes through afterwards: nothing was claimed.
    assert (await cloud.post(genuine)).status == 200
    await cloud.graph.wait_for(lambda g: g.texts() == ["Hello Alice."])
    await cloud.settle()


async def test_verification_handshake(make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture) -> None:
    cloud = await make_cloud()
    caplog.set_level(logging.INFO, "gateway.http")
    query = {"hub.mode": "subscribe", "hub.verify_token": p.VERIFY_TOKEN, "hub.challenge": "1158201444"}
    good = await cloud.client.get(PATH, params=query)
    assert good.status == 200 and good.content_type == "text/plain" and await good.text() == "1158201444"
    wrong = await cloud.client.get(PATH, params={**query, "hub.verify_token": "guess"})
    assert wrong.status == 403 and (await wrong.json())["code"] == "forbidden"
    no_mode = await cloud.client.get(PATH, params={k: v for k, v in query.items() if k != "hub.mode"})
    assert no_mode.status == 403
    assert len(refusal_lines(caplog)) == 2


async def test_replayed_message_id_is_ignored(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("First answer.", "Second answer."))
    payload = p.text("hello", id="wamid.REPLAYED")
    for _ in range(3):
        assert (await cloud.post(payload)).status == 200
    await cloud.graph.wait_for(lambda g: g.texts() == ["First answer."])
    await cloud.settle()
    runtime = cloud.channel.services.runtime
    assert len(await runtime.thread_runs(THREAD)) == 1 and cloud.graph.texts() == ["First answer."]


async def approval(cloud: Cloud) -> tuple[str, str]:
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["type"] == "interactive" for r in g.messages()))
    await cloud.settle()
    (ask,) = [r for r in cloud.graph.messages() if r.json and r.json["type"] == "interactive"]
    assert ask.json is not None
    approve, reject = (b["reply"]["id"] for b in ask.json["interactive"]["action"]["buttons"])
    return approve, reject


async def test_a_button_from_another_number_is_not_theirs(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(refund_runtime(refunded))
    approve, _ = await approval(cloud)
    assert (await cloud.post(p.button_reply(approve, "Refund", number=p.BRUNA))).status == 200
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["to"] == p.BRUNA for r in g.messages()))
    await cloud.settle()
    (to_bruna,) = [r for r in cloud.graph.messages() if r.json and r.json["to"] == p.BRUNA]
    assert to_bruna.json is not None and to_bruna.json["text"]["body"] == "Esse botão não é para você."
    assert refunded == [] and len(await cloud.channel.services.runtime.pending_approvals(THREAD)) == 1

    # Alice's own tap still decides: the foreign tap used nothing up.
    assert (await cloud.post(p.button_reply(approve, "Refund"))).status == 200
    await cloud.graph.wait_for(lambda g: any(t.startswith("Done:") for t in g.texts()))
    await cloud.settle()
    assert refunded == ["1042"]


async def test_used_and_unknown_buttons(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(refund_runtime(refunded))
    approve, reject = await approval(cloud)
    await cloud.post(p.button_reply(reject, "Reject"))
    await cloud.graph.wait_for(lambda g: len(g.texts()) >= 1)
    await cloud.settle()
    before = len(cloud.graph.texts())
    await cloud.post(p.button_reply(approve, "Refund"))
    await cloud.graph.wait_for(lambda g: "That was already decided." in g.texts())
    await cloud.post(p.quick_reply("agora:not-a-token-we-made", "Refund"))
    await cloud.graph.wait_for(lambda g: "That approval has expired." in g.texts())
    await cloud.settle()
    assert refunded == [] and len(cloud.graph.texts()) == before + 2


async def test_non_json_is_400_and_oversized_is_413(make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture) -> None:
    cloud = await make_cloud()
    caplog.set_level(logging.INFO, "gateway.http")
    not_json = await cloud.post(b"entry=1&object=whatsapp")
    assert not_json.status == 400 and (await not_json.json())["code"] == "invalid_json"
    big = b'{"object": "' + b"x" * (1024 * 1024) + b'"}'
    declared = await cloud.client.post(
        PATH, data=io.BytesIO(big), headers={"X-Hub-Signature-256": p.signature(big), "Content-Length": str(len(big))}
    )
    assert declared.status == 413

    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(17):
            yield b"x" * 65536

    chunked = await cloud.client.post(PATH, data=chunks(), headers={"X-Hub-Signature-256": "sha256=00"})
    assert chunked.status == 413
    lines = refusal_lines(caplog)
    assert len(lines) == 3 and "400 invalid_json" in lines[0] and "413 payload_too_large" in lines[1]
    assert cloud.graph.requests == []


async def test_unknown_shapes_are_ignored_with_a_log_line(
    make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture
) -> None:
    cloud = await make_cloud()
    caplog.set_level(logging.INFO, "channels.whatsapp.cloud")
    reaction = p.message("reaction", {"message_id": "wamid.X", "emoji": "👍"})
    assert (await cloud.post(reaction)).status == 200
    assert (await cloud.post({"object": "page", "entry": "nope"})).status == 200
    assert (await cloud.post(p.notification({"messages": []}, pnid="999"))).status == 200
    await cloud.settle()
    ignored = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert "WhatsApp Cloud notification: ignored a message of type reaction" in ignored
    assert "WhatsApp Cloud notification: ignored not a WhatsApp Business Account notification" in ignored


async def test_media_we_do_not_read_is_answered_text_only(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("About that caption."))
    image = p.message("video", {"id": "MEDIA1", "mime_type": "video/mp4", "caption": "what is this?"})
    assert (await cloud.post(image)).status == 200
    await cloud.graph.wait_for(lambda g: "About that caption." in g.texts())
    await cloud.settle()
    assert cloud.graph.texts() == ["I can only read text messages for now.", "About that caption."]


async def test_not_configured_is_503(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(app_secret=None)
    response = await cloud.post(p.text("hi"))
    assert response.status == 503 and (await response.json())["code"] == "whatsapp_cloud_not_configured"
    assert "AGORA_WHATSAPP_CLOUD_APP_SECRET" in (await response.json())["message"]


async def test_unknown_senders_are_refused_politely_once(make_cloud: MakeCloud) -> None:
    senders = WhatsAppSenderOptions(_env_file=None, allow_unknown=False, roles={f"+{p.ALICE}": ["admin"]})  # type: ignore[call-arg]
    cloud = await make_cloud(text_runtime("Hello Alice."), senders=senders)
    for _ in range(2):
        await cloud.say("olá", number=p.BRUNA)
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: "Hello Alice." in g.texts())
    await cloud.settle()
    to_bruna = [r.json["text"]["body"] for r in cloud.graph.messages() if r.json and r.json["to"] == p.BRUNA]
    assert len(to_bruna) == 1 and "assistente" in to_bruna[0]
    runtime = cloud.channel.services.runtime
    assert await runtime.thread_runs(thread_of(p.BRUNA)) == []
    (run,) = await runtime.thread_runs(THREAD)
    assert run.actor.roles == ["admin"]


async def test_log_lines_never_carry_a_phone_number(make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture) -> None:
    # A person is named in the log by the actor's pseudonym (gateway._logs.actor_hash), never by
    # the number itself: not when an unknown number writes, nor when someone taps another's button.
    caplog.set_level(logging.INFO)
    stranger = "447700900123"
    known = {f"+{p.ALICE}": ["admin"], f"+{p.BRUNA}": ["customer"]}
    senders = WhatsAppSenderOptions(_env_file=None, allow_unknown=False, roles=known)  # type: ignore[call-arg]
    cloud = await make_cloud(refund_runtime([]), senders=senders)
    await cloud.say("hello", number=stranger)
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["to"] == stranger for r in g.messages()))
    approve, _ = await approval(cloud)
    assert (await cloud.post(p.button_reply(approve, "Refund", number=p.BRUNA))).status == 200
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["to"] == p.BRUNA for r in g.messages()))
    await cloud.settle()
    said = [record.getMessage() for record in caplog.records]
    assert any("refused unknown" in line for line in said) and any("tapped a button" in line for line in said)
    for number in (p.ALICE, p.BRUNA, stranger):
        assert not [line for line in said if number[-7:] in line], number
