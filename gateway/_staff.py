"""Staff approvers: what waits for a person's decision across threads, listed and watched.

``StaffApprovals`` answers "what may this actor decide?" over ``Store.open_approvals``: the
store's pages, newest first, filtered by ``ApprovalPolicy.can_decide`` (a role's approvals in the
staff's tenant, the caller's own requester approvals otherwise). A page scans at most
``scan_limit`` records: a caller who may decide little among many does not make one request read
the whole store; the page then comes back short, with a cursor that goes on from where it stopped.

``ApprovalFeed`` tells watchers (web sockets that said ``hello {watch_approvals: true}``) of each
new pending approval they may decide (``approval-pending``) and of each that stops waiting
(``approval-closed``). The store is shared by every process, so the feed polls it: one poller per
process, only while something watches, every ``interval`` seconds, and at once when this
process writes an ``approval-requested`` or ``approval-settled`` event (the feed is a
``RuntimeObserver``). An approval asked or decided on another process reaches watchers here
within one ``interval``.

The route: ``GET /agent/approvals?limit=&cursor=`` (``add_staff_routes``); the console is
``gateway._console``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aiohttp import web
from pydantic import BaseModel, ConfigDict

from tools import Actor, Confirmation

from ._approvals import ApprovalPolicy
from ._cursors import decode_cursor, encode_cursor
from ._guard import page_size
from ._runtime import RuntimeObserver
from ._services import SERVICES
from .events import ApprovalRequestedEvent, ApprovalSettledEvent, RunEvent
from .stores import ApprovalRecord, Store

__all__ = [
    "APPROVAL_FEED",
    "ApprovalFeed",
    "ApprovalSource",
    "PendingApproval",
    "Requester",
    "StaffApprovals",
    "add_staff_routes",
    "may_watch_approvals",
]

logger = logging.getLogger("gateway.staff")

_PAGE_DEFAULT, _PAGE_MAX = 20, 100
_STORE_PAGE = 100


class Requester(BaseModel):
    """Who asked for an action (the person whose turn it was)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tenant: str | None = None


class PendingApproval(BaseModel):
    """One pending approval as staff see it (``GET /agent/approvals``, ``approval-pending`` frames)."""

    model_config = ConfigDict(extra="forbid")

    tool_call_id: str
    tool: str
    confirmation: Confirmation
    """The filled prompt: ``title``, ``detail`` and ``verb``."""
    tone: Literal["neutral", "destructive"] | None = None
    approver: str
    """``"requester"`` or the role that decides."""
    requester: Requester
    channel: str | None = None
    """The channel of the requester's thread (``web``, ``whatsapp``...)."""
    thread_id: str
    run_id: str
    requested_at: str
    expires_at: str


def may_watch_approvals(policy: ApprovalPolicy, actor: Actor) -> bool:
    """Whether ``actor`` may watch the approval feed: they hold a role that approves some tool.

    A requester's own approvals reach them on their own thread; the feed is the staff's.
    """
    return not policy.approver_roles().isdisjoint(actor.roles)


class ApprovalSource(Protocol):
    """What the staff's lists read: the shared store and the policy in force (a ``Runtime``)."""

    @property
    def store(self) -> Store: ...

    @property
    def approval_policy(self) -> ApprovalPolicy: ...

    @property
    def observers(self) -> list[RuntimeObserver]: ...


@dataclass(kw_only=True)
class StaffApprovals:
    """The pending approvals an actor may decide, across threads (see the module's docstring)."""

    source: ApprovalSource
    scan_limit: int = 1000
    """Records one page reads from the store at most, whatever it finds."""

    async def page(
        self, actor: Actor, *, before: tuple[float, str] | None = None, limit: int = _PAGE_DEFAULT
    ) -> tuple[list[PendingApproval], tuple[float, str] | None]:
        """Up to ``limit`` approvals ``actor`` may decide, older than ``before``; and where the next page starts.

        The position is ``None`` when the store holds no more; otherwise it is the last record
        this page read (the next page may be empty, when nothing after it was the actor's).
        """
        policy = self.source.approval_policy
        found: list[ApprovalRecord] = []
        position = before
        scanned = 0
        while scanned < self.scan_limit:
            asked = min(_STORE_PAGE, self.scan_limit - scanned)
            batch = await self.source.store.open_approvals(before=position, limit=asked)
            for record in batch:
                scanned += 1
                position = (record.requested_ts, record.tool_call_id)
                if not record.lapsed() and policy.can_decide(actor, record):
                    found.append(record)
                    if len(found) == limit:
                        return await self.present(found), position
            if len(batch) < asked:
                return await self.present(found), None
        return await self.present(found), position

    async def all_for(self, actor: Actor) -> list[PendingApproval]:
        """Every approval ``actor`` may decide, within ``scan_limit`` records."""
        approvals, _ = await self.page(actor, limit=self.scan_limit)
        return approvals

    async def present(self, records: list[ApprovalRecord]) -> list[PendingApproval]:
        """The records as staff see them, each with its thread's channel.

        The threads are read all at once (a Redis store sends the reads in one pipeline), not
        one after another: a page of 20 approvals on 20 threads is one round trip, not 20.
        """
        thread_ids = list(dict.fromkeys(record.thread_id for record in records))
        # Every read ends before this returns; the first failure is raised as it is (a store's
        # StoreUnavailableError stays one, as the routes expect, where a TaskGroup would wrap it).
        threads = await asyncio.gather(
            *(self.source.store.get_thread(thread_id) for thread_id in thread_ids), return_exceptions=True
        )
        channels: dict[str, str | None] = {}
        for thread_id, thread in zip(thread_ids, threads, strict=True):
            if isinstance(thread, BaseException):
                raise thread
            channels[thread_id] = thread.channel if thread is not None else None
        shown = []
        for record in records:
            shown.append(
                PendingApproval(
                    tool_call_id=record.tool_call_id,
                    tool=record.tool,
                    confirmation=record.confirmation,
                    tone=record.tone,
                    approver=record.approver,
                    requester=Requester(id=record.requester_id, tenant=record.requester_tenant),
                    channel=channels[record.thread_id],
                    thread_id=record.thread_id,
                    run_id=record.run_id,
                    requested_at=record.requested_at,
                    expires_at=record.expires_at,
                )
            )
        return shown


# -- the live feed ---------------------------------------------------------------------------------

Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(kw_only=True, eq=False)
class _Watcher:
    actor: Actor
    frames: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(maxsize=500))
    seen: dict[str, PendingApproval] = field(default_factory=dict)
    """What this watcher was told waits, by tool call id."""


class ApprovalFeed(RuntimeObserver):
    """New and closed pending approvals, for the staff who may decide them (module docstring).

    Frames: ``{"type": "approval-pending", "approval": PendingApproval}`` (also, on watching,
    one for each that waits already) and ``{"type": "approval-closed", "tool_call_id", "status"}``
    (``approved``, ``rejected``, ``expired``, or ``gone`` when its thread was erased).

    Args:
        staff: What an actor may decide.
        interval: Seconds between two looks at the store while something watches.
    """

    def __init__(self, staff: StaffApprovals, *, interval: float = 1.0) -> None:
        self.staff = staff
        self.interval = interval
        self._watchers: set[_Watcher] = set()
        self._wake = asyncio.Event()
        self._poller: asyncio.Task[None] | None = None
        self._closed = False

    def events_written(self, thread_id: str, events: list[RunEvent]) -> None:
        """Look at once when this process asked for or settled an approval."""
        if any(isinstance(e, ApprovalRequestedEvent | ApprovalSettledEvent) for e in events):
            self._wake.set()

    async def follow(self, actor: Actor, send: Send) -> None:
        """Send ``actor`` the feed's frames until cancelled (or until ``send`` raises)."""
        async with self.watch(actor) as frames:
            async for frame in frames:
                await send(frame)

    @contextlib.asynccontextmanager
    async def watch(self, actor: Actor) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """The feed's frames for ``actor``, for the ``async with`` block's duration."""
        if self._closed:
            raise RuntimeError("Cannot watch a closed approval feed")
        watcher = _Watcher(actor=actor)
        self._watchers.add(watcher)
        self._wake.set()
        observers = self.staff.source.observers
        if self not in observers:
            observers.append(self)  # told of this process's writes while something watches
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll_while_watched(), name="agora-approval-feed")
        try:
            yield self._frames(watcher)
        finally:
            self._watchers.discard(watcher)

    @staticmethod
    async def _frames(watcher: _Watcher) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await watcher.frames.get()

    async def aclose(self) -> None:
        """Stop the poller (the app's shutdown)."""
        self._closed = True
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
        if self in self.staff.source.observers:
            self.staff.source.observers.remove(self)

    async def _poll_while_watched(self) -> None:
        try:
            while self._watchers:
                self._wake.clear()
                try:
                    await self.poll()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the store is away: the next look tries again
                    logger.warning("the approval feed could not read the store: %s", exc)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._wake.wait()
        finally:
            if not self._watchers and self in self.staff.source.observers:
                self.staff.source.observers.remove(self)

    async def poll(self) -> None:
        """One look at the store: tell each watcher what is new and what closed since its last."""
        records: list[ApprovalRecord] = []
        before: tuple[float, str] | None = None
        while len(records) < self.staff.scan_limit:
            batch = await self.staff.source.store.open_approvals(before=before, limit=_STORE_PAGE)
            records.extend(r for r in batch if not r.lapsed())
            if len(batch) < _STORE_PAGE:
                break
            before = (batch[-1].requested_ts, batch[-1].tool_call_id)
        waiting = {r.tool_call_id: r for r in records}
        statuses: dict[str, str] = {}
        shown: dict[str, PendingApproval] = {}
        policy = self.staff.source.approval_policy
        for watcher in list(self._watchers):
            mine = [r for r in reversed(records) if policy.can_decide(watcher.actor, r)]
            new = [r for r in mine if r.tool_call_id not in watcher.seen]
            missing = [r for r in new if r.tool_call_id not in shown]
            shown.update((p.tool_call_id, p) for p in await self.staff.present(missing))
            for record in new:
                approval = shown[record.tool_call_id]
                watcher.seen[record.tool_call_id] = approval
                self._put(watcher, {"type": "approval-pending", "approval": approval.model_dump(mode="json")})
            for tool_call_id in [t for t in watcher.seen if t not in waiting]:
                del watcher.seen[tool_call_id]
                if tool_call_id not in statuses:
                    settled = await self.staff.source.store.get_approval(tool_call_id)
                    statuses[tool_call_id] = settled.status if settled is not None else "gone"
                status = statuses[tool_call_id]
                self._put(watcher, {"type": "approval-closed", "tool_call_id": tool_call_id, "status": status})

    @staticmethod
    def _put(watcher: _Watcher, frame: dict[str, Any]) -> None:
        try:
            watcher.frames.put_nowait(frame)
        except asyncio.QueueFull:  # a watcher this far behind re-reads the list (GET /agent/approvals)
            logger.info("dropped an approval-feed frame for a watcher that stopped reading")


APPROVAL_FEED = web.AppKey("agora_approval_feed", ApprovalFeed)
"""The app's approval feed (the web socket's ``watch_approvals``)."""


# -- HTTP ------------------------------------------------------------------------------------------


def staff_approvals(app: web.Application) -> StaffApprovals:
    """What the app's actors may decide (over its runtime's store and policy)."""
    return StaffApprovals(source=app[SERVICES].runtime)


async def list_approvals(request: web.Request) -> web.Response:
    """``GET /agent/approvals?limit=&cursor=``: pending approvals the caller may decide, newest first.

    Answers ``{approvals: [PendingApproval...], next_cursor}``; ``next_cursor`` (``null`` on the
    last page) asks for the next page. A cursor is signed for the caller: another's, or an edited
    one, is refused (400).
    """
    services = request.app[SERVICES]
    actor = await services.resolve_actor(request)
    limit = page_size(request, default=_PAGE_DEFAULT, maximum=_PAGE_MAX)
    cursor = request.query.get("cursor")
    before = decode_cursor(services.secret, actor, cursor, purpose="approvals") if cursor is not None else None
    approvals, position = await staff_approvals(request.app).page(actor, before=before, limit=limit)
    after = encode_cursor(services.secret, actor, position, purpose="approvals") if position is not None else None
    body = {"approvals": [a.model_dump(mode="json") for a in approvals], "next_cursor": after}
    return web.json_response(
        body, headers={"Cache-Control": "no-store"}, dumps=lambda v: json.dumps(v, ensure_ascii=False)
    )


def add_staff_routes(app: web.Application) -> None:
    """Mount ``GET /agent/approvals`` and give the app its approval feed (``APPROVAL_FEED``)."""
    app.router.add_get("/agent/approvals", list_approvals)
    services = app.get(SERVICES)
    if services is None:
        return
    runtime = services.runtime
    approval_feed = ApprovalFeed(StaffApprovals(source=runtime))
    app[APPROVAL_FEED] = approval_feed

    async def lifecycle(_app: web.Application) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await approval_feed.aclose()

    app.cleanup_ctx.append(lifecycle)
