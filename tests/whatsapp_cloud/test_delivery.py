"""Delivery on the Cloud API: Graph 429/5xx retried (sent once), components uploaded, statuses, the window."""

from __future__ import annotations

import io
import logging
import time

import pytest
from PIL import Image

from channels.whatsapp import DeliveryOptions
from gateway import Undeliverable
from tools import Actor, UiCapabilities

from . import payloads as p
from .conftest import Cloud, MakeCloud, thread_of
from .graph import DROP, MEDIA_PATH, MESSAGES_PATH, TOKEN, Raw
from .tools_ import refund_runtime, text_runtime

THREAD = thread_of(p.ALICE)
MEDIA = DeliveryOptions(
    slow_after=0.05, lock_retry=0.01, redeliver_after=0.02, max_rounds=3, capabilities=UiCapabilities(formats=["image"])
)


async def test_429_and_5xx_then_success_is_sent_exactly_once(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    cloud.graph.script.extend([429, 503])
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: g.texts() == ["Hello Alice."])
    await cloud.settle()
    tries = [r for r in cloud.graph.requests if r.path == MESSAGES_PATH]
    assert [r.status for r in tries] == [429, 503, 200]
    assert tries[0].json == tries[1].json == tries[2].json
    assert cloud.graph.texts() == ["Hello Alice."]
    assert await cloud.channel.delivery.state.failures(THREAD) == []


async def test_an_unreachable_graph_is_tried_again_and_nothing_is_lost(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    cloud.graph.script.extend([DROP, DROP])
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: g.texts() == ["Hello Alice."])
    await cloud.settle()
    assert len(cloud.graph.requests) == 3 and cloud.graph.texts() == ["Hello Alice."]
    assert await cloud.channel.delivery.state.failures(THREAD) == []


async def test_a_refused_message_is_recorded_not_retried(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    cloud.graph.script.append((400, {"error": {"code": 131026, "message": "Message undeliverable"}}))
    await cloud.say("hi")
    await cloud.settle()
    assert len(cloud.graph.requests) == 1
    (failure,) = await cloud.channel.delivery.state.failures(THREAD)
    assert (failure["reason"], failure["provider_code"]) == ("refused", "131026")
    assert failure["message"]["content"]["body"] == "Hello Alice."


@pytest.mark.parametrize("status", [200, 400])
async def test_a_garbled_answer_is_never_sent_twice_nor_a_traceback(
    make_cloud: MakeCloud, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    caplog.set_level(logging.INFO)
    cloud = await make_cloud(text_runtime("Hello Alice."))
    cloud.graph.script.append(Raw(status, b"[" * 100_000 + b"]" * 100_000))
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: bool(g.messages(ok=False)))
    await cloud.settle()  # recorded at once as refused below: no later round can send it again
    assert len(cloud.graph.messages(ok=False)) == 1
    [failure] = await cloud.channel.delivery.state.failures(THREAD)
    assert failure["reason"] == "refused"
    assert not [r.getMessage() for r in caplog.records if r.exc_info]


async def test_a_component_is_uploaded_then_sent_as_an_image(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(refund_runtime(refunded, receipt=True), delivery=MEDIA)
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: any(r.json and r.json["type"] == "interactive" for r in g.messages()))
    await cloud.settle()
    ask = cloud.graph.messages()[0]
    assert ask.json is not None
    approve = ask.json["interactive"]["action"]["buttons"][0]["reply"]["id"]
    await cloud.post(p.button_reply(approve, "Refund"))
    await cloud.graph.wait_for(lambda g: any(t.startswith("Done:") for t in g.texts()), timeout=60)
    await cloud.settle()

    (upload,) = cloud.graph.uploads()
    assert upload.method == "POST" and upload.path == MEDIA_PATH
    assert upload.headers["Authorization"] == f"Bearer {TOKEN}"
    assert upload.parts["messaging_product"].value == b"whatsapp"
    assert upload.parts["type"].value == b"image/png"
    file = upload.parts["file"]
    assert file.content_type == "image/png" and file.filename and file.filename.endswith(".png")
    assert Image.open(io.BytesIO(file.value)).format == "PNG"
    media_id = upload.answer["id"] if upload.answer else None
    kinds = [r.json["type"] for r in cloud.graph.messages() if r.json]
    assert kinds == ["interactive", "text", "image", "text"]  # ✓ line, then its receipt, then the reply
    (image,) = [r.json for r in cloud.graph.messages() if r.json and r.json["type"] == "image"]
    assert image["to"] == p.ALICE and image["image"]["id"] == media_id
    assert "Refunded" in image["image"]["caption"] and "filename" not in image["image"]
    assert cloud.graph.requests.index(upload) < [r.json for r in cloud.graph.requests].index(image)


async def test_a_failed_status_with_a_retryable_code_is_resent_once(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 1)
    await cloud.settle()
    (first,) = cloud.graph.messages()

    failed = p.status(first.message_id, "failed", code=131056)
    for _ in range(2):  # Meta repeats notifications: one resend
        assert (await cloud.post(failed)).status == 200
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 2)
    await cloud.settle()
    first_again, resent = cloud.graph.messages()
    assert resent.json == first.json and resent.message_id != first.message_id

    for state in ("sent", "delivered", "read"):
        assert (await cloud.post(p.status(resent.message_id, state))).status == 200
    await cloud.settle()
    assert len(cloud.graph.requests) == 2  # recorded only
    store = cloud.channel.state
    last = await store.status(resent.message_id)
    assert last is not None and last["status"] == "read"
    failed_status = await store.status(first.message_id)
    assert failed_status is not None and failed_status["codes"] == ["131056"]
    assert await store.failures(THREAD) == []


async def test_resends_end_and_final_codes_are_recorded(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(text_runtime("Hello Alice."))
    await cloud.say("hi")
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 1)
    await cloud.settle()
    for count in (2, 3):  # two resends allowed
        await cloud.post(p.status(cloud.graph.messages()[-1].message_id, "failed", code=130429))
        await cloud.graph.wait_for(lambda g, count=count: len(g.messages()) == count)  # type: ignore[misc]
        await cloud.settle()
    await cloud.post(p.status(cloud.graph.messages()[-1].message_id, "failed", code=130429))
    await cloud.settle()
    assert len(cloud.graph.messages()) == 3
    (failure,) = await cloud.channel.delivery.state.failures(THREAD)
    assert failure["reason"] == "whatsapp 130429" and failure["event"] == "text-end"


async def test_an_approval_outside_the_window_goes_as_the_template(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(
        refund_runtime(refunded), approval_template="agora_approval", approval_template_language="en_US"
    )
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 1)
    await cloud.settle()
    (ask,) = cloud.graph.messages()
    assert ask.json is not None and ask.json["type"] == "interactive"
    buttons = ask.json["interactive"]["action"]["buttons"]

    # Meta answers that the window had closed (131047): the approval goes again as the template.
    await cloud.post(p.status(ask.message_id, "failed", code=131047))
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 2)
    await cloud.settle()
    template = cloud.graph.messages()[1].json
    assert template is not None and template["type"] == "template" and template["to"] == p.ALICE
    assert template["template"] == {
        "name": "agora_approval",
        "language": {"code": "en_US"},
        "components": [
            {"type": "body", "parameters": [{"type": "text", "text": "Refund order 1042?"}]},
            {
                "type": "button",
                "sub_type": "quick_reply",
                "index": "0",
                "parameters": [{"type": "payload", "payload": buttons[0]["reply"]["id"]}],
            },
            {
                "type": "button",
                "sub_type": "quick_reply",
                "index": "1",
                "parameters": [{"type": "payload", "payload": buttons[1]["reply"]["id"]}],
            },
        ],
    }
    # Its quick-reply tap decides like a reply button.
    await cloud.post(p.quick_reply(buttons[0]["reply"]["id"], "Refund"))
    await cloud.graph.wait_for(lambda g: any(t.startswith("Done:") for t in g.texts()))
    await cloud.settle()
    assert refunded == ["1042"]


async def close_window(cloud: Cloud) -> None:
    """Alice last wrote two days ago."""
    state = cloud.channel.state
    record = await state.sender(f"+{p.ALICE}")
    assert record is not None
    await state.set(state.key("sender", f"+{p.ALICE}"), {**record, "last_inbound": time.time() - 2 * 86400})


async def test_outside_the_window_free_form_messages_are_recorded_not_sent(make_cloud: MakeCloud) -> None:
    refunded: list[str] = []
    cloud = await make_cloud(refund_runtime(refunded))
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 1)
    await cloud.settle()
    await close_window(cloud)
    runtime = cloud.channel.services.runtime
    (pending,) = await runtime.pending_approvals(THREAD)
    await runtime.decide(pending.tool_call_id, Actor(id=f"whatsapp:+{p.ALICE}", roles=["member"]), via="web")
    (run,) = await runtime.thread_runs(THREAD)
    assert await runtime.wait(run.run_id, timeout=10) == "completed"
    await cloud.settle()
    assert refunded == ["1042"] and len(cloud.graph.messages()) == 1  # nothing free-form left the window
    failures = await cloud.channel.delivery.state.failures(THREAD)
    assert [(f["event"], f["reason"]) for f in failures] == [
        ("approval-settled", "outside_window"),
        ("tool-completed", "outside_window"),
        ("text-end", "outside_window"),
    ]


async def test_an_approval_outside_the_window_without_a_template_is_recorded(make_cloud: MakeCloud) -> None:
    cloud = await make_cloud(refund_runtime([]))
    port = cloud.channel.port
    assert port.options.approval_template is None
    await cloud.say("refund order 1042")
    await cloud.graph.wait_for(lambda g: len(g.messages()) == 1)
    await cloud.settle()
    # The same approval drawn again for a person whose window has closed.
    await close_window(cloud)
    target = await cloud.channel.delivery.target(THREAD)
    assert target is not None
    event = next(e for e in await cloud.channel.services.runtime.read_events(THREAD) if e.type == "approval-requested")
    tokens = await cloud.channel.delivery.approvals.tokens(event, target)  # type: ignore[arg-type]
    (part,) = await port.approval_parts(target, event, tokens, None)  # type: ignore[arg-type]
    assert part == Undeliverable("outside_window_no_template")
