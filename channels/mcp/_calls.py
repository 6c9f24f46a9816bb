"""``tools/list`` and ``tools/call``: the registry's tools for the session's actor, called as runs.

A call is a direct-call run (``Runtime.call_tool``) on a thread of its own; its events are
followed until the run ends and become the ``CallToolResult``. An action that parks for an
approval is asked through ``elicitation/create`` on the call's SSE stream; the client's answer
(a JSON-RPC response, on any process) decides it (``answer_elicitation``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, cast

from mcp import types

from gateway import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    ChannelServices,
    ThreadBusyError,
    UnknownAgentError,
    one_line,
)
from gateway.events import (
    ENDED_STATUSES,
    ApprovalRequestedEvent,
    RunErrorEvent,
    RunEvent,
    RunFinishedEvent,
    ToolCompletedEvent,
    ToolDeniedEvent,
    ToolFailedEvent,
    ToolStartedEvent,
    UiEvent,
    new_id,
)
from tools import Actor, ToolDefinition, UiCapabilities

from ._sessions import McpSession

__all__ = [
    "APPROVAL_ID_PREFIX",
    "MCP_CAPABILITIES",
    "CallFollower",
    "answer_elicitation",
    "list_tools",
    "visible_tools",
]

logger = logging.getLogger("channels.mcp")

MCP_CAPABILITIES = UiCapabilities(formats=["image", "text"])
"""What an MCP client is given of a component: its text, and a PNG when it renders to one."""

APPROVAL_ID_PREFIX = "agora-approval:"
"""The id of an ``elicitation/create`` request we send: this prefix, then the approval's tool call id."""


Send = Callable[[dict[str, Any]], Awaitable[None]]
"""Writes one JSON-RPC message to the client on the call's stream (``None`` when there is none)."""


async def visible_tools(services: ChannelServices, actor: Actor, session: McpSession) -> list[ToolDefinition]:
    """What the session's actor may call: ``definitions_for`` its agent, actions only with elicitation."""
    runtime = services.runtime
    try:  # the actor's roles now, not when the session opened: an agent no longer theirs lists nothing
        agent = runtime.agent_for(session.agent, actor)
    except UnknownAgentError:
        return []
    offered = await runtime.registry.definitions_for(actor, agent, MCP_CAPABILITIES)
    return [d for d in offered if session.elicitation or d.kind != "action"]


def list_tools(services: ChannelServices, definitions: list[ToolDefinition]) -> types.ListToolsResult:
    """The ``tools/list`` result: each tool with its schema, title and ``readOnlyHint``."""
    listed = []
    for definition in definitions:
        tool = services.runtime.registry.get(definition.name)
        label = tool.presentation.label if tool is not None and tool.presentation is not None else None
        read = definition.kind == "read"
        listed.append(
            types.Tool(
                name=definition.name,
                title=label,
                description=definition.description,
                inputSchema=definition.parameters,
                annotations=types.ToolAnnotations(
                    title=label, readOnlyHint=read, destructiveHint=None if read else True
                ),
            )
        )
    return types.ListToolsResult(tools=listed)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or "The tool failed.")
    return str(error or "The tool failed.")


class CallFollower:
    """Follows one call's run to its end and builds the ``CallToolResult``.

    Args:
        services: The gateway's services (runtime, component rendering, media).
        actor: The caller.
        send: Writes a message to the client on this call's stream; ``None`` when the answer is
            plain JSON (no stream to ask on): an approval is then refused, never left hanging.
        timeout: Seconds the call may take, an approval's wait included.
    """

    def __init__(self, services: ChannelServices, actor: Actor, send: Send | None, *, timeout: float) -> None:
        self.services = services
        self.actor = actor
        self.send = send
        self.timeout = timeout
        self.content: list[types.TextContent | types.ImageContent] = []
        self.structured: dict[str, Any] | None = None
        self.is_error = False
        self._done = False
        self.session_id = ""

    def _text(self, text: str | None) -> None:
        if text:
            self.content.append(types.TextContent(type="text", text=text))

    async def call(self, session: McpSession, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run ``name`` with ``arguments`` as a direct-call run and answer its result."""
        self.session_id = session.session_id
        runtime = self.services.runtime
        thread_id = new_id("mcp")
        run_id = await runtime.call_tool(
            self.actor,
            name,
            arguments,
            thread_id=thread_id,
            channel="mcp",
            agent=session.agent,
            ui_capabilities=MCP_CAPABILITIES,
        )
        try:
            async with asyncio.timeout(self.timeout):
                await self._follow(thread_id, run_id)
        except TimeoutError:
            logger.info(
                "MCP call %s (run %s) outlived its %.0f s; answered as still running", name, run_id, self.timeout
            )
            self.is_error = True
            self._text(f"The call did not finish within {self.timeout:.0f} seconds; it goes on (run {run_id}).")
        return types.CallToolResult(
            content=list(self.content), structuredContent=self.structured, isError=self.is_error
        )

    async def _follow(self, thread_id: str, run_id: str) -> None:
        # The store's subscription is an async generator (typed as an iterator): closed when the
        # answer is complete, so a live subscription ends with the call that asked for it.
        subscription = cast("AsyncGenerator[RunEvent, None]", self.services.runtime.subscribe(thread_id, 0))
        async with contextlib.aclosing(subscription) as events:
            async for event in events:
                await self._take(event, run_id)
                if self._done:
                    return

    async def _take(self, event: RunEvent, run_id: str) -> None:
        """Fold one event of the thread into the answer (``_done`` once the call's answer is complete)."""
        if event.run_id != run_id:
            return
        match event:
            case ToolStartedEvent():
                self._text(event.running)
            case UiEvent():
                await self._ui(event)
            case ToolCompletedEvent():
                self._text(event.done)
                self._text(json.dumps(event.output, ensure_ascii=False))
                if isinstance(event.output, dict):
                    self.structured = event.output
            case ToolFailedEvent():
                self.is_error = True
                self._text(_error_text(event.error))
            case ToolDeniedEvent():
                self.is_error = True
                self._text(f"Not done: {event.reason}" if event.reason else "Not done.")
            case ApprovalRequestedEvent():
                if not await self._ask(event):
                    self._done = True  # waits for someone else's decision: answered now, the run goes on
            case RunErrorEvent():
                self.is_error = True
                if not self.content:
                    self._text(event.message)
            case RunFinishedEvent() if event.status in ENDED_STATUSES:
                if event.status != "completed":
                    self.is_error = True
                self._done = True
            case _:
                pass

    async def _ui(self, event: UiEvent) -> None:
        delivered = await self.services.deliver_ui(event, MCP_CAPABILITIES)
        self._text(delivered.text)
        for media in delivered.media:
            if not media.mime.startswith("image/"):
                continue
            stored = await self.services.media_bytes(media.token)
            if stored is not None:
                data, mime, _name = stored
                self.content.append(
                    types.ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mimeType=mime)
                )

    async def _ask(self, event: ApprovalRequestedEvent) -> bool:
        """Ask the client to decide the approval; False when it is someone else's to decide."""
        runtime = self.services.runtime
        approval = await runtime.get_approval(event.tool_call_id)
        if approval is None or not runtime.approval_policy.can_decide(self.actor, approval):
            self._text(f"Waiting for approval ({event.approver}): {event.confirmation.title}")
            return False
        if self.send is None:
            reason = "This client cannot be asked for approval on this request (it accepts no event stream)."
            await _decide(self.services, event.tool_call_id, self.actor, approve=False, reason=reason)
            return True
        confirmation = event.confirmation
        message = confirmation.title + (f"\n\n{confirmation.detail}" if confirmation.detail else "")
        params = types.ElicitRequestFormParams(
            message=message,
            requestedSchema={
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": confirmation.verb or "Approve",
                        "description": confirmation.title,
                        "default": True,
                    }
                },
                "required": ["approve"],
            },
        )
        # Only this session may answer it: an id naming another approval (asked on the web, say)
        # decides nothing (``answer_elicitation``).
        ttl = max(approval.expires_ts - time.time(), 60.0)
        state = self.services.state("mcp")
        await state.set(state.key("asked", event.tool_call_id), self.session_id, ttl=ttl)
        request = types.JSONRPCRequest(
            jsonrpc="2.0",
            id=APPROVAL_ID_PREFIX + event.tool_call_id,
            method="elicitation/create",
            params=params.model_dump(by_alias=True, exclude_none=True, mode="json"),
        )
        await self.send(request.model_dump(by_alias=True, exclude_none=True, mode="json"))
        return True


async def _decide(
    services: ChannelServices, tool_call_id: str, actor: Actor, *, approve: bool, reason: str | None = None
) -> bool:
    """``decide`` through the store, as MCP; False when it changed nothing (settled, forged, lapsed)."""
    for attempt in range(20):
        try:
            await services.runtime.decide(tool_call_id, actor, approve=approve, reason=reason, via="mcp")
            return True
        except ThreadBusyError:
            await asyncio.sleep(0.05 * (attempt + 1))  # its run is still parking: a retry gets the answer
        except (ApprovalNotFoundError, ApprovalForbiddenError, ApprovalSettledError, ApprovalExpiredError) as exc:
            logger.info(
                "MCP refused POST /mcp: the approval answer for %s changed nothing: %s",
                one_line(tool_call_id, 80),
                exc.code,
            )
            return False
    logger.warning("MCP approval answer for %s: its run stayed busy", one_line(tool_call_id, 80))
    return False


async def answer_elicitation(
    services: ChannelServices, actor: Actor, session: McpSession, message: types.JSONRPCResponse | types.JSONRPCError
) -> None:
    """Decide the approval a client's answer to our ``elicitation/create`` names (any process).

    ``accept`` with ``approve`` true approves; ``accept`` with it false or not a boolean (or
    missing), ``decline``, ``cancel`` or an error answer rejects. An id we never sent, a replay
    or someone else's approval changes nothing (``decide`` refuses it), with one log line.
    """
    if not isinstance(message.id, str) or not message.id.startswith(APPROVAL_ID_PREFIX):
        logger.info("MCP refused POST /mcp: a response to no request of ours (id %s)", one_line(str(message.id), 80))
        return
    tool_call_id = message.id.removeprefix(APPROVAL_ID_PREFIX)
    state = services.state("mcp")
    asked = await state.get(state.key("asked", tool_call_id))
    if asked != session.session_id:
        logger.info("MCP refused POST /mcp: this session was not asked approval %s", one_line(tool_call_id, 80))
        return
    if isinstance(message, types.JSONRPCError):
        reason = f"The client could not ask: {message.error.message}"
        await _decide(services, tool_call_id, actor, approve=False, reason=one_line(reason, 300))
        return
    try:
        result = types.ElicitResult.model_validate(message.result)
    except ValueError:
        await _decide(services, tool_call_id, actor, approve=False, reason="The client's answer was not understood.")
        return
    # Only the schema we asked for approves: ``accept`` with ``approve`` the boolean true. An
    # ``accept`` without content, or with an ``approve`` that is no boolean, is not a yes.
    said_approve = (result.content or {}).get("approve")
    approve = result.action == "accept" and said_approve is True
    said: str | None = None if approve else f"The person answered {result.action}."
    if result.action == "accept" and not isinstance(said_approve, bool):
        said = "The answer did not match the requested schema (a boolean approve)."
    await _decide(services, tool_call_id, actor, approve=approve, reason=said)
