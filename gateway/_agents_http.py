"""``GET /agent/agents``: the agents (and their personas) the caller may talk to.

Answers ``{agents: [{name, description, default, default_persona, personas: [{id, label,
description, aliases}]}]}``, the runtime's default agent first when the caller may use it. The
caller is taken as on every ``/agent`` route (a signed token, else the anonymous cookie; 401
without either); an agent whose ``roles`` the caller lacks is left out, as every channel calls
it unknown (404). The answer is JSON and never cached: it depends on who asks.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ._agents import Agent, Persona
from ._services import SERVICES

__all__ = ["add_agent_routes", "describe_agent"]


def _persona(persona: Persona) -> dict[str, Any]:
    return {
        "id": persona.id,
        "label": persona.label,
        "description": persona.description,
        "aliases": list(persona.aliases),
    }


def describe_agent(agent: Agent, *, default: bool) -> dict[str, Any]:
    """An agent as ``GET /agent/agents`` lists it (never its instructions or tools)."""
    default_persona = agent.persona(agent.default_persona)  # an alias is listed as its persona's id
    return {
        "name": agent.name,
        "description": agent.description,
        "default": default,
        "default_persona": default_persona.id if default_persona is not None else None,
        "personas": [_persona(p) for p in agent.personas],
    }


async def list_agents(request: web.Request) -> web.Response:
    """``GET /agent/agents``: the agents the caller may use, with their personas."""
    services = request.app[SERVICES]
    actor = await services.resolve_actor(request)
    runtime = services.runtime
    default = runtime.default_agent.name
    agents = sorted(runtime.usable_agents(actor), key=lambda agent: agent.name != default)
    body = {"agents": [describe_agent(agent, default=agent.name == default) for agent in agents]}
    return web.json_response(body, headers={"Cache-Control": "no-store"})


def add_agent_routes(app: web.Application) -> None:
    """Mount ``GET /agent/agents`` on ``app``."""
    app.router.add_get("/agent/agents", list_agents)
