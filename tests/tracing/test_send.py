"""A push channel's sends are spans of their run's trace, with the provider's HTTP status (Telegram's Bot API fake)."""

from __future__ import annotations

from opentelemetry import trace

from ..telegram.botapi import BotApi
from ..telegram.conftest import MakeGateway, make_gateway, text_runtime
from ..telegram.updates import message
from .conftest import Spans

__all__ = ["make_gateway"]  # the Telegram tests' fixture, used here


async def test_each_send_is_a_span_of_its_run_with_the_provider_status(make_gateway: MakeGateway, spans: Spans) -> None:
    bot = BotApi()
    bot.script("sendMessage", 400)  # the first text is refused, the second goes
    gw = await make_gateway(text_runtime("First.", "Second."), bot=bot)
    await gw.send(message("hi"))
    await gw.bot.wait_for(lambda b: bool(b.of("sendMessage", ok=False)))
    await gw.settle()
    await gw.send(message("again"))
    await gw.bot.wait_for(lambda b: b.texts() == ["Second\\."])
    await gw.settle()

    sends = spans.named("send telegram")
    drives = spans.named("invoke_agent")
    assert len(sends) == 2 and len(drives) == 2
    for send, drive in zip(sends, drives, strict=True):
        assert send.attributes is not None and send.attributes["agora.channel"] == "telegram"
        assert send.context is not None and drive.context is not None
        assert send.context.trace_id == drive.context.trace_id  # delivered in the run's trace
        assert send.parent is not None and send.parent.span_id == drive.context.span_id
    refused, sent = sends
    assert refused.attributes is not None and refused.attributes["http.response.status_code"] == 400
    assert (
        refused.status.status_code is trace.StatusCode.ERROR and refused.attributes["error.type"] == "push_send_failed"
    )
    assert sent.attributes is not None and sent.attributes["http.response.status_code"] == 200
    assert sent.status.status_code is trace.StatusCode.UNSET
