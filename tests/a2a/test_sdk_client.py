"""The real a2a-sdk client against our server on a loopback port: discover, send, stream, approve, cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError
from a2a.helpers import get_data_parts, get_message_text, new_data_part
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from .conftest import ALICE, BOB, WATCHDOG, Gate, Gateway, collect, kinds, send_request, user_message

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


async def test_the_card_is_discovered_and_names_our_loopback_url(demo: Gateway) -> None:
    card = await A2ACardResolver(demo.http(version=None), demo.base_url).get_agent_card()
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (demo.rpc_url, "JSONRPC", "1.0"),
        (demo.rpc_url, "JSONRPC", "0.3"),
    ]
    assert card.name == "Coffee shop assistant" and card.description == "The demo shop's assistant."
    assert card.capabilities.streaming and card.capabilities.extended_agent_card
    assert list(card.default_output_modes) == ["text/plain", "application/json", "image/png", "application/pdf"]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    skills = {s.id: s for s in card.skills}
    assert set(skills) >= {"get_weather", "refund_order", "list_orders"}
    assert skills["refund_order"].name == "Refund" and list(skills["refund_order"].tags)[:2] == ["action", "approval"]

    client = await demo.sdk(streaming=True)
    extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert {s.id for s in extended.skills} == set(skills)
    await client.close()


async def test_send_parks_for_approval_and_a_data_part_answer_completes_it(demo: Gateway) -> None:
    client = await demo.sdk(streaming=False)
    [event] = await collect(client.send_message(send_request("refund order 1042")))
    task = event.task
    assert task.status.state == INPUT_REQUIRED
    prompt = task.status.message
    assert prompt.role == Role.ROLE_AGENT
    assert get_message_text(prompt).startswith("Refund €129.00 for order 1042?")
    [approval] = get_data_parts(list(prompt.parts))
    assert approval["type"] == "approval-requested" and approval["tool"] == "refund_order"
    assert approval["confirmation"] == {
        "title": "Refund €129.00 for order 1042?",
        "verb": "Refund",
        "detail": "Burr grinder · back to the card ending 4242",
    }
    assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]

    answer = SendMessageRequest(
        message=user_message(new_data_part({"approved": True}), task_id=task.id, context_id=task.context_id)
    )
    [done] = await collect(client.send_message(answer))
    assert done.task.id == task.id and done.task.status.state == COMPLETED
    assert get_message_text(done.task.status.message) == "Done: €129.00 for order 1042 is on its way back to your card."
    receipt = next(a for a in done.task.artifacts if a.name == "KpiCards")
    assert receipt.parts[0].media_type == "application/json"
    assert get_data_parts(list(receipt.parts))[0]["items"][0] == {"label": "Refunded", "value": "€129.00"}
    assert [m.role for m in done.task.history] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER, Role.ROLE_AGENT]

    fetched = await client.get_task(GetTaskRequest(id=task.id))
    assert fetched.status.state == COMPLETED and len(fetched.artifacts) == len(done.task.artifacts)
    short = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
    assert [m.role for m in short.history] == [Role.ROLE_AGENT]
    await client.close()


async def test_stream_carries_status_and_artifact_updates_until_completed(demo: Gateway) -> None:
    client = await demo.sdk(streaming=True)
    events = await collect(client.send_message(send_request("weather in Lisbon")))
    assert kinds(events) == [
        "task:WORKING",
        "status:WORKING",
        "artifact:KpiCards",
        "status:WORKING",
        "artifact:text",
        "status:COMPLETED",
    ]
    narration = [get_message_text(events[i].status_update.status.message) for i in (1, 3)]
    assert narration == ["Checking the weather in Lisbon", "Checked the weather in Lisbon"]
    task_id = events[0].task.id
    assert {e.status_update.task_id for e in events if e.HasField("status_update")} == {task_id}
    card = events[2].artifact_update.artifact
    assert card.artifact_id.startswith("ui-") and card.metadata["component"] == "KpiCards"
    [props] = get_data_parts(list(card.parts))
    assert props["items"][0]["label"] == "Lisbon"

    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == COMPLETED
    assert [a.name for a in task.artifacts] == ["KpiCards", "text"]
    assert get_message_text(task.status.message).startswith("It's ")
    await client.close()


async def test_a_streamed_approval_answered_no_is_rejected_and_the_run_goes_on(demo: Gateway) -> None:
    client = await demo.sdk(streaming=True)
    first = await collect(client.send_message(send_request("refund order 1040")))
    assert kinds(first)[-1] == "status:INPUT_REQUIRED"
    task_id, context_id = first[0].task.id, first[0].task.context_id
    answer = SendMessageRequest(message=user_message(Part(text="no thanks"), task_id=task_id, context_id=context_id))
    second = await collect(client.send_message(answer))
    assert kinds(second)[0] == "task:WORKING"
    assert get_message_text(second[0].task.status.message) == "Rejected."
    assert kinds(second)[-1] == "status:COMPLETED"
    final = get_message_text(second[-1].status_update.status.message)
    assert final.startswith("I did not go ahead.")

    with pytest.raises(InvalidParamsError, match="takes no more messages"):
        await collect(client.send_message(answer.__class__(message=user_message(Part(text="yes"), task_id=task_id))))
    await client.close()


async def test_an_answer_that_is_neither_yes_nor_no_is_refused_and_the_task_still_waits(demo: Gateway) -> None:
    client = await demo.sdk(streaming=False)
    [event] = await collect(client.send_message(send_request("refund order 1041")))
    task = event.task
    with pytest.raises(InvalidParamsError, match="waits for an approval"):
        await collect(client.send_message(SendMessageRequest(message=user_message(Part(text="hmm"), task_id=task.id))))
    assert (await client.get_task(GetTaskRequest(id=task.id))).status.state == INPUT_REQUIRED
    other = SendMessageRequest(message=user_message(Part(text="yes"), task_id=task.id, context_id="elsewhere"))
    with pytest.raises(InvalidParamsError, match="does not match"):
        await collect(client.send_message(other))
    await client.close()


async def test_cancel_stops_a_working_task(make_gateway: Any, gate: Gate) -> None:
    gw = await make_gateway(gate.runtime())
    client = await gw.sdk(streaming=False, polling=True)
    [event] = await collect(client.send_message(send_request("take your time")))
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_WORKING
    async with asyncio.timeout(WATCHDOG):
        await gate.entered.wait()
    cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert cancelled.id == task.id and cancelled.status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task.id))
    await client.close()


async def test_cancel_ends_a_task_waiting_for_approval(demo: Gateway) -> None:
    client = await demo.sdk(streaming=False)
    [event] = await collect(client.send_message(send_request("refund order 1042")))
    cancelled = await client.cancel_task(CancelTaskRequest(id=event.task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert await demo.runtime.pending_approvals(event.task.context_id) == []
    await client.close()


async def test_a_repeated_message_id_returns_the_same_task_without_a_second_turn(demo: Gateway) -> None:
    client = await demo.sdk(streaming=False)
    request = send_request("weather in Porto", message_id="same-id")
    [first] = await collect(client.send_message(request))
    [again] = await collect(client.send_message(request))
    assert again.task.id == first.task.id and again.task.status.state == COMPLETED
    assert len(await demo.runtime.store.thread_runs(first.task.context_id)) == 1
    streaming = await demo.sdk(streaming=True)
    replay = await collect(streaming.send_message(request))
    assert kinds(replay) == ["task:COMPLETED"] and replay[0].task.id == first.task.id
    await client.close()
    await streaming.close()


async def test_tasks_are_private_to_their_caller(demo: Gateway) -> None:
    alice = await demo.sdk(ALICE, streaming=False)
    bob = await demo.sdk(BOB, streaming=False)
    [a1] = await collect(alice.send_message(send_request("weather in Lisbon")))
    [a2] = await collect(alice.send_message(send_request("weather in Paris", context_id=a1.task.context_id)))
    [b1] = await collect(bob.send_message(send_request("weather in Rome")))

    with pytest.raises(TaskNotFoundError):
        await bob.get_task(GetTaskRequest(id=a1.task.id))
    with pytest.raises(TaskNotFoundError):
        await bob.cancel_task(CancelTaskRequest(id=a1.task.id))
    stolen = SendMessageRequest(message=user_message(Part(text="yes"), task_id=a1.task.id))
    with pytest.raises(TaskNotFoundError):
        await collect(bob.send_message(stolen))
    with pytest.raises(InvalidParamsError, match="contextId cannot be used"):
        await collect(bob.send_message(send_request("hello", context_id=a1.task.context_id)))

    listed = await alice.list_tasks(ListTasksRequest())
    assert [t.id for t in listed.tasks] == [a2.task.id, a1.task.id] and listed.total_size == 2
    assert all(not t.artifacts for t in listed.tasks)
    page = await alice.list_tasks(ListTasksRequest(page_size=1, include_artifacts=True))
    assert [t.id for t in page.tasks] == [a2.task.id] and page.next_page_token and page.tasks[0].artifacts
    rest = await alice.list_tasks(ListTasksRequest(page_size=1, page_token=page.next_page_token))
    assert [t.id for t in rest.tasks] == [a1.task.id] and not rest.next_page_token
    by_context = await bob.list_tasks(ListTasksRequest(context_id=b1.task.context_id, status=COMPLETED))
    assert [t.id for t in by_context.tasks] == [b1.task.id]
    assert (await bob.list_tasks(ListTasksRequest(status=INPUT_REQUIRED))).tasks == []
    await alice.close()
    await bob.close()


async def test_subscribe_follows_a_working_task_to_its_end(make_gateway: Any, gate: Gate) -> None:
    gw = await make_gateway(gate.runtime())
    sender = await gw.sdk(streaming=False, polling=True)
    [event] = await collect(sender.send_message(send_request("slowly")))
    subscriber = await gw.sdk(streaming=True)
    async with asyncio.timeout(WATCHDOG):
        await gate.entered.wait()
    stream = subscriber.subscribe(SubscribeToTaskRequest(id=event.task.id))
    first = await anext(stream)
    assert first.task.status.state == TaskState.TASK_STATE_WORKING
    gate.released.set()
    rest = await collect(stream)
    assert kinds(rest) == ["artifact:text", "status:COMPLETED"]
    with pytest.raises(Exception, match="has ended"):
        await collect(subscriber.subscribe(SubscribeToTaskRequest(id=event.task.id)))
    await sender.close()
    await subscriber.close()


async def test_subscribe_stays_open_through_an_approval_until_the_task_completes(demo: Gateway) -> None:
    # A2A 1.0 section 3.1.6 (TCK STREAM-SUB-002): a subscription ends at a terminal state only;
    # INPUT_REQUIRED is not one, so the stream waits through the approval.
    sender = await demo.sdk(streaming=False)
    [event] = await collect(sender.send_message(send_request("refund order 1042")))
    task = event.task
    assert task.status.state == INPUT_REQUIRED
    subscriber = await demo.sdk(streaming=True)
    stream = subscriber.subscribe(SubscribeToTaskRequest(id=task.id))
    async with asyncio.timeout(WATCHDOG):
        first = await anext(stream)
    assert first.task.id == task.id and first.task.status.state == INPUT_REQUIRED

    # Another client (the non-streaming one) answers the approval while the subscription waits.
    answer = SendMessageRequest(message=user_message(new_data_part({"approved": True}), task_id=task.id))
    [done] = await collect(sender.send_message(answer))
    assert done.task.status.state == COMPLETED
    rest = await collect(stream)
    assert kinds(rest)[0] == "status:WORKING" and get_message_text(rest[0].status_update.status.message) == "Approved."
    assert kinds(rest)[-1] == "status:COMPLETED"
    assert "artifact:KpiCards" in kinds(rest)
    assert get_message_text(rest[-1].status_update.status.message) == get_message_text(done.task.status.message)
    await sender.close()
    await subscriber.close()


async def test_components_come_with_an_image_when_the_caller_accepts_png(demo: Gateway) -> None:
    # Media URLs are built from the configured public URL; the test server's port is known only now.
    demo.channel.services.settings.public_base_url = demo.base_url
    client = await demo.sdk(streaming=False)
    request = send_request("weather in Lisbon", modes=["text/plain", "application/json", "image/png"])
    [event] = await collect(client.send_message(request), timeout=3 * WATCHDOG)  # the render workers start
    card = next(a for a in event.task.artifacts if a.name == "KpiCards")
    assert [p.WhichOneof("content") for p in card.parts] == ["data", "url"]
    image = card.parts[1]
    assert image.media_type == "image/png" and image.filename == "kpicards-1.png"
    async with httpx.AsyncClient(timeout=WATCHDOG) as http:
        fetched = await http.get(image.url)
    assert fetched.status_code == 200 and fetched.content.startswith(b"\x89PNG")
    again = await client.get_task(GetTaskRequest(id=event.task.id))
    assert next(a for a in again.artifacts if a.name == "KpiCards").parts[1].url == image.url

    text_only = await collect(
        client.send_message(
            SendMessageRequest(
                message=user_message(Part(text="weather in Oslo")),
                configuration=SendMessageConfiguration(accepted_output_modes=["text/plain"]),
            )
        )
    )
    card = next(a for a in text_only[0].task.artifacts if a.name == "KpiCards")
    assert [p.WhichOneof("content") for p in card.parts] == ["text"] and card.parts[0].text.startswith("Oslo: ")
    await client.close()


async def test_without_a_valid_bearer_token_the_client_gets_401(demo: Gateway) -> None:
    client = await demo.sdk(streaming=False)
    client._transport.httpx_client.headers["Authorization"] = "Bearer not.a.token"  # type: ignore[attr-defined]
    with pytest.raises(A2AClientError, match="401"):
        await collect(client.send_message(send_request("hello")))
    await client.close()
