"""``ToolRegistry``: the gates, validation and invocation of governed tools."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import enum
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload, runtime_checkable

from pydantic import BaseModel, ValidationError

from ._actor import Actor
from ._context import ToolContext
from ._errors import (
    ToolDefinitionError,
    ToolDeniedError,
    ToolDisabledError,
    ToolError,
    ToolForbiddenError,
    ToolNotFoundError,
    ToolTimeoutError,
    UserError,
)
from ._preflight import (
    PreflightCompleted,
    PreflightDenied,
    PreflightPhase,
    PreflightReady,
    as_preflight_result,
)
from ._retry import TransientRetry, call_with_transient_retry
from ._tool import DescribeScope, Tool, ToolDescription, ToolKind, ToolLike, as_tool, call_hook
from ._toolset import Toolset
from ._ui import UiCapabilities, UiComponent

__all__ = [
    "AbilityRolesPolicy",
    "AgentScope",
    "DefaultRolesPolicy",
    "RolesPolicy",
    "ToolDefinition",
    "ToolRegistry",
]

logger = logging.getLogger("tools.registry")


def _role_names(roles: Sequence[str], where: str) -> tuple[str, ...]:
    # tuple("admin") would silently become the roles a, d, m, i, n.
    if isinstance(roles, str) or not isinstance(roles, Sequence) or not all(isinstance(r, str) for r in roles):
        raise UserError(f"{where}: default_roles must be a list of str, not {roles!r}")
    return tuple(roles)


DEFAULT_TRANSIENT_RETRY = TransientRetry()


@runtime_checkable
class AgentScope(Protocol):
    """What the registry needs of an agent: its name and its tool allow-list (``"*"`` = all)."""

    @property
    def name(self) -> str:
        """The agent's name."""
        ...

    @property
    def tools(self) -> Literal["*"] | Sequence[str]:
        """``"*"`` or the tool names the agent may offer."""
        ...


class RolesPolicy(Protocol):
    """Decides whether an actor may use a tool, from its ``roles`` and ``ability``."""

    def allows(self, actor: Actor, tool: Tool) -> bool | Awaitable[bool]:
        """True when ``actor`` may use ``tool``."""
        ...


class DefaultRolesPolicy:
    """Set intersection of the actor's roles and the tool's; a tool with no roles is open.

    This policy knows no abilities: a tool that names an ``ability`` fails closed (whatever its
    ``roles``), so forgetting to install an ability-aware policy never opens a tool.
    """

    def __init__(self, default_roles: Sequence[str] = ()) -> None:
        """Args: default_roles: roles applied to tools that declare none (empty = open)."""
        self.default_roles = _role_names(default_roles, "DefaultRolesPolicy()")

    def allows(self, actor: Actor, tool: Tool) -> bool:
        """True when the role sets intersect, or the tool is open."""
        if tool.ability is not None:
            return False
        roles = tool.roles or self.default_roles
        return not roles or not set(roles).isdisjoint(actor.roles)


class AbilityRolesPolicy:
    """Checks a tool's ``ability`` with ``check(actor, ability)``, and its ``roles`` by intersection."""

    def __init__(
        self, check: Callable[[Actor, str], bool | Awaitable[bool]], *, default_roles: Sequence[str] = ()
    ) -> None:
        """Args: check: decides an ability for an actor; default_roles: as in ``DefaultRolesPolicy``."""
        if not callable(check):
            raise UserError(f"AbilityRolesPolicy(): check must be callable(actor, ability), not {check!r}")
        self.check = check
        self.default_roles = _role_names(default_roles, "AbilityRolesPolicy()")

    async def allows(self, actor: Actor, tool: Tool) -> bool:
        """True when the ability (if any) is granted and the roles (if any) intersect."""
        if tool.ability is not None and not await call_hook(self.check, actor, tool.ability):
            return False
        roles = tool.roles or self.default_roles
        return not roles or not set(roles).isdisjoint(actor.roles)


def _scope(
    actor: Actor, agent: AgentScope | None, ui_capabilities: UiCapabilities | None, thread_id: str | None
) -> DescribeScope:
    """What ``describe`` sees this turn (the agent checked first)."""
    _check_agent(agent)
    return DescribeScope(
        actor=actor,
        thread_id=thread_id,
        agent_name=agent.name if agent is not None else None,
        ui_capabilities=ui_capabilities,
    )


@dataclass(frozen=True, kw_only=True)
class ToolDefinition:
    """A tool as offered to the model for one turn."""

    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments, self-contained."""
    kind: ToolKind


def _check_actor(actor: object, where: str) -> None:
    # Without this a wrong actor fails inside a gate, which fails closed and hides tools silently.
    if not isinstance(actor, Actor):
        raise UserError(f"{where}: actor must be an Actor, not {type(actor).__name__}")


def _check_agent(agent: AgentScope | None) -> None:
    # A bare string is a Sequence[str] too: "in" would then test substrings ("order" in "get_order").
    if agent is None:
        return
    tools = getattr(agent, "tools", None)
    if tools == "*":
        return
    if isinstance(tools, str) or not isinstance(tools, Collection) or not all(isinstance(t, str) for t in tools):
        raise UserError(
            f"agent {getattr(agent, 'name', agent)!r}: tools must be '*' or a list of tool names, not {tools!r}"
        )


_OPEN = ToolDescription()


async def _settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _Gate:
    """Which gate removed a tool, and the error an invoke raises for it."""

    def __init__(self, error: type[ToolError], message: str) -> None:
        self.error = error
        self.message = message


class _State(enum.Enum):
    NEW = "new"
    STARTED = "started"
    CLOSED = "closed"


class ToolRegistry:
    """Holds the tools of a gateway and governs every offer and call.

    Tools register in any authoring form; a ``Toolset`` (an MCP server's tools) registers the
    same way and adds its tools once ``start()`` has started it; ``aclose()`` closes it (the
    ``Runtime`` does both with its own ``start`` and ``aclose``).

    The gates run in this order, every turn and again on every call, and each can only remove:
    the agent's allow-list, ``enabled`` / ``is_enabled()``, the roles policy, ``can_use(actor)``,
    and ``describe(scope)`` (``available=False``). A tool that fails one is never shown to the
    model, and a call to it raises the matching error.
    """

    def __init__(
        self,
        tools: Iterable[ToolLike | Toolset] = (),
        *,
        roles_policy: RolesPolicy | None = None,
        transient_retry: TransientRetry | None = DEFAULT_TRANSIENT_RETRY,
    ) -> None:
        """Build a registry.

        Args:
            tools: Tools to register now, in any authoring form, and toolsets (``McpToolset``).
            roles_policy: Decides roles and abilities (``DefaultRolesPolicy()`` when omitted).
            transient_retry: Retry policy for transient failures; ``None`` disables retries.
        """
        if roles_policy is not None and not callable(getattr(roles_policy, "allows", None)):
            raise UserError(f"roles_policy must have an allows(actor, tool) method, not {roles_policy!r}")
        self.roles_policy: RolesPolicy = roles_policy or DefaultRolesPolicy()
        self.transient_retry = transient_retry
        self._tools: dict[str, Tool] = {}
        self._owners: dict[str, Toolset] = {}
        self._toolsets: list[Toolset] = []
        self._state = _State.NEW
        for tool in tools:
            self.register(tool)

    # -- the set of tools ---------------------------------------------------------------------------

    @overload
    def register(self, tool: Toolset) -> Toolset: ...
    @overload
    def register(self, tool: ToolLike) -> Tool: ...
    def register(self, tool: ToolLike | Toolset) -> Tool | Toolset:
        """Add a tool in any authoring form and return its ``Tool``, or a ``Toolset`` (returned as is).

        A toolset's tools join at ``start()``; register toolsets before it.

        Raises:
            ToolDefinitionError: The tool is declared wrongly, or its name is taken.
            UserError: The toolset is registered already.
            RuntimeError: A toolset registered on a started or closed registry.
        """
        if isinstance(tool, Toolset):
            if self._state is not _State.NEW:
                raise RuntimeError(f"Cannot register toolset {tool.name!r} on a {self._state.value} ToolRegistry")
            if any(known is tool for known in self._toolsets):
                raise UserError(f"toolset {tool.name!r} is registered already")
            self._toolsets.append(tool)
            return tool
        built = as_tool(tool)
        if built.name in self._tools:
            raise ToolDefinitionError(
                f"tool name {built.name!r} is already registered (by {self._tools[built.name].source})"
            )
        self._tools[built.name] = built
        return built

    @property
    def toolsets(self) -> tuple[Toolset, ...]:
        """The toolsets registered, in order."""
        return tuple(self._toolsets)

    def add_tool(self, tool: Tool, owner: Toolset) -> bool:
        """Add a toolset's tool (``ToolsetHost``); a taken name stays its first owner's (logged)."""
        known = self._tools.get(tool.name)
        if known is not None and self._owners.get(tool.name) is not owner:
            logger.warning(
                "tool %r of toolset %r is not added: the name is taken (by %s)", tool.name, owner.name, known.source
            )
            return False
        self._tools[tool.name] = tool
        self._owners[tool.name] = owner
        return True

    def remove_tool(self, name: str, owner: Toolset) -> None:
        """Retire a tool ``owner`` added (``ToolsetHost``); other tools are left alone."""
        if self._owners.get(name) is owner:
            del self._owners[name]
            self._tools.pop(name, None)

    async def start(self) -> None:
        """Start every registered toolset at once; returns when each has settled its first attempt.

        A toolset whose source is down does not fail the start: its tools join once it connects.
        Calling it again is a no-op.

        Raises:
            RuntimeError: The registry was closed.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot start a closed ToolRegistry")
        if self._state is _State.STARTED:
            return
        self._state = _State.STARTED
        async with asyncio.TaskGroup() as group:
            for toolset in self._toolsets:
                group.create_task(toolset.start(self), name=f"agora-toolset-{toolset.name}")

    async def aclose(self) -> None:
        """Close every toolset (their tools retire); idempotent."""
        if self._state is _State.CLOSED:
            return
        started, self._state = self._state is _State.STARTED, _State.CLOSED
        if started:
            async with asyncio.TaskGroup() as group:
                for toolset in self._toolsets:
                    group.create_task(toolset.aclose())

    def get(self, name: str) -> Tool | None:
        """The tool of that name, ungated, or ``None``."""
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    # -- gates --------------------------------------------------------------------------------------

    async def _gate(self, tool: Tool, scope: DescribeScope, agent: AgentScope | None) -> _Gate | ToolDescription:
        name = tool.name
        if agent is not None and agent.tools != "*" and name not in agent.tools:
            return _Gate(ToolNotFoundError, f"Tool {name!r} is not available to agent {agent.name!r}")
        try:
            # Hooks are mostly sync: call them directly and await only what is awaitable (a
            # coroutine per hook per tool per turn adds up).
            enabled: Any = tool.enabled() if callable(tool.enabled) else tool.enabled
            if inspect.isawaitable(enabled):
                enabled = await enabled
            if enabled and tool.is_enabled is not None:
                enabled = await _settle(tool.is_enabled())
            if not enabled:
                return _Gate(ToolDisabledError, f"Tool {name!r} is disabled")
            if not await _settle(self.roles_policy.allows(scope.actor, tool)):
                return _Gate(ToolForbiddenError, f"Actor may not use tool {name!r}")
            if tool.can_use is not None and not await _settle(tool.can_use(scope.actor)):
                return _Gate(ToolForbiddenError, f"Actor may not use tool {name!r}")
            description = _OPEN if tool.describe is None else await self._describe(tool, scope)
        except Exception:
            # A gate that errors fails closed: the tool is hidden, and a call is refused.
            logger.exception("gate of tool %r raised; the tool is withheld", name)
            return _Gate(ToolForbiddenError, f"Tool {name!r} could not be authorized")
        if not description.available:
            return _Gate(ToolNotFoundError, f"Tool {name!r} is not available")
        return description

    @staticmethod
    async def _describe(tool: Tool, scope: DescribeScope) -> ToolDescription:
        if tool.describe is None:
            return ToolDescription()
        described = await call_hook(tool.describe, scope)
        if described is None:
            return ToolDescription()
        if isinstance(described, ToolDescription):
            return described
        if isinstance(described, Mapping):
            try:
                return ToolDescription.model_validate(described)
            except ValidationError as exc:
                raise ToolDefinitionError(f"tool {tool.name!r}: describe() returned {exc}") from None
        raise ToolDefinitionError(f"tool {tool.name!r}: describe() must return a ToolDescription, dict or None")

    async def _offered(
        self, actor: Actor, agent: AgentScope | None, scope: DescribeScope
    ) -> list[tuple[Tool, ToolDescription]]:
        # One tool after the other: gates are cheap, and a task per tool per turn is not.
        offered = []
        for tool in list(self._tools.values()):
            verdict = await self._gate(tool, scope, agent)
            if isinstance(verdict, ToolDescription):
                offered.append((tool, verdict))
        return offered

    async def definitions_for(
        self,
        actor: Actor,
        agent: AgentScope | None = None,
        ui_capabilities: UiCapabilities | None = None,
        *,
        thread_id: str | None = None,
    ) -> list[ToolDefinition]:
        """The tools offered to the model for this actor and agent, with their JSON schemas."""
        _check_actor(actor, "definitions_for()")
        scope = _scope(actor, agent, ui_capabilities, thread_id)
        return [
            ToolDefinition(
                name=tool.name,
                description=described.description or tool.description,
                # A copy: callers (model adapters) may rewrite the schema; the tool's stays intact.
                parameters=copy.deepcopy(described.input_schema)
                if described.input_schema
                else json.loads(tool.parameters_json),
                kind=tool.kind,
            )
            for tool, described in await self._offered(actor, agent, scope)
        ]

    async def catalog_for(
        self,
        actor: Actor,
        agent: AgentScope | None = None,
        ui_capabilities: UiCapabilities | None = None,
        *,
        thread_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """``[{name, kind, presentation}]`` for the same tools ``definitions_for`` offers.

        ``describe`` sees the same scope as there, so given the same arguments both lists agree.
        """
        _check_actor(actor, "catalog_for()")
        scope = _scope(actor, agent, ui_capabilities, thread_id)
        return [
            {
                "name": tool.name,
                "kind": tool.kind,
                "presentation": tool.presentation.model_dump(mode="json", exclude_none=True)
                if tool.presentation is not None
                else None,
            }
            for tool, _ in await self._offered(actor, agent, scope)
        ]

    async def check(self, name: str, ctx: ToolContext, agent: AgentScope | None = None) -> Tool:
        """Run every gate for one call and return the tool.

        Raises:
            ToolNotFoundError: Unknown, outside the agent's allow-list, or hidden by ``describe``.
            ToolDisabledError: Switched off.
            ToolForbiddenError: Refused by the roles policy or ``can_use``.
        """
        if not isinstance(ctx, ToolContext):
            raise UserError(f"ctx must be a ToolContext, not {type(ctx).__name__}")
        _check_actor(ctx.actor, "ctx")
        _check_agent(agent)
        tool = self._tools.get(name)
        if tool is None:
            raise ToolNotFoundError(f"No tool named {name!r}", tool=name)
        scope = DescribeScope(
            actor=ctx.actor,
            thread_id=ctx.thread_id or None,
            agent_name=agent.name if agent is not None else ctx.agent_name,
            ui_capabilities=ctx.ui_capabilities,
        )
        verdict = await self._gate(tool, scope, agent)
        if isinstance(verdict, _Gate):
            raise verdict.error(verdict.message, tool=name)
        return tool

    # -- one call -----------------------------------------------------------------------------------

    @staticmethod
    async def preflight(
        tool: Tool, input: BaseModel, ctx: ToolContext, phase: PreflightPhase
    ) -> PreflightReady | PreflightDenied | PreflightCompleted:
        """Run an action's preflight for ``phase``; a tool without one is ready."""
        if tool.preflight is None:
            return PreflightReady()
        return as_preflight_result(await call_hook(tool.preflight, input, ctx, phase))

    async def execute(self, tool: Tool, input: BaseModel, ctx: ToolContext) -> Any:
        """Run ``execute`` under the tool's timeout, retrying transient failures (no gates).

        Raises:
            ToolTimeoutError: The call ran past ``tool.timeout``.
        """

        async def once() -> Any:
            return await tool.execute(input, ctx)

        retry = self.transient_retry
        if retry is not None and tool.kind == "action":
            retry = dataclasses.replace(retry, classify=retry.classify_action)
        if tool.timeout is None:
            return await call_with_transient_retry(once, retry)

        # The scope turns its own cancellation into TimeoutError in __aexit__, so the expiry can
        # only be seen outside the ``async with``; a TimeoutError the tool raises itself passes.
        scope = asyncio.timeout(tool.timeout)
        try:
            async with scope:
                return await call_with_transient_retry(once, retry)
        except TimeoutError:
            if scope.expired():
                raise ToolTimeoutError(
                    f"Tool {tool.name!r} timed out after {tool.timeout:g} s", tool=tool.name
                ) from None
            raise

    @staticmethod
    async def present(tool: Tool, output: Any, ctx: ToolContext) -> list[UiComponent]:
        """Run the tool's ``present(output, ctx)`` and normalize it to a list of components."""
        if tool.present is None:
            return []
        shown = await call_hook(tool.present, output, ctx)
        if shown is None:
            return []
        items = shown if isinstance(shown, list | tuple) else [shown]
        return [item if isinstance(item, UiComponent) else UiComponent.model_validate(item) for item in items]

    async def invoke(self, name: str, args: Any, ctx: ToolContext, *, agent: AgentScope | None = None) -> Any:
        """Call a tool outside the loop's approval flow: gates, validation, preflight, execute.

        An action's ``execute``-phase preflight still runs (a denial raises ``ToolDeniedError``;
        a completed preflight returns its output). No approval is asked: callers that need one
        use the runtime.

        Raises:
            ToolNotFoundError, ToolDisabledError, ToolForbiddenError: A gate refused.
            ToolInputInvalidError: The arguments are invalid; ``execute`` did not run.
            ToolDeniedError: The preflight refused.
            ToolTimeoutError: The call ran too long.
        """
        tool = await self.check(name, ctx, agent)
        validated = tool.validate_input(args)
        if tool.kind == "action":
            verdict = await self.preflight(tool, validated, ctx, "execute")
            if isinstance(verdict, PreflightDenied):
                raise ToolDeniedError(verdict.reason, tool=name)
            if isinstance(verdict, PreflightCompleted):
                return verdict.output
        return await self.execute(tool, validated, ctx)
