"""A refusal in each channel's words; ``guard-flagged`` tolerated by every channel; the metric."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from channels.a2a._view import TaskView
from channels.ag_ui import AgUiTranslator
from gateway import Agent, EventHooks, GuardContext, GuardVerdict, PushPort, Runtime
from gateway.events import GuardFlaggedEvent, RunEvent, RunStartedEvent, UiEvent
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tests.web.conftest import ALICE, connect, token_for
from tests.whatsapp.conftest import BRUNA, MakeGateway

from .conftest import Recording

MakeClient = Callable[..., Awaitable[Any]]


class NoCursing:
    name = "no_cursing"

    async def check_input(self, text: str, ctx: GuardContext) -> GuardVerdict | None:
        if "darn" in text:
            return GuardVerdict.refuse("cursing")
        if "hmm" in text:
            return GuardVerdict.flag("hesitant")
        return None


def guarded_runtime(**agent: Any) -> Runtime:
    model = ScriptedModel(lambda request, index: ScriptStep(text="Fine."))
    return Runtime(agents=[Agent(name="a", input_guards=[NoCursing()], **agent)], model=model, store=MemoryStore())


async def test_the_web_socket_shows_the_refusal_and_metrics_count_every_verdict(make_client: MakeClient) -> None:
    client = await make_client(guarded_runtime())
    socket = await connect(client, token=token_for(ALICE))
    await socket.hello()
    frames = await socket.turn("darn it")
    errors = [f for f in frames if f["type"] == "run-error"]
    assert [(f["code"], f["message"]) for f in errors] == [("input_refused", "Sorry, I can't help with that message.")]
    assert "text-delta" not in [f["type"] for f in frames]
    frames = await socket.turn("hmm, hello")
    flagged = [f for f in frames if f["type"] == "guard-flagged"]
    assert [(f["direction"], f["guard"], f["reason"]) for f in flagged] == [("input", "no_cursing", "hesitant")]
    assert [f["text"] for f in frames if f["type"] == "text-end"] == ["Fine."]
    await socket.turn("hello")
    metrics = await (await client.get("/metrics")).text()
    for verdict, count in (("refuse", 1), ("flag", 1), ("allow", 1)):
        line = f'agora_guard_verdicts_total{{direction="input",guard="no_cursing",verdict="{verdict}"}} {count}.0'
        assert line in metrics


@pytest.mark.parametrize(
    ("number", "said"),
    [
        ("+15551230001", "Sorry, I can't help with that message."),
        (BRUNA, "Desculpe, não posso ajudar com essa mensagem."),
    ],
    ids=["en", "pt-BR"],
)
async def test_whatsapp_words_the_refusal_in_the_persons_language(
    make_gateway: MakeGateway, number: str, said: str
) -> None:
    gw = await make_gateway(guarded_runtime())
    await gw.say("darn it", number=number)
    await gw.http.wait_messages(1)
    await gw.settle()
    assert gw.http.bodies() == [said]


async def test_whatsapp_says_a_guards_own_message_as_it_wrote_it(make_gateway: MakeGateway) -> None:
    guard = Recording(GuardVerdict.refuse("off topic", message="I only talk about orders."))
    runtime = Runtime(
        agents=[Agent(name="a", input_guards=[guard])],
        model=ScriptedModel([ScriptStep(text="never")]),
        store=MemoryStore(),
    )
    gw = await make_gateway(runtime)
    await gw.say("what about football?", number=BRUNA)
    await gw.http.wait_messages(1)
    await gw.settle()
    assert gw.http.bodies() == ["I only talk about orders."]


async def test_whatsapp_words_a_refused_answer(make_gateway: MakeGateway) -> None:
    runtime = Runtime(
        agents=[Agent(name="a", output_guards=[Recording(GuardVerdict.refuse("leak"))])],
        model=ScriptedModel(lambda request, index: ScriptStep(text="the password is hunter2")),
        store=MemoryStore(),
    )
    gw = await make_gateway(runtime)
    await gw.say("password?", number=BRUNA)
    await gw.http.wait_messages(1)
    await gw.settle()
    assert gw.http.bodies() == ["Desculpe, não posso compartilhar essa resposta."]
    assert "hunter2" not in "".join(gw.http.bodies())


def test_every_channel_renderer_has_a_hook_for_guard_flagged() -> None:
    for cls in (AgUiTranslator, TaskView, PushPort):
        overrides = cls.on_guard_flagged is not EventHooks.on_guard_flagged
        assert overrides or cls.default is not EventHooks.default, cls.__name__


async def test_ag_ui_translates_a_flag_to_nothing_within_the_run() -> None:
    async def deliver(event: UiEvent) -> dict[str, Any]:
        return {}

    async def name(event: RunEvent) -> str:
        return event.run_id

    translator = AgUiTranslator("t1", deliver_ui=deliver, name_run=name)
    started = await translator.translate(RunStartedEvent(thread_id="t1", run_id="r1", agent="a"))
    flag = GuardFlaggedEvent(thread_id="t1", run_id="r1", direction="output", guard="g", reason="odd")
    assert [e.type for e in started] == ["RUN_STARTED"]
    assert await translator.translate(flag) == []
    assert translator.open
