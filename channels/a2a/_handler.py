"""``GatewayRequestHandler``: the SDK's ``RequestHandler`` interface over our runtime and store.

A task is a run; its ``contextId`` is the run's thread. The handler keeps no state of its own
beyond the ``TaskBook`` records in the store, so any gateway process answers for any task, and
the SDK's 0.3 adapter (``RequestHandler03``) serves the 0.3 methods on top of it.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any, cast

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.task import (
    apply_history_length,
    decode_page_token,
    encode_page_token,
    validate_history_length,
    validate_page_size,
)

from gateway import AttachmentTooLargeError, AttachmentTypeError, ChannelServices, RunEvent, RunNotFoundError
from gateway.events import ENDED_STATUSES, MAX_ATTACHMENTS, Attachment, Turn
from gateway.stores import RunRecord
from tools import Actor, UiCapabilities

from ._book import CallerMessage, TaskBook, TaskRecord
from ._card import A2AOptions, build_agent_card
from ._errors import map_gateway_errors
from ._inbound import inline_files, read_decision, turn_text
from ._parts import UiParts
from ._proto import to_json
from ._view import TERMINAL_STATES, StreamEvent, TaskView, state_of_run

__all__ = ["ActorUser", "GatewayRequestHandler"]

_CONTEXT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class ActorUser(User):
    """The SDK's view of an authenticated caller: our ``Actor``."""

    def __init__(self, actor: Actor) -> None:
        self.actor = actor

    @property
    def is_authenticated(self) -> bool:
        """Always: the binding answers 401 before building a context for anyone else."""
        return True

    @property
    def user_name(self) -> str:
        """The actor id."""
        return self.actor.id


def _actor(context: ServerCallContext) -> Actor:
    if not isinstance(context.user, ActorUser):
        raise RuntimeError("GatewayRequestHandler needs a ServerCallContext whose user is an ActorUser")
    return context.user.actor


def _stored(message: Message, task_id: str, context_id: str) -> dict[str, Any]:
    copy = Message()
    copy.CopyFrom(message)
    copy.task_id, copy.context_id = task_id, context_id
    stored: dict[str, Any] = to_json(copy)
    return stored


def _metadata_str(params: SendMessageRequest, key: str) -> str | None:
    """``metadata.<key>`` of the message, else of the request (a non-empty str), else ``None``."""
    for metadata in (params.message.metadata, params.metadata):
        value = to_json(metadata).get(key) if metadata.fields else None
        if isinstance(value, str) and value:
            return value
    return None


def _agent_of(params: SendMessageRequest) -> str | None:
    """The agent a message asks for: ``metadata.agent`` (of the message or the request), else the default."""
    return _metadata_str(params, "agent")


def _persona_of(params: SendMessageRequest) -> str | None:
    """The persona a message asks for: ``metadata.persona``, else the thread's pin, else the agent's default."""
    persona = _metadata_str(params, "persona")
    if persona is not None and len(persona) > 64:
        raise InvalidParamsError(message="metadata.persona must be a persona id (at most 64 characters)")
    return persona


class GatewayRequestHandler(RequestHandler):
    """Answers A2A requests with the gateway's runtime; tasks live in the store.

    Args:
        services: The gateway's services (runtime, rendering, rate limits).
        book: Where task records live.
        options: The channel's options.
    """

    def __init__(self, services: ChannelServices, book: TaskBook, options: A2AOptions) -> None:
        self.services = services
        self.book = book
        self.options = options
        self.ui = UiParts(services, media=options.media)

    # -- reading tasks ------------------------------------------------------------------------------

    async def _record(self, task_id: str, actor: Actor) -> TaskRecord:
        record = await self.book.owned(task_id, actor.key) if task_id else None
        if record is None:
            raise TaskNotFoundError(f"Task {task_id} not found")
        return record

    async def _run(self, record: TaskRecord) -> RunRecord:
        with map_gateway_errors():
            return await self.services.runtime.get_run(record.run_id)

    def _events(self, thread_id: str, after_seq: int, *, follow: bool = False) -> AsyncGenerator[RunEvent, None]:
        # Runtime.events is an async generator (typed as an iterator): close it when we stop early,
        # so a live subscription ends with the stream that asked for it.
        return cast("AsyncGenerator[RunEvent, None]", self.services.runtime.events(thread_id, after_seq, follow=follow))

    async def fold(self, record: TaskRecord) -> tuple[TaskView, int]:
        """The task as its run's events have built it so far, and the last ``seq`` read."""
        run = await self._run(record)
        view = TaskView(record=record, ui=self.ui, modes=self.ui.modes(record.output_modes))
        last = run.first_seq - 1
        async with contextlib.aclosing(self._events(record.context_id, last)) as events:
            async for event in events:
                last = event.seq
                if event.run_id == record.run_id:
                    await view.apply(event)
                    if view.stopped() and view.state in TERMINAL_STATES:
                        break
        return view, last

    async def follow(
        self, record: TaskRecord, config: Any = None, *, until_terminal: bool = False
    ) -> AsyncGenerator[StreamEvent, None]:
        """The task now, then its updates until the run ends or waits for input.

        Args:
            record: The task.
            config: What shapes the first event (``historyLength``).
            until_terminal: Follow through ``INPUT_REQUIRED`` too, to a terminal state
                (``SubscribeToTask``); a message stream ends when the task waits for input.
        """

        def done(view: TaskView) -> bool:
            return view.stopped() and (not until_terminal or view.state in TERMINAL_STATES)

        view, last = await self.fold(record)
        yield apply_history_length(view.task(), config)
        if done(view):
            return
        async with contextlib.aclosing(self._events(record.context_id, last, follow=True)) as events:
            async for event in events:
                if event.run_id != record.run_id:
                    continue
                for update in await view.apply(event):
                    yield update
                if done(view):
                    return

    # -- sending messages ---------------------------------------------------------------------------

    async def accept(self, params: SendMessageRequest, actor: Actor) -> TaskRecord:
        """Start the task a message asks for, or answer the approval its task waits for.

        A ``messageId`` seen before from this caller changes nothing: its task is returned.
        """
        validate_proto_required_fields(params)
        validate_history_length(params.configuration)
        message = params.message
        if message.role != Role.ROLE_USER:
            raise InvalidParamsError(message="Send messages with role ROLE_USER")
        if message.task_id:
            return await self._answer(message, actor)
        return await self._start(params, actor)

    async def _replayed(self, task_id: str, actor: Actor) -> TaskRecord:
        record = await self.book.owned(task_id, actor.key)
        if record is None:
            # The first request with this messageId is still starting its run (or failed on a
            # process that stopped before it could release the claim).
            raise UnsupportedOperationError(message="A message with this messageId is being accepted; retry later")
        return record

    async def _attachments(
        self, actor: Actor, context_id: str, files: list[tuple[str, str, bytes]]
    ) -> tuple[Attachment, ...]:
        """A message's inline files, stored as the caller's attachments (type-sniffed, size-limited)."""
        if len(files) > MAX_ATTACHMENTS:
            raise InvalidParamsError(message=f"A message may carry at most {MAX_ATTACHMENTS} files")
        stored: list[Attachment] = []
        for name, mime, data in files:
            try:
                stored.append(await self.services.attachments.store_upload(actor, context_id, name, mime, data))
            except (AttachmentTooLargeError, AttachmentTypeError) as exc:
                raise InvalidParamsError(message=f"{name or 'file'}: {exc}") from exc
        return tuple(stored)

    async def _start(self, params: SendMessageRequest, actor: Actor) -> TaskRecord:
        message = params.message
        context_id = message.context_id or f"a2a-{uuid.uuid4().hex}"
        if not _CONTEXT_ID.match(context_id):
            raise InvalidParamsError(message="contextId must match ^[A-Za-z0-9_.:-]{1,200}$")
        files = inline_files(message)
        text = turn_text(message, files_attached=bool(files))
        agent, persona = _agent_of(params), _persona_of(params)
        with map_gateway_errors():  # an unknown agent or persona is refused before anything is kept
            self.services.runtime.agent_for(agent, actor).persona(persona)
        if files:  # someone else's context is refused before the files are kept under it
            thread = await self.services.runtime.get_thread(context_id)
            if thread is not None and not thread.owned_by(actor):
                raise InvalidParamsError(message="This contextId cannot be used: start a new context")
        attachments = await self._attachments(actor, context_id, files)
        task_id = str(uuid.uuid4())
        claimed = await self.book.claim_message(actor.key, message.message_id, task_id)
        if claimed is not None:
            return await self._replayed(claimed, actor)
        modes = list(params.configuration.accepted_output_modes)
        formats = self.ui.modes(modes).formats
        turn = Turn(
            thread_id=context_id,
            actor=actor,
            text=text,
            ui_capabilities=UiCapabilities(formats=[*formats, "text"]),
            channel="a2a",
            agent=agent,
            persona=persona,
            attachments=attachments,
        )
        try:  # any failure, cancellation included, frees the messageId for a retry
            with map_gateway_errors():
                run_id = await self._begin(turn)
                run = await self.services.runtime.get_run(run_id)
        except BaseException:
            await self.book.release_message(actor.key, message.message_id)
            raise
        record = TaskRecord(
            task_id=task_id,
            context_id=context_id,
            owner_id=actor.key,
            run_id=run_id,
            output_modes=modes,
            messages=[CallerMessage(after_seq=run.first_seq - 1, message=_stored(message, task_id, context_id))],
        )
        await self.book.add(record)
        return record

    async def _begin(self, turn: Turn) -> str:
        """Begin the turn's run, after the runs ahead of it in the context's queue; its run id.

        A message to a context whose task is working waits in the context's queue and this
        request with it: its task is created when its run begins, so the task's events are its
        own. A context whose task waits for input (an approval) wants that answered first (the
        ``taskId`` of the waiting task), unless the approval policy lets a new message supersede.
        """
        runtime = self.services.runtime
        if runtime.approval_policy.on_new_message == "queue" and await runtime.pending_approvals(turn.thread_id):
            raise UnsupportedOperationError(
                message="A task in this context waits for input: answer it (its taskId) or cancel it first"
            )
        after = await runtime.last_seq(turn.thread_id)
        accepted = await self.services.send(turn)
        if accepted.run_id is not None:
            return accepted.run_id
        queued = accepted.queued
        started = await runtime.queue.started(turn.thread_id, queued.message_id, after) if queued else None
        if started is None:
            raise UnsupportedOperationError(message="The message was removed from the queue before it ran")
        return started

    async def _answer(self, message: Message, actor: Actor) -> TaskRecord:
        record = await self._record(message.task_id, actor)
        if message.context_id and message.context_id != record.context_id:
            raise InvalidParamsError(
                message=f"Context {message.context_id} does not match context {record.context_id} of task"
                f" {record.task_id}"
            )
        claimed = await self.book.claim_message(actor.key, message.message_id, record.task_id)
        if claimed is not None:
            if claimed != record.task_id:
                raise InvalidParamsError(message="This messageId was already used for another task")
            return record
        try:  # any failure, cancellation included, frees the messageId for a retry
            after = await self._decide(record, message, actor)
        except BaseException:
            await self.book.release_message(actor.key, message.message_id)
            raise
        record.messages.append(
            CallerMessage(after_seq=after, message=_stored(message, record.task_id, record.context_id))
        )
        await self.book.save(record)
        return record

    async def _decide(self, record: TaskRecord, message: Message, actor: Actor) -> int:
        """Decide the approval the task waits for; the thread's ``seq`` before the decision."""
        runtime = self.services.runtime
        run = await self._run(record)
        if run.status in ENDED_STATUSES:
            raise InvalidParamsError(
                message=f"Task {record.task_id} is {run.status} and takes no more messages: send a new message"
                " (the same contextId continues the conversation)"
            )
        if run.status != "awaiting-approval":
            raise InvalidParamsError(message=f"Task {record.task_id} is working; it takes messages when it asks")
        decision = read_decision(message)
        # The run's own approvals, and its sub-agents' (on their own threads, listed with the thread's:
        # a thread has one parked run at a time, so they are this run's).
        pending = [
            a
            for a in await runtime.pending_approvals(record.context_id)
            if a.run_id == run.run_id or a.thread_id != record.context_id
        ]
        chosen = [a for a in pending if decision.tool_call_id in (None, a.tool_call_id)]
        if not chosen:
            raise InvalidParamsError(message="No pending approval of this task has that toolCallId")
        after = await runtime.last_seq(record.context_id)
        with map_gateway_errors():
            await runtime.decide(
                chosen[0].tool_call_id,
                actor,
                approve=decision.approve,
                reason=decision.reason,
                via="a2a",
                remember=decision.remember,
            )
        return after

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        """``SendMessage``: the task once its run ends or waits for input (at once with ``returnImmediately``)."""
        record = await self.accept(params, _actor(context))
        if not params.configuration.return_immediately:
            with map_gateway_errors():
                await self.services.runtime.wait(record.run_id)
        view, _ = await self.fold(record)
        return apply_history_length(view.task(), params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent, None]:
        """``SendStreamingMessage``: the task, then its updates until it ends or waits for input.

        The run does not depend on the stream: a caller that leaves stops only its own stream.
        """
        record = await self.accept(params, _actor(context))
        async with contextlib.aclosing(self.follow(record, params.configuration)) as updates:
            async for update in updates:
                yield update

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[StreamEvent, None]:
        """``SubscribeToTask``: the task, then its updates until it ends (not for a task that ended).

        A2A 1.0 section 3.1.6: the stream ends at a terminal state only, so it stays open while
        the task waits for input and follows the run on once the approval is decided.
        """
        validate_proto_required_fields(params)
        record = await self._record(params.id, _actor(context))
        if state_of_run((await self._run(record)).status) in TERMINAL_STATES:
            raise UnsupportedOperationError(message=f"Task {record.task_id} has ended: read it with GetTask")
        follow = self.follow(record, SendMessageConfiguration(), until_terminal=True)
        async with contextlib.aclosing(follow) as updates:
            async for update in updates:
                yield update

    # -- tasks --------------------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        """``GetTask``: the caller's task (someone else's is not found)."""
        validate_proto_required_fields(params)
        validate_history_length(params)
        record = await self._record(params.id, _actor(context))
        view, _ = await self.fold(record)
        return apply_history_length(view.task(), params)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        """``CancelTask``: stop the run and answer the task once it stopped (or ``cancel_wait`` passed)."""
        validate_proto_required_fields(params)
        actor = _actor(context)
        record = await self._record(params.id, actor)
        run = await self._run(record)
        if run.status in ENDED_STATUSES:
            raise TaskNotCancelableError(f"Task {record.task_id} is already {run.status}")
        runtime = self.services.runtime
        with map_gateway_errors():
            await runtime.cancel(record.run_id, actor)
        with contextlib.suppress(TimeoutError):
            await runtime.wait(record.run_id, timeout=self.options.cancel_wait)
        view, _ = await self.fold(record)
        return view.task()

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """``ListTasks``: the caller's tasks, newest first, filtered and paged."""
        validate_history_length(params)
        page_size = params.page_size if params.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
        validate_page_size(page_size)
        before = self._page_start(params.page_token)
        actor = _actor(context)
        page: list[TaskRecord] = []
        total, next_token, last_slot = 0, "", 0
        async for slot, record in self.book.tasks_of(actor.key):
            if not await self._listed(record, params):
                continue
            total += 1
            if before is not None and slot >= before:
                continue
            if len(page) < page_size:
                page.append(record)
                last_slot = slot
            elif not next_token:
                next_token = encode_page_token(str(last_slot))
        tasks: list[Task] = []
        for record in page:
            view, _ = await self.fold(record)
            task = apply_history_length(view.task(), params)
            if not params.include_artifacts:
                task.ClearField("artifacts")
            tasks.append(task)
        return ListTasksResponse(tasks=tasks, next_page_token=next_token, page_size=page_size, total_size=total)

    @staticmethod
    def _page_start(token: str) -> int | None:
        if not token:
            return None
        try:
            return int(decode_page_token(token))
        except ValueError:
            raise InvalidParamsError(message="Invalid pageToken") from None

    async def _listed(self, record: TaskRecord, params: ListTasksRequest) -> bool:
        if params.context_id and record.context_id != params.context_id:
            return False
        if not params.status and not params.HasField("status_timestamp_after"):
            return True
        try:
            run = await self.services.runtime.get_run(record.run_id)
        except RunNotFoundError:
            return False
        if params.status and state_of_run(run.status) != params.status:
            return False
        if params.HasField("status_timestamp_after"):
            after = params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            return bool(datetime.fromisoformat(run.updated_at) >= after)
        return True

    # -- the card and what we do not offer ---------------------------------------------------------

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        """``GetExtendedAgentCard``: the card with the skills this caller may use."""
        base_url = str(context.state.get("base_url") or self.services.settings.base_url())
        return await build_agent_card(self.services, base_url, self.options, actor=_actor(context))

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Not offered (``capabilities.pushNotifications`` is false)."""
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Not offered."""
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        """Not offered."""
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Not offered."""
        raise PushNotificationNotSupportedError()
