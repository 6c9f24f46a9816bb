"""The agent card: who we are, where to call us, how to authenticate, and the skills on offer."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from aiohttp import web

from gateway import Agent, ChannelRuntime, ChannelServices, valid_text
from tools import Actor, Tool, humanize_tool_name

__all__ = ["A2AOptions", "build_agent_card", "public_base_url"]

_INPUT_MODES = ["text/plain", "application/json"]
_MEDIA_MODES = ["image/png", "application/pdf"]


def _gateway_version() -> str:
    try:
        return importlib.metadata.version("agora-gateway")
    except importlib.metadata.PackageNotFoundError:
        return "0.1.0"


@dataclass(frozen=True, kw_only=True)
class A2AOptions:
    """How the A2A channel presents itself and behaves."""

    path: str = "/a2a"
    """Where JSON-RPC calls go."""
    name: str | None = None
    """The card's name (the app's ``Branding.name`` when ``None``)."""
    description: str | None = None
    """The card's description (the app's ``Branding.description``, else the default agent's, when ``None``)."""
    version: str | None = None
    """The card's version (the gateway's when ``None``)."""
    media: bool = True
    """Offer components as rendered PNG / PDF files to callers that accept them."""
    heartbeat: float = 15.0
    """Seconds between SSE comments on a quiet stream (they also notice a caller that left)."""
    cancel_wait: float = 10.0
    """Seconds ``CancelTask`` waits for a running run to stop before answering."""


def public_base_url(request: web.Request, services: ChannelServices) -> str:
    """The URL callers reach us at: ``public_base_url``, else the request's own origin.

    Header bytes that are not UTF-8 reach us as lone surrogates; they become U+FFFD here, so
    a card built from such a ``Host`` still encodes.
    """
    settings = services.settings
    if settings.public_base_url:
        return settings.public_base_url
    scheme, host = request.scheme, request.host
    if settings.trust_forwarded:
        scheme = request.headers.get("X-Forwarded-Proto", scheme).split(",")[0].strip() or scheme
        host = request.headers.get("X-Forwarded-Host", host).split(",")[0].strip() or host
    return valid_text(f"{scheme}://{host}")


def _open_to_all(tool: Tool) -> bool:
    # The public card lists only what anybody may use; the extended card lists the caller's.
    return tool.enabled is True and not tool.roles and tool.ability is None and tool.can_use is None


def _skill(tool: Tool, agents: list[str]) -> AgentSkill:
    label = tool.presentation.label if tool.presentation is not None and tool.presentation.label else None
    tags = [tool.kind, *(["approval"] if tool.kind == "action" else []), *(f"agent:{a}" for a in agents)]
    return AgentSkill(
        id=tool.name, name=label or humanize_tool_name(tool.name), description=tool.description, tags=tags
    )


async def _skills(runtime: ChannelRuntime, actor: Actor | None) -> list[AgentSkill]:
    offered: dict[str, list[str]] = {}
    # An agent kept for some roles is unknown to everyone else: the public card lists only open ones.
    agents = [a for a in runtime.agents.values() if (a.usable_by(actor) if actor is not None else not a.roles)]
    for agent in agents:
        if actor is not None:
            names = [entry["name"] for entry in await runtime.registry.catalog_for(actor, agent)]
        else:
            names = [t.name for t in runtime.registry if _open_to_all(t) and _allowed(agent, t.name)]
        for name in names:
            offered.setdefault(name, []).append(agent.name)
    skills = [_skill(tool, offered[tool.name]) for tool in runtime.registry if tool.name in offered]
    if skills:
        return skills
    return [
        AgentSkill(id=a.name, name=a.name, description=a.description or f"Talk to {a.name}.", tags=["chat"])
        for a in agents
    ]


def _allowed(agent: Agent, tool: str) -> bool:
    return agent.tools == "*" or tool in agent.tools


async def build_agent_card(
    services: ChannelServices, base_url: str, options: A2AOptions, *, actor: Actor | None = None
) -> AgentCard:
    """The agent card (protocol 1.0, with the 0.3 interface too).

    Args:
        services: The gateway's services.
        base_url: Where callers reach this gateway (``https://chat.example.com``).
        options: The channel's options.
        actor: For the extended card: skills are the tools this actor may use. The public card
            (``None``) lists only tools open to everybody.
    """
    runtime = services.runtime
    default = runtime.default_agent
    url = base_url.rstrip("/") + options.path
    output_modes = [*_INPUT_MODES, *(_MEDIA_MODES if options.media else [])]
    branding = services.branding
    logo = branding.logo_url
    if logo is not None and logo.startswith("/"):
        logo = base_url.rstrip("/") + logo
    return AgentCard(
        name=options.name or branding.name,
        description=options.description
        or branding.description
        or default.description
        or "An agent behind agora-gateway.",
        icon_url=logo,
        version=options.version or _gateway_version(),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=version)
            for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=True),
        security_schemes={
            "bearer": SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="JWT",
                    description="A signed actor token (gateway.sign_actor_token).",
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList()})],
        default_input_modes=_INPUT_MODES,
        default_output_modes=output_modes,
        skills=await _skills(runtime, actor),
    )
