"""The widget's queued bubbles in Chromium: a message sent while a run works, edited, removed, then run."""

from __future__ import annotations

import asyncio

from playwright.async_api import expect

from gateway import Agent, Runtime
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.stores import MemoryStore, QueuedMessage

from .conftest import BROWSER_TESTS, Chat, MakeGateway, OpenPage

pytestmark = BROWSER_TESTS


class Held:
    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.model = ScriptedModel(self.step)

    async def step(self, request: ModelRequest, index: int) -> ScriptStep:
        if index == 0:
            self.entered.set()
            async with asyncio.timeout(20):
                await self.release.wait()
        return ScriptStep(text=f"Answer to {request.last_user_text}.")


async def test_a_queued_bubble_is_edited_removed_and_then_runs(make_gateway: MakeGateway, open_page: OpenPage) -> None:
    held = Held()
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=MemoryStore())
    page = await open_page(await make_gateway(runtime))
    chat = Chat(page)
    await chat.ready()
    await chat.say("first question")
    async with asyncio.timeout(10):
        await held.entered.wait()
    await expect(chat.stop_button).to_be_visible()

    # Sent while the first run works: each waits in a queued bubble that says so.
    await chat.say("second with a typo")
    queued = chat.root.locator(".ac-msg--user[data-state=queued]")
    await expect(queued).to_have_count(1)
    await chat.say("third, never mind")
    await expect(queued).to_have_count(2)
    await expect(queued.nth(0).locator(".ac-msg__body")).to_have_text("second with a typo")
    await expect(queued.nth(0).locator(".ac-queued-note")).to_have_text("Queued: runs after the current answer")
    await expect(queued.nth(0).get_by_role("button", name="Edit queued message")).to_be_visible()

    # Edit the first queued message: the server's message-queued (edited) frame updates it.
    await queued.nth(0).get_by_role("button", name="Edit queued message").click()
    editor = queued.nth(0).locator(".ac-queued-editor")
    await expect(editor).to_be_focused()
    await editor.fill("second, fixed")
    await queued.nth(0).get_by_role("button", name="Save").click()
    await expect(queued.nth(0).locator(".ac-msg__body")).to_have_text("second, fixed")
    await expect(editor).to_have_count(0)

    # Remove the other: gone from the page and from the server's queue.
    await queued.nth(1).get_by_role("button", name="Remove queued message").click()
    await expect(queued).to_have_count(1)
    held.release.set()

    # The first answer, then the queued message turns into the next run's user message.
    await chat.turn_ends(0)
    await chat.turn_ends(1)
    await expect(queued).to_have_count(0)
    await expect(chat.user_texts).to_have_text(["first question", "second, fixed"])
    await expect(chat.assistant_texts).to_have_text(["Answer to first question.", "Answer to second, fixed."])
    await expect(chat.root.locator(".ac-msg__queued")).to_have_count(0)
    run_id = await chat.turn(0).get_attribute("data-run-id")
    assert run_id is not None
    thread_id = (await runtime.get_run(run_id)).thread_id
    runs = await runtime.thread_runs(thread_id)
    assert [(r.turn.text, r.status) for r in runs] == [
        ("first question", "completed"),
        ("second, fixed", "completed"),
    ]


class _RunEndsAfterEnqueue(MemoryStore):
    """A store where, once armed, the thread's run ends and drains just after a message is queued.

    The drain begins that message before ``message-queued`` is written: the log then holds its
    ``message-dequeued`` and ``run-started`` first, and the send's ack says ``queued``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.after_enqueue: asyncio.Event | None = None
        self.ended: asyncio.Event = asyncio.Event()

    async def enqueue_message(self, item: QueuedMessage, *, limit: int, first: bool = False) -> int:
        position = await super().enqueue_message(item, limit=limit, first=first)
        if self.after_enqueue is not None:
            release, self.after_enqueue = self.after_enqueue, None
            release.set()
            async with asyncio.timeout(10):
                while await self.queued_messages(item.thread_id):  # the run ended and drained it
                    await asyncio.sleep(0.01)
        return position


async def test_a_message_begun_before_its_queued_event_is_no_queued_bubble(
    make_gateway: MakeGateway, open_page: OpenPage
) -> None:
    held = Held()
    store = _RunEndsAfterEnqueue()
    runtime = Runtime(agents=[Agent(name="assistant")], model=held.model, store=store)
    page = await open_page(await make_gateway(runtime))
    chat = Chat(page)
    await chat.ready()
    await chat.say("first question")
    async with asyncio.timeout(10):
        await held.entered.wait()
    store.after_enqueue = held.release
    await chat.say("second question")
    await chat.turn_ends(0)
    await chat.turn_ends(1)
    await expect(chat.assistant_texts).to_have_text(["Answer to first question.", "Answer to second question."])
    await expect(chat.user_texts).to_have_text(["first question", "second question"])
    await expect(chat.root.locator(".ac-msg--user[data-state=queued]")).to_have_count(0)
    await expect(chat.root.locator(".ac-msg__queued")).to_have_count(0)
