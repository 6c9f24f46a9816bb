"""The web-socket channel: one person's chat over ``GET /agent/ws``.

Protocol (JSON text frames). Client -> server: ``hello {thread_id?, after_seq?, ui_capabilities?,
token?, agent?, batch?}`` first, then ``send {text, page_context?, mode?, agent?, persona?}``,
``approve {tool_call_id, remember?}``, ``reject {tool_call_id, reason?}``, ``cancel {run_id}``,
``queue_edit {message_id, text}``, ``queue_remove {message_id}``; any may carry an ``id`` that the
answer echoes. A ``send`` to a
thread with an active run is queued (``mode`` ``queue``, the agent's default), or stops that run
first (``interrupt``), or is refused ``thread_busy`` (``reject``); its ``ack`` says which
(``run_id``, or ``queued``, ``message_id``, ``position``), and the ``message-queued`` /
``message-dequeued`` events follow like every other event.

The agent of a ``send`` is its own ``agent``, else the hello's, else the gateway's default; its
``persona`` (else the thread's pinned one, else the agent's default) is the voice of its run, and
is pinned on the thread. An agent the socket's actor may not use is ``error {code:
"unknown_agent"}`` (for a hello too, which then leaves the socket unwelcomed, to try again), a
persona the agent lacks ``error {code: "persona_not_found"}``; neither writes anything.

Server -> client: ``welcome {thread_id, actor, after_seq, restored, ...}`` (``restored`` is
false when the thread the hello named is unknown, or its log is shorter than ``after_seq``),
then every run event of the thread with its ``type`` and ``seq`` (``ui`` events carry ``html``,
``media`` or ``text`` per the client's capabilities), ``ack {id, run_id?, queued?, message_id?,
position?}`` and ``error {id?, code, message}``. A ``hello {batch: true}`` gets the run events
(replayed and live) as ``batch {events}`` frames instead, several events to a frame (``_batch``);
the other frames are unchanged.

Staff: ``hello {watch_approvals: true}`` from an actor holding a role that approves some tool
also receives ``approval-pending {approval}`` for each approval they may decide (those waiting
already, then each new one, asked on any process) and ``approval-closed {tool_call_id, status}``
when one stops waiting (``gateway._staff``). Anyone else gets ``error {code: "watch_forbidden"}``
and the rest of the session as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import Any
from urllib.parse import urlsplit

from aiohttp import WebSocketError, WSCloseCode, WSMsgType, web
from pydantic import ValidationError

from gateway import (
    APPROVAL_FEED,
    CHANNEL_SERVICES,
    ApprovalFeed,
    ChannelServices,
    EventHooks,
    GatewayError,
    IdentityUnavailableError,
    InvalidTokenError,
    QuotaExceededError,
    may_watch_approvals,
    parse_json,
)
from gateway.events import (
    RUN_EVENT_ADAPTER,
    ApprovalSettledEvent,
    Attachment,
    RunEvent,
    RunStartedEvent,
    TextDeltaEvent,
    Turn,
    UiEvent,
)
from gateway.stores import ThreadRecord
from tools import Actor, AgoraError, UiCapabilities

from ._batch import FrameOutbox
from ._frames import (
    CLIENT_FRAME,
    FRAME_TYPES,
    AnyFrame,
    ApproveFrame,
    CancelFrame,
    HelloFrame,
    QueueEditFrame,
    QueueRemoveFrame,
    RejectFrame,
    SendFrame,
)
from ._options import WEB_OPTIONS, WebOptions

__all__ = ["OPEN_SOCKETS", "WEB_DEFAULT_CAPABILITIES", "EventFrames", "close_sockets", "websocket_handler"]

logger = logging.getLogger("channels.web")

WEB_DEFAULT_CAPABILITIES = UiCapabilities(formats=["html"])
"""What a web client gets when its ``hello`` declares nothing."""

_ROOMY_BUFFER = 32 * 1024
"""Below this many unsent bytes a web-socket send never waits (the transport pauses at 64 KiB)."""

OPEN_SOCKETS = web.AppKey("agora_web_sockets", set[web.WebSocketResponse])
"""The app's open web sockets: closed (1001, going away) when the app shuts down."""

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_SLOW = 4408
CLOSE_BAD_HELLO = 4400
CLOSE_TRY_AGAIN = 1013
HELLO_TIMEOUT = 30.0


def _origin_allowed(request: web.Request, services: ChannelServices, options: WebOptions) -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # not a browser: tokens and cookies still apply
    if origin in options.allowed_origins:
        return True
    parts = urlsplit(origin)
    if parts.netloc and parts.netloc == request.host:
        return True
    public = services.settings.public_base_url
    return bool(public) and origin.rstrip("/") == public


class EventFrames(EventHooks[str]):
    """A thread's run events as this socket's JSON text frames.

    Every event goes out as it is stored (its ``type``, ``seq`` and fields); a ``ui`` event also
    carries the form this client gets (``form`` and ``html``, ``media`` or ``text``).

    Args:
        services: The gateway's services (``deliver_ui``).
        capabilities: What the client's ``hello`` declared.
    """

    def __init__(self, services: ChannelServices, capabilities: UiCapabilities) -> None:
        self.services = services
        self.capabilities = capabilities

    async def default(self, event: RunEvent) -> str:
        """The event as stored."""
        return event.model_dump_json()

    async def on_ui(self, event: UiEvent) -> str:
        frame = RUN_EVENT_ADAPTER.dump_python(event, mode="json")
        frame.update((await self.services.deliver_ui(event, self.capabilities)).wire())
        return json.dumps(frame, ensure_ascii=False)


class _Closed(AgoraError):
    """The socket is gone (or we closed it): stop this session."""


class WebSession:
    """One socket: its actor, thread, capabilities and the task following the thread."""

    __slots__ = (
        "_feed",
        "_follower",
        "_watcher",
        "_frames",
        "_client",
        "_lock",
        "_transport",
        "actor",
        "agent",
        "capabilities",
        "options",
        "services",
        "thread_id",
        "ws",
    )

    def __init__(
        self,
        services: ChannelServices,
        ws: web.WebSocketResponse,
        actor: Actor | None,
        transport: Any = None,
        client: str | None = None,
        options: WebOptions | None = None,
        feed: ApprovalFeed | None = None,
    ) -> None:
        self.services = services
        self._feed = feed
        self._watcher: asyncio.Task[None] | None = None
        self.options = options or WebOptions()
        self.ws = ws
        self.actor = actor
        self.agent: str | None = None
        """The hello's agent: this socket's sends talk to it unless one names another."""
        self.thread_id: str | None = None
        self.capabilities = WEB_DEFAULT_CAPABILITIES
        self._lock = asyncio.Lock()
        self._follower: asyncio.Task[None] | None = None
        self._transport = transport
        self._client = client
        self._frames = services.metrics.frames

    async def send(self, frame: dict[str, Any]) -> None:
        """Send one frame; a client that cannot take it in time is disconnected."""
        await self.send_text(json.dumps(frame, ensure_ascii=False))

    async def send_text(self, data: str) -> None:
        """Send one JSON text frame; a client that cannot take it in time is disconnected.

        While the socket's write buffer has room for the frame a send cannot wait, so only the
        other sends carry the ``send_timeout`` scope (one timer per frame adds up under load).
        A str of n characters is at most 4n bytes of UTF-8.
        """
        async with self._lock:
            if self.ws.closed:
                raise _Closed
            try:
                transport = self._transport
                if transport is not None and transport.get_write_buffer_size() + 4 * len(data) < _ROOMY_BUFFER:
                    await self.ws.send_str(data)
                else:
                    async with asyncio.timeout(self.options.send_timeout):
                        await self.ws.send_str(data)
            except TimeoutError:
                logger.info("closing a web socket that stopped reading")
                await self.ws.close(code=CLOSE_TOO_SLOW, message=b"too slow", drain=False)
                raise _Closed from None
            except ConnectionError:
                raise _Closed from None
        self._frames.outgoing += 1

    async def error(self, code: str, message: str, frame_id: str | None = None, **extra: Any) -> None:
        """Send an ``error`` frame (and log it: one line)."""
        logger.info("refused a frame: %s: %.300r", code, message)  # repr: one line, whatever was sent
        await self.send({"type": "error", "id": frame_id, "code": code, "message": message, **extra})

    async def run(self) -> None:
        """Read frames until the client leaves; then stop following the thread."""
        try:
            async with asyncio.timeout(HELLO_TIMEOUT) as hello_deadline:
                async for message in self.ws:
                    await self._on_message(message)
                    if self.thread_id is not None:
                        hello_deadline.reschedule(None)
        except TimeoutError:
            with contextlib.suppress(_Closed):
                await self.error("hello_required", "Send hello first")
            await self.ws.close(code=CLOSE_BAD_HELLO, message=b"no hello")
        except _Closed:
            pass
        finally:
            for task in (self._follower, self._watcher):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, _Closed):
                        await task

    async def _on_message(self, message: Any) -> None:
        self._frames.incoming += 1
        if message.type is WSMsgType.ERROR:
            # aiohttp closed the socket already (1002 a bad frame, 1007 text not UTF-8, 1009 too big).
            if isinstance(message.data, WebSocketError):
                logger.info("closed a web socket (%s): %.300r", message.data.code, str(message.data))
            else:
                logger.info("a web socket ended: %.300r", message.data)
            raise _Closed
        if message.type is WSMsgType.BINARY:
            await self.error("binary_not_supported", "Send JSON text frames")
            return
        if message.type is not WSMsgType.TEXT:
            return
        limit = self.options.frame_limit
        data: str = message.data
        # The limit is in bytes of UTF-8; counting them is needed only when the characters could.
        if len(data) > limit or (len(data) * 4 > limit and len(data.encode()) > limit):
            await self.error("frame_too_large", f"Frames are limited to {limit} bytes")
            return
        try:
            raw = parse_json(data)
        except ValueError as exc:
            await self.error("bad_frame", f"Frames are JSON objects ({exc})")
            return
        frame_id = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else None
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            await self.error("bad_frame", "Frames are JSON objects with a type", frame_id)
            return
        if raw["type"] not in FRAME_TYPES:
            await self.error("unknown_frame", f"Unknown frame type {raw['type'][:40]!r}", frame_id)
            return
        try:
            frame = CLIENT_FRAME.validate_python(raw)
        except ValidationError as exc:
            detail = "; ".join(f"{'.'.join(map(str, e['loc'][1:])) or 'frame'}: {e['msg']}" for e in exc.errors()[:5])
            await self.error("invalid_frame", f"Invalid {raw['type']} frame: {detail}", frame_id)
            return
        try:
            await self._dispatch(frame)
        except GatewayError as exc:
            extra: dict[str, Any] = {"retry_after": round(exc.retry_after, 1)} if hasattr(exc, "retry_after") else {}
            if isinstance(exc, QuotaExceededError):
                extra = {"period": exc.period, "used": exc.used, "limit": exc.limit}
            await self.error(exc.code, str(exc), frame.id, **extra)

    async def _dispatch(self, frame: AnyFrame) -> None:
        if isinstance(frame, HelloFrame):
            await self._hello(frame)
            return
        if self.thread_id is None or self.actor is None:
            await self.error("hello_required", "Send hello first", frame.id)
            return
        runtime = self.services.runtime
        match frame:
            case SendFrame():
                turn = Turn(
                    thread_id=self.thread_id,
                    actor=self.actor,
                    text=frame.text,
                    ui_capabilities=self.capabilities,
                    page_context=frame.page_context,
                    channel="web",
                    agent=frame.agent or self.agent,
                    persona=frame.persona,
                    attachments=await self._attachments(frame.attachments),
                )
                accepted = await self.services.send(turn, client=self._client, mode=frame.mode)
                ack: dict[str, Any] = {"type": "ack", "id": frame.id, "run_id": accepted.run_id}
                if accepted.queued is not None:
                    ack.update(queued=True, message_id=accepted.queued.message_id, position=accepted.position)
                    ack.update(interrupting=accepted.interrupting)
                await self.send(ack)
            case ApproveFrame():
                record = await runtime.decide(
                    frame.tool_call_id, self.actor, approve=True, via="web", remember=frame.remember
                )
                await self.send({"type": "ack", "id": frame.id, "status": record.status})
            case RejectFrame():
                record = await runtime.decide(
                    frame.tool_call_id, self.actor, approve=False, reason=frame.reason, via="web"
                )
                await self.send({"type": "ack", "id": frame.id, "status": record.status})
            case CancelFrame():
                run = await runtime.get_run(frame.run_id)
                if run.thread_id != self.thread_id:
                    await self.error("run_not_found", "No such run in this thread", frame.id)
                    return
                await runtime.cancel(frame.run_id, self.actor)
                await self.send({"type": "ack", "id": frame.id, "run_id": frame.run_id})
            case QueueEditFrame():
                await self.services.limit(self.actor, self._client)  # an edit writes its text to the log again
                edited = await runtime.queue.edit(frame.message_id, self.actor, frame.text)
                await self.send({"type": "ack", "id": frame.id, "message_id": edited.message_id})
            case QueueRemoveFrame():
                removed = await runtime.queue.remove(frame.message_id, self.actor)
                await self.send({"type": "ack", "id": frame.id, "message_id": removed.message_id})

    async def _attachments(self, ids: list[str]) -> tuple[Attachment, ...]:
        """The send's files, each this socket's actor's own (403 another's, 404 an unknown one)."""
        if not ids or self.actor is None:
            return ()
        return await self.services.attachments.resolve(self.actor, ids, thread_id=self.thread_id)

    async def _hello(self, frame: HelloFrame) -> None:
        if self.thread_id is not None:
            await self.error("already_welcomed", "hello was already sent on this socket", frame.id)
            return
        if frame.token:
            try:
                self.actor = await self.services.verify_token(frame.token)
            except InvalidTokenError as exc:
                await self.error(exc.code, str(exc), frame.id)
                await self.ws.close(code=CLOSE_UNAUTHENTICATED, message=b"invalid token")
                raise _Closed from None
            except IdentityUnavailableError as exc:  # the provider's keys are out of reach: try again later
                logger.warning("refused a hello: %s", exc)
                await self.error(exc.code, str(exc), frame.id)
                await self.ws.close(code=CLOSE_TRY_AGAIN, message=b"identity unavailable")
                raise _Closed from None
        if self.actor is None:
            await self.error("unauthenticated", "Send a signed actor token", frame.id)
            await self.ws.close(code=CLOSE_UNAUTHENTICATED, message=b"unauthenticated")
            raise _Closed
        # Before anything is reserved or followed: an unknown agent leaves no trace (an error frame).
        agent = self.services.runtime.agent_for(frame.agent, self.actor)
        # A socket follows only a thread that exists and that its actor may read, or a fresh one
        # with an unguessable id the server makes. Asking for an id that does not exist (yet)
        # gets a fresh thread instead: following it would show whoever creates it later.
        # An actor the app signed (a token) may name a new thread: the id is reserved for it
        # before anything is followed, so nobody else can create it later and be followed.
        store = self.services.runtime
        after_seq = frame.after_seq
        thread_id = f"web-{uuid.uuid4().hex}"
        existing: ThreadRecord | None = None
        # False when the client's conversation is not the server's: the thread it asked for is
        # unknown (a store that was reset, e.g. an in-memory gateway that restarted) or its log is
        # shorter than the client has seen. The client then keeps what it shows as a read-only copy.
        restored = True
        if frame.thread_id is not None:
            existing = await store.get_thread(frame.thread_id)
            restored = existing is not None
            if existing is None and not self.actor.id.startswith("anon:"):
                record = ThreadRecord(
                    thread_id=frame.thread_id, owner_id=self.actor.id, tenant_ref=self.actor.tenant_ref, channel="web"
                )
                existing = await store.ensure_thread(record)
            if existing is not None:
                try:
                    await self.services.runtime.check_thread_access(frame.thread_id, self.actor)
                except GatewayError as exc:
                    await self.error(exc.code, str(exc), frame.id)
                    await self.ws.close(code=CLOSE_FORBIDDEN, message=b"forbidden")
                    raise _Closed from None
                thread_id = frame.thread_id
                if after_seq > await store.last_seq(thread_id):
                    after_seq = 0  # the log is shorter than the client thinks (a reset store): replay it all
                    restored = False
            else:
                after_seq = 0
        self.thread_id = thread_id
        self.agent = frame.agent
        self.capabilities = frame.ui_capabilities or WEB_DEFAULT_CAPABILITIES
        runtime = self.services.runtime
        await self.send(
            {
                "type": "welcome",
                "id": frame.id,
                "thread_id": thread_id,
                "actor": {"id": self.actor.id, "roles": list(self.actor.roles)},
                "agent": agent.name,
                # The demo's own texts only for the demo: an app on the offline model is no demo.
                "demo": self.services.demo and runtime.model is not None and runtime.model.name == "demo",
                "after_seq": after_seq,
                "restored": restored,
            }
        )
        # An approver may follow someone else's thread: only while a decision of theirs is pending.
        approver = None if existing is None or existing.owned_by(self.actor) else self.actor
        self._follower = asyncio.create_task(
            self._follow(thread_id, after_seq, approver=approver, batch=frame.batch), name=f"agora-ws-{thread_id}"
        )
        if frame.watch_approvals:
            await self._watch_approvals(frame.id)

    async def _watch_approvals(self, frame_id: str | None) -> None:
        """Follow the approval feed too (staff only; the session goes on either way)."""
        assert self.actor is not None
        if self._feed is None or not may_watch_approvals(self.services.runtime.approval_policy, self.actor):
            await self.error("watch_forbidden", "Only staff who approve actions may watch approvals", frame_id)
            return
        self._watcher = asyncio.create_task(self._feed.follow(self.actor, self.send), name="agora-ws-approvals")

    async def _reading_ends(
        self,
        thread_id: str,
        approver: Actor | None,
        event: RunEvent,
        kind: type[RunStartedEvent] | type[ApprovalSettledEvent],
    ) -> bool:
        """True when ``event`` is of ``kind`` and this socket's actor may no longer read the thread.

        An approver's reading ends with their last decision. An owner's with their thread: erased
        while this socket followed it, its id may be taken by someone else, whose first run
        starts with a ``RunStartedEvent`` this socket must never show.
        """
        if not isinstance(event, kind) or (approver is None and kind is not RunStartedEvent):
            return False
        assert self.actor is not None  # a socket follows only after its hello
        try:
            await self.services.runtime.check_thread_access(thread_id, approver or self.actor)
        except GatewayError:
            return True
        return False

    async def _follow(self, thread_id: str, after_seq: int, *, approver: Actor | None, batch: bool = False) -> None:
        frames = EventFrames(self.services, self.capabilities)
        outbox = FrameOutbox(self.send_text, window=self.options.batch_window) if batch else None
        try:
            async for event in self.services.runtime.subscribe(thread_id, after_seq):
                # A new turn, or the last decision this approver had to make, ends their reading.
                if await self._reading_ends(thread_id, approver, event, RunStartedEvent):
                    break
                if outbox is None:
                    await self.send_text(await frames.dispatch(event))
                else:
                    delta_of = event.message_id if isinstance(event, TextDeltaEvent) else None
                    await outbox.put(await frames.dispatch(event), delta_of=delta_of)
                if await self._reading_ends(thread_id, approver, event, ApprovalSettledEvent):
                    break
            else:
                if outbox is not None:
                    await outbox.flush()
                return
            if outbox is not None:
                await outbox.flush()  # what it may still read goes before the error that ends it
            if approver is None:
                await self.error("thread_forbidden", "This conversation was erased")
                await self.ws.close(code=CLOSE_FORBIDDEN, message=b"thread erased")
                return
            await self.error("thread_forbidden", "Nothing on this thread waits for your decision any more")
            await self.ws.close(code=CLOSE_FORBIDDEN, message=b"no pending decision")
        except _Closed:
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("following thread %s failed", thread_id)
            with contextlib.suppress(Exception):
                await self.ws.close(code=1011, message=b"internal error")
        finally:
            if outbox is not None:
                await outbox.aclose()


async def websocket_handler(request: web.Request) -> web.StreamResponse:
    """``GET /agent/ws``: check the origin and the credentials, then serve the session."""
    services = request.app[CHANNEL_SERVICES]
    options = request.app[WEB_OPTIONS]
    if not _origin_allowed(request, services, options):
        logger.warning(
            "refused a web socket from origin %r: add it to AGORA_ALLOWED_ORIGINS to allow it",
            request.headers.get("Origin"),
        )
        return web.json_response({"code": "origin_forbidden", "message": "Origin not allowed"}, status=403)
    try:
        actor = await services.identify(request)
    except InvalidTokenError as exc:
        logger.info("refused 401 %s GET /agent/ws: %.300r", exc.code, str(exc))
        return web.json_response({"code": exc.code, "message": str(exc)}, status=401)
    ws = web.WebSocketResponse(
        heartbeat=options.heartbeat,
        max_msg_size=options.frame_limit * 4,
        compress=False,
        timeout=2.0,  # the close handshake: a client that stopped reading will not answer it
    )
    if not ws.can_prepare(request).ok:
        logger.info("refused 400 websocket_required GET /agent/ws: not a web-socket upgrade")
        return web.json_response({"code": "websocket_required", "message": "Upgrade to a web socket"}, status=400)
    services.attach_identity(request, ws)
    await ws.prepare(request)
    services.metrics.sockets.inc()
    sockets = request.app.get(OPEN_SOCKETS)
    if sockets is not None:
        sockets.add(ws)
    try:
        session = WebSession(
            services,
            ws,
            actor,
            request.transport,
            services.client_address(request),
            options,
            request.app.get(APPROVAL_FEED),
        )
        await session.run()
    finally:
        services.metrics.sockets.dec()
        if sockets is not None:
            sockets.discard(ws)
        if not ws.closed:
            await ws.close()
    return ws


async def close_sockets(app: web.Application) -> None:
    """Tell every open socket the server is going away, so shutting down does not wait on them.

    The widget reconnects (to this process when it is back, or to another behind the same URL)
    and replays what it missed.
    """
    sockets = list(app.get(OPEN_SOCKETS, ()))
    await asyncio.gather(
        *(ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down") for ws in sockets),
        return_exceptions=True,
    )
