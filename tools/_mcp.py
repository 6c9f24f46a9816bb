"""``McpToolset``: a remote MCP server's tools, imported as governed tools.

One supervisor task (owned: started by ``start``, cancelled and awaited by ``aclose``) holds the
connection. It opens the transport (stdio: ``mcp.client.stdio.stdio_client``; Streamable HTTP:
``mcp.client.streamable_http.streamable_http_client``), initializes a ``ClientSession``, lists the
tools (every page) and adds them to the registry; then it waits. A
``notifications/tools/list_changed`` lists them again (new ones join, removed ones retire; the
refresh runs in the supervisor, never in the session's receive loop, which it would block). When
the connection ends (the process exited, a request found the server gone) it reconnects with
back-off (0.2 s doubling to 30 s); the tools stay registered under their names and a call
meanwhile fails with the reason. Calls run on the caller's task through the live session.

Protocol quirks handled here:

- The session's receive loop ends quietly when a stdio server exits: the transport's read
  stream is forwarded through one more stream whose end wakes the supervisor.
- ``streamablehttp_client`` is deprecated in ``mcp`` 1.2x (a warning on every use); this uses
  ``streamable_http_client`` with our own ``httpx.AsyncClient`` (headers, timeouts).
- A call the server never answers (a hung tool, an HTTP server that died mid-stream) is bounded
  by ``timeout``; the request is abandoned on our side.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ._errors import ToolFailed, ToolTimeoutError, UserError
from ._mcp_import import (
    _MAX_ERROR_CHARS,
    _MAX_PAGES,
    _MAX_TOOLS,
    DEFAULT_MAX_RESULT_CHARS,
    MCP_IDEMPOTENCY_KEY,
    McpKind,
    _arguments_model,
    _check_roles,
    _choose_kind,
    _description_of,
    _error_text,
    _local_name,
    _presentation_of,
    _result_output,
    _risky_patterns,
)
from ._tool import Tool, define_tool
from ._toolset import Toolset, ToolsetHost

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp import types as mcp_types

    from ._context import ToolContext

__all__ = ["McpState", "McpToolset"]

logger = logging.getLogger("tools.mcp")

_BACKOFF = (0.2, 30.0)
_CONNECTION_CLOSED = -32000  # mcp.shared.exceptions' CONNECTION_CLOSED
_SESSION_TERMINATED = 32600  # what the Streamable HTTP client answers for a 404 (an expired session)


class McpState(enum.Enum):
    """Where an ``McpToolset``'s connection stands."""

    NEW = "new"
    """Not started."""
    CONNECTING = "connecting"
    """The first attempt is under way."""
    CONNECTED = "connected"
    """Initialized and listed: its tools answer."""
    DISCONNECTED = "disconnected"
    """Down; reconnecting with back-off (its tools stay, and fail with the reason)."""
    CLOSED = "closed"
    """``aclose`` was called: its tools are retired."""


def _reason(exc: BaseException) -> str:
    """One line for a failure, the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@dataclasses.dataclass(kw_only=True)
class _Imported:
    """A remote tool as imported: its local tool and the listing it was built from."""

    tool: Tool
    listing: dict[str, Any]


class McpToolset(Toolset):
    """The tools of one MCP server (stdio or Streamable HTTP) as governed tools.

    Register it wherever tools are listed: ``ToolRegistry(...).register(toolset)``,
    ``Runtime(tools=[...])``, ``Gateway(tools=[...])``. It connects at ``Runtime.start()``
    (``create_app`` starts the runtime); a server that is down then does not stop the start:
    its tools appear once it connects.

    Each remote tool becomes ``<prefix>_<tool>`` (made a valid name; a name already taken stays
    its first owner's, logged): ``roles`` and every other gate apply, its ``kind`` follows
    ``kind``, its presentation the remote ``title``, its description the remote one. The model
    sees the remote JSON schema, and the arguments are validated against it before the call (a
    failure is a ``ToolInputInvalidError`` the model reads). Remote errors (``isError``, JSON-RPC
    errors) are ``ToolFailed``; a call past ``timeout`` a ``ToolTimeoutError``; results longer
    than ``max_result_chars`` are cut. Every call carries ``ctx.idempotency_key`` in its
    ``_meta`` under ``MCP_IDEMPOTENCY_KEY``.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        command: Sequence[str] | None = None,
        prefix: str | None = None,
        roles: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        kind: McpKind = "annotations",
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        name: str | None = None,
        connect_timeout: float = 10.0,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        """Declare a remote server; nothing connects before ``start``.

        Args:
            url: A Streamable HTTP endpoint (``http(s)://host/mcp``).
            command: A stdio server: the program and its arguments (``[sys.executable, "srv.py"]``).
            prefix: Put before each remote name (``<prefix>_<tool>``); ``None``: the remote names.
            roles: Roles every imported tool requires (none: open to the roles policy's default).
            headers: HTTP headers of every request (``Authorization``...); ``url`` only.
            kind: ``"annotations"`` (``readOnlyHint`` -> ``read``, else ``action``), ``"read"``,
                ``"action"``, or a function of the remote ``mcp.types.Tool``.
            timeout: Seconds a call may take before it fails (a hung server).
            env: Environment variables added to the stdio server's (``command`` only).
            cwd: The stdio server's working folder (``command`` only).
            name: Names the server in logs and descriptions (the prefix, host or program).
            connect_timeout: Seconds ``start`` waits for the first connection at most.
            max_result_chars: Characters of a result the model sees at most (32,000).

        Raises:
            UserError: Neither or both of ``url`` and ``command``, or an option out of range.
        """
        if (url is None) == (command is None):
            raise UserError("McpToolset needs exactly one of url=... (Streamable HTTP) or command=[...] (stdio)")
        if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            raise UserError(f"McpToolset(url=...) must be an http(s) URL, not {url!r}")
        if command is not None and (
            isinstance(command, str) or not command or not all(isinstance(part, str) and part for part in command)
        ):
            raise UserError(f"McpToolset(command=...) must be a non-empty list of str, not {command!r}")
        if headers is not None and url is None:
            raise UserError("McpToolset(headers=...) applies to url=... only")
        if (env is not None or cwd is not None) and command is None:
            raise UserError("McpToolset(env=..., cwd=...) apply to command=[...] only")
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise UserError(f"McpToolset(prefix=...) must be a non-empty str, not {prefix!r}")
        if not callable(kind) and kind not in ("read", "action", "annotations"):
            raise UserError(f"McpToolset(kind=...) must be 'read', 'action', 'annotations' or a function, not {kind!r}")
        for option, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise UserError(f"McpToolset({option}=...) must be a positive number of seconds")
        if isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int) or max_result_chars < 100:
            raise UserError("McpToolset(max_result_chars=...) must be an int of at least 100")
        self.url = url
        self.command = tuple(command) if command is not None else None
        self.prefix = prefix
        self.roles = _check_roles(roles)
        self.headers = dict(headers or {})
        self.kind = kind
        self.timeout = float(timeout)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.connect_timeout = float(connect_timeout)
        self.max_result_chars = max_result_chars
        self.name = name or prefix or self._default_name()
        self._state = McpState.NEW
        self._session: ClientSession | None = None
        self._host: ToolsetHost | None = None
        self._imported: dict[str, _Imported] = {}
        """Remote name -> what was imported for it; kept across reconnects, so names stay."""
        self._names: dict[str, str] = {}
        self._supervisor: asyncio.Task[None] | None = None
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        """Set when the current connection ends: the calls on it stop waiting (see ``_call``)."""
        self._lost = False
        self._stale = False
        self._last_error = "not connected yet"
        self.connections = 0
        """How many times it connected (and listed) since ``start``; a reconnect adds one."""

    def _default_name(self) -> str:
        if self.url is not None:
            from urllib.parse import urlsplit

            return urlsplit(self.url).netloc or self.url
        assert self.command is not None
        return os.path.basename(self.command[-1] if len(self.command) > 1 else self.command[0])

    def __repr__(self) -> str:
        return f"McpToolset(name={self.name!r}, state={self._state.value})"

    # -- what it holds --------------------------------------------------------------------------

    @property
    def state(self) -> McpState:
        """Where the connection stands."""
        return self._state

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools it has in the registry now."""
        return tuple(item.tool.name for item in self._imported.values())

    async def wait_for(self, predicate: Callable[[McpToolset], bool], *, timeout: float) -> None:
        """Wait until ``predicate(self)`` holds; it is checked on every change of state or tools.

        Raises:
            TimeoutError: ``timeout`` seconds passed first.
        """
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: predicate(self))

    async def _notify(self, state: McpState | None = None) -> None:
        if state is not None:
            self._state = state
        async with self._changed:
            self._changed.notify_all()

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, host: ToolsetHost) -> None:
        """Connect in the background; return once the first attempt settled (or ``connect_timeout``).

        Raises:
            RuntimeError: Started or closed already.
        """
        if self._state is not McpState.NEW:
            raise RuntimeError(f"Cannot start McpToolset {self.name!r} twice (it is {self._state.value})")
        self._host = host
        self._state = McpState.CONNECTING
        self._supervisor = asyncio.create_task(self._supervise(host), name=f"agora-mcp-{self.name}")
        with contextlib.suppress(TimeoutError):
            await self.wait_for(lambda t: t.state is not McpState.CONNECTING, timeout=self.connect_timeout)

    async def aclose(self) -> None:
        """Disconnect and retire every imported tool (idempotent)."""
        if self._state is McpState.CLOSED:
            return
        self._state = McpState.CLOSED
        task, self._supervisor = self._supervisor, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # aclose itself was cancelled
        if self._host is not None:
            for item in self._imported.values():
                self._host.remove_tool(item.tool.name, self)
        self._imported.clear()
        await self._notify()

    async def _supervise(self, host: ToolsetHost) -> None:
        delay = _BACKOFF[0]
        while True:
            connected = False
            try:
                connected = await self._serve_once(host)
                self._last_error = "the connection ended"
            except Exception as exc:  # every failure of one connection: log one line, reconnect
                self._last_error = _reason(exc)
            self._session = None
            if connected:
                delay = _BACKOFF[0]
            logger.warning(
                "MCP server %s is unavailable (%s); reconnecting in %.1f s", self.name, self._last_error, delay
            )
            await self._notify(McpState.DISCONNECTED)
            await asyncio.sleep(delay)  # back-off, not synchronisation
            delay = min(delay * 2, _BACKOFF[1])

    async def _serve_once(self, host: ToolsetHost) -> bool:
        """One connection: initialize, list, then follow list changes until it ends.

        Returns whether it got as far as listing (the back-off starts again then).
        """
        import anyio
        from mcp import ClientSession

        self._lost, self._stale = False, False
        self._wake.clear()
        self._ended = asyncio.Event()
        async with self._transport() as (read, write):
            relay_send, relay_receive = anyio.create_memory_object_stream[Any](0)
            relay = asyncio.create_task(self._relay(read, relay_send), name=f"agora-mcp-relay-{self.name}")
            try:
                async with ClientSession(relay_receive, write, message_handler=self._on_message) as session:
                    try:
                        async with asyncio.timeout(self.connect_timeout):
                            await session.initialize()
                            await self._sync(session, host)
                    except TimeoutError:
                        raise ConnectionError(
                            f"no answer to initialize and tools/list within {self.connect_timeout:g} s"
                        ) from None
                    self._session = session
                    self.connections += 1
                    await self._notify(McpState.CONNECTED)
                    logger.info("MCP server %s connected: %d tools", self.name, len(self._imported))
                    while True:
                        await self._wake.wait()
                        self._wake.clear()
                        if self._lost:
                            return True
                        if self._stale:
                            self._stale = False
                            try:  # a server that stops answering tools/list is reconnected
                                async with asyncio.timeout(self.connect_timeout):
                                    await self._sync(session, host)
                            except TimeoutError:
                                raise ConnectionError(
                                    f"no answer to tools/list within {self.connect_timeout:g} s"
                                ) from None
                            await self._notify()
            finally:
                self._session = None
                relay_receive.close()
                relay.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await relay

    def _end(self) -> None:
        """The connection ended: calls fail from now on, and the supervisor reconnects."""
        self._lost = True
        self._ended.set()
        self._session = None
        if self._state is McpState.CONNECTED:
            self._state = McpState.DISCONNECTED
        self._wake.set()

    async def _relay(self, read: Any, send: Any) -> None:
        """Forward the transport's messages to the session; its end means the connection ended."""
        import anyio

        try:
            async with read, send:  # the session would close the transport's stream: it is ours now
                async for message in read:
                    await send.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            self._end()

    async def _on_message(self, message: Any) -> None:
        from mcp import types as mcp_types

        if isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %s", self.name, _reason(message))
        elif isinstance(message, mcp_types.ServerNotification) and isinstance(
            message.root, mcp_types.ToolListChangedNotification
        ):
            self._stale = True
            self._wake.set()

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=self.command[0], args=list(self.command[1:]), env=self.env, cwd=self.cwd
            )
            async with stdio_client(params) as (read, write):
                yield read, write
            return
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        assert self.url is not None
        timeout = httpx.Timeout(self.connect_timeout, read=max(self.timeout, 300.0))
        async with (
            httpx.AsyncClient(headers=self.headers, timeout=timeout) as client,
            streamable_http_client(self.url, http_client=client) as (read, write, _),
        ):
            yield read, write

    # -- the tools -------------------------------------------------------------------------------

    async def _sync(self, session: ClientSession, host: ToolsetHost) -> None:
        """List every page and make the registry match: add, replace changed, retire removed."""
        from mcp import types as mcp_types

        listed: dict[str, mcp_types.Tool] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for remote in page.tools:
                listed.setdefault(remote.name, remote)
            cursor = page.nextCursor
            if not cursor or len(listed) > _MAX_TOOLS:
                break
        else:
            logger.warning("MCP server %s: tools/list has over %d pages; the rest is not read", self.name, _MAX_PAGES)
        if len(listed) > _MAX_TOOLS:
            logger.warning(
                "MCP server %s lists %s tools; the first %d are imported", self.name,
                f"{len(listed)}{'+' if cursor else ''}", _MAX_TOOLS,
            )  # fmt: skip
            listed = dict(list(listed.items())[:_MAX_TOOLS])
        for remote_name in [n for n in self._imported if n not in listed]:
            host.remove_tool(self._imported.pop(remote_name).tool.name, self)
            self._names.pop(remote_name, None)  # its name is free for another remote tool
        for remote in listed.values():
            await asyncio.sleep(0)  # importing checks a schema: let the loop breathe between tools
            listing = remote.model_dump(mode="json", exclude_none=True)
            known = self._imported.get(remote.name)
            if known is not None and known.listing == listing:
                continue
            tool = self._import(remote)
            if known is not None:
                host.remove_tool(known.tool.name, self)
                del self._imported[remote.name]
            if tool is not None and host.add_tool(tool, self):
                self._imported[remote.name] = _Imported(tool=tool, listing=listing)

    def _import(self, remote: mcp_types.Tool) -> Tool | None:
        """The governed tool for one remote tool; ``None`` (one log line) when it cannot be one."""
        local = self._names.get(remote.name) or _local_name(self.prefix, remote.name)
        clash = next((r for r, n in self._names.items() if n == local and r != remote.name), None)
        if clash is not None:
            logger.warning(
                "MCP server %s: tool %r is skipped: its name %r is %r's already", self.name, remote.name, local, clash
            )
            return None
        try:
            model = _arguments_model(local, remote.inputSchema)
            kind = _choose_kind(self.kind, remote)
        except (ValueError, UserError) as exc:
            logger.warning("MCP server %s: tool %r is skipped: %s", self.name, remote.name, exc)
            return None
        for pattern in _risky_patterns(remote.inputSchema)["pattern"][:3]:
            logger.warning(
                "MCP server %s: tool %r: pattern %.80r is left to the server (it may backtrack for ever here)",
                self.name, remote.name, pattern,
            )  # fmt: skip
        self._names[remote.name] = local
        remote_name = remote.name

        async def execute(input: BaseModel, ctx: ToolContext) -> Any:
            return await self._call(remote_name, local, input.model_dump(mode="json"), ctx)

        presentation = _presentation_of(remote, local)
        tool = define_tool(
            name=local,
            description=_description_of(remote, self.name, presentation.label or local),
            input=model,
            kind=kind,
            roles=list(self.roles),
            presentation=presentation,
            execute=execute,
        )
        sourced: Tool = dataclasses.replace(tool, source=f"mcp:{self.name}/{remote.name}")
        return sourced

    @staticmethod
    async def _until_ended(request: Coroutine[Any, Any, mcp_types.CallToolResult], ended: asyncio.Event) -> Any:
        """Await ``request`` unless the connection ends first (then raise ``ClosedResourceError``).

        The session fails its pending requests when its stream ends, but not when it is closed
        first (its receive loop is cancelled): a crashed server must not leave a call hanging.
        """
        import anyio

        call = asyncio.create_task(request)
        watch = asyncio.create_task(ended.wait())
        try:
            await asyncio.wait({call, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            call.cancel()
            watch.cancel()
            await asyncio.gather(call, watch, return_exceptions=True)
        if call.cancelled():
            raise anyio.ClosedResourceError
        return call.result()

    async def _call(self, remote: str, local: str, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """One ``tools/call``: the failures become ``ToolFailed`` / ``ToolTimeoutError`` the model reads."""
        import anyio
        from mcp.shared.exceptions import McpError

        session = self._session
        if session is None or self._state is not McpState.CONNECTED:
            raise ToolFailed(
                f"The MCP server {self.name} is unavailable ({self._last_error}); it is reconnecting, try later",
                code="mcp_unavailable",
            )
        scope = asyncio.timeout(self.timeout)
        try:
            async with scope:
                result = await self._until_ended(
                    session.call_tool(remote, arguments, meta={MCP_IDEMPOTENCY_KEY: ctx.idempotency_key}),
                    self._ended,
                )
        except TimeoutError:
            if scope.expired():
                raise ToolTimeoutError(
                    f"The MCP server {self.name} did not answer {remote!r} within {self.timeout:g} s", tool=local
                ) from None
            raise
        except McpError as exc:
            if exc.error.code in (_CONNECTION_CLOSED, _SESSION_TERMINATED):
                self._end()
                raise ToolFailed(
                    f"The MCP server {self.name} disconnected during the call to {remote!r}; it is reconnecting",
                    code="mcp_disconnected",
                ) from None
            said = exc.error.message[:_MAX_ERROR_CHARS]
            raise ToolFailed(
                f"The MCP server {self.name} refused {remote!r}: {said} (JSON-RPC {exc.error.code})",
                code="mcp_error",
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._end()
            raise ToolFailed(
                f"The MCP server {self.name} disconnected during the call to {remote!r}; it is reconnecting",
                code="mcp_disconnected",
            ) from None
        except RuntimeError as exc:  # the session's own check of structured content against the output schema
            message = f"The MCP server {self.name} answered {remote!r} wrongly: {exc}"
            raise ToolFailed(message, code="mcp_error") from None
        if result.isError:
            raise ToolFailed(f"{remote} failed: {_error_text(result)}", code="mcp_tool_error")
        return _result_output(result, ctx, limit=self.max_result_chars, server=self.name)
