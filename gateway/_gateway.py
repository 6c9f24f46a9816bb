"""``Gateway``: an app in one declarative object, and ``Branding``: how it presents itself."""

from __future__ import annotations

import copy
import json
import logging
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from renderers import Catalog
from tools import Tool, ToolDefinitionError, ToolLike, Toolset, UserError, as_tool, discover_tools

from ._agents import Agent
from ._approvals import ApprovalPolicy
from ._pricing import ModelPrice, Pricing
from ._settings import Settings

if TYPE_CHECKING:
    from aiohttp import web

    from ._channel import Channel
    from ._identity import ActorResolver
    from ._runtime import Runtime
    from .models import Model

__all__ = ["APP_INSTRUCTIONS", "Branding", "Gateway"]

logger = logging.getLogger("gateway.app")

APP_INSTRUCTIONS = (
    "You are a helpful assistant. Use the tools to look things up instead of guessing. Actions wait for the "
    "person's approval: call the tool and let the approval card speak for itself. Keep answers short."
)
"""The instructions of the agent a ``Gateway`` makes when it is given none."""

# A colour CSS understands, in a form that cannot break out of an attribute or a declaration:
# #rgb[a] / #rrggbb[aa], a named colour, or a colour function of numbers, units and separators.
_COLOUR = re.compile(
    r"^(#[0-9a-fA-F]{3,4}|#[0-9a-fA-F]{6}|#[0-9a-fA-F]{8}|[a-zA-Z]{3,20}"
    r"|(rgb|rgba|hsl|hsla|oklch|oklab|lab|lch)\([0-9a-zA-Z.,%/ +-]{1,60}\))$"
)
_MAX_PROMPTS = 8


def _prompts(value: Any) -> Any:
    """``AGORA_BRAND_PROMPTS``: a JSON list, or prompts separated by ``|``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except RecursionError:  # nested past the parser's depth: a ValueError is what pydantic reports
                raise ValueError("is nested too deeply: give a JSON list of strings") from None
        return [item.strip() for item in text.split("|") if item.strip()]
    return value


class Branding(BaseSettings):
    """How an app presents itself: on the widget, its pages (``GET /``, ``GET /chat``) and the A2A card.

    Every field may come from the app (``Branding(name="Acme support")``) or from
    ``AGORA_BRAND_<FIELD>``; what the app gives wins.
    """

    model_config = SettingsConfigDict(env_prefix="AGORA_BRAND_", env_file=".env", extra="ignore")

    name: str = Field(default="Assistant", min_length=1, max_length=80)
    """The assistant's name: the widget's title and the A2A card's name."""
    title: str | None = Field(default=None, max_length=120)
    """The page title (the browser tab); ``name`` when unset."""
    description: str = Field(default="", max_length=300)
    """One line about the assistant: the page's description and the A2A card's (the default
    agent's description when empty)."""
    welcome: str = Field(default="Hi! How can I help?", max_length=500)
    """What the chat says before the first message."""
    prompts: Annotated[list[Annotated[str, Field(min_length=1, max_length=120)]], NoDecode] = Field(
        default_factory=list, max_length=_MAX_PROMPTS
    )
    """Example prompts offered before the first message (``AGORA_BRAND_PROMPTS``: a JSON list or
    ``a|b|c``)."""
    accent: str | None = None
    """The accent colour, as CSS (``#0f766e``, ``teal``, ``oklch(55% 0.1 180)``)."""
    logo_url: str | None = Field(default=None, max_length=2000)
    """A logo for the chat's header: an ``https://`` URL or a path on this gateway (``/assets/logo.svg``)."""

    _prompts = field_validator("prompts", mode="before")(_prompts)

    @field_validator("name", "title", "description", "welcome", "prompts")
    @classmethod
    def _printable(cls, value: Any, info: ValidationInfo) -> Any:
        # Control characters (an escape sequence, NUL, a new line in a name) have no place in a
        # page title or an A2A card, and a terminal that prints the card would obey them. The
        # longer texts may break lines.
        allowed = "\n" if info.field_name in ("description", "welcome") else ""
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and any(unicodedata.category(ch) == "Cc" and ch not in allowed for ch in text):
                raise ValueError("must not contain control characters")
        return value

    @field_validator("accent")
    @classmethod
    def _a_colour(cls, value: str | None) -> str | None:
        if value is not None and not _COLOUR.match(value.strip()):
            raise ValueError("must be a CSS colour such as #0f766e, teal or rgb(15 118 110)")
        return value.strip() if value is not None else None

    @field_validator("logo_url")
    @classmethod
    def _a_link(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.strip()
        if not (text.startswith(("https://", "http://")) or (text.startswith("/") and not text.startswith("//"))):
            raise ValueError("must be an http(s) URL or a path on this gateway starting with /")
        if any(ch.isspace() or ch in "\"'<>\\" or ord(ch) < 32 for ch in text):
            raise ValueError("must be a URL without spaces, quotes or angle brackets")
        return text

    @property
    def page_title(self) -> str:
        """The browser tab's title."""
        return self.title or self.name


ToolsSpec = str | Path | Sequence[ToolLike | Toolset | str | Path]
"""What ``Gateway(tools=...)`` takes: tools, toolsets (``McpToolset``), or folders / packages of
tools to discover, or a mix."""


class Gateway:
    """An app: its tools, agents, model, components, channels, identity, approvals and branding.

    Serve one with ``agora-gateway serve --app pkg.module:gateway`` (or ``AGORA_APP``), or build
    its parts yourself with ``create_app()`` and ``runtime()``::

        gateway = Gateway(
            tools="my_shop.tools",
            agents=[Agent(name="support", instructions="You help the customers of Acme.")],
            model="openai:gpt-4o-mini",
            branding=Branding(name="Acme support", accent="#0f766e"),
        )

    Nothing of the demo is served: no demo tools, prompt, page texts or agent card.
    """

    def __init__(
        self,
        *,
        tools: ToolsSpec = (),
        agents: Sequence[Agent] | None = None,
        model: Model | str | None = None,
        catalog: Catalog | None = None,
        channels: Sequence[Channel] | None = None,
        identity: ActorResolver | Sequence[ActorResolver] | None = None,
        approval_policy: ApprovalPolicy | None = None,
        branding: Branding | None = None,
        static_dir: str | Path | None = None,
        pricing: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        """Declare an app.

        Args:
            tools: Tool objects or classes, toolsets (``McpToolset``: a remote MCP server's tools,
                connected when the runtime starts), folders or dotted packages to discover tools
                in (an import error there refuses the start), or a mix. Names must be unique.
            agents: The agents served; the first is the default. One ``assistant`` agent with
                ``APP_INSTRUCTIONS`` when omitted.
            model: A ``Model``, or ``"demo"`` / ``"openai:<model>"`` / ``"anthropic:<model>"``;
                ``AGORA_MODEL`` when omitted.
                ``--model`` / ``AGORA_MODEL`` set explicitly override it.
            catalog: The components tools may show (``default_catalog()`` when omitted); extend
                it with your own: ``default_catalog().extend([ComponentDef(...)])``.
            channels: The channels to serve; the configured defaults (web, AG-UI, A2A, and
                WhatsApp / Telegram when their settings are set) when omitted.
            identity: Who callers are: a resolver or several, tried in order (signed actor
                tokens, trusted headers and anonymous cookies from the settings when omitted).
            approval_policy: Who approves actions and for how long (the requester, 24 h).
            branding: Name, texts, colour and logo (``Branding()`` reads ``AGORA_BRAND_*``).
            static_dir: A folder served at ``/assets/`` (logos, product images). Components
                show its files by that path (``<img src="/assets/product.png">``): browsers load
                them from the gateway, PNG and PDF renders read them from this folder on disk.
            pricing: Model prices by ``Model.name`` (``{"openai:gpt-4o": ModelPrice(2.5, 10)}``),
                giving each run's ``cost_usd``; ``AGORA_PRICING`` when omitted, none by default.

        Raises:
            UserError: A malformed declaration (an agent that is not an ``Agent``, a missing
                ``static_dir``...).
        """
        if isinstance(tools, str | Path):
            tools = [tools]
        self.tools: tuple[ToolLike | Toolset | str | Path, ...] = tuple(tools)
        self.agents: tuple[Agent, ...] = tuple(agents) if agents else ()
        for agent in self.agents:
            if not isinstance(agent, Agent):
                raise UserError(f"Gateway(agents=...): {agent!r} is not an Agent")
        if model is not None and not isinstance(model, str) and not hasattr(model, "stream"):
            raise UserError(f"Gateway(model=...): {model!r} is neither a Model nor a model name")
        self.model = model
        if catalog is not None and not isinstance(catalog, Catalog):
            raise UserError(f"Gateway(catalog=...): {catalog!r} is not a renderers.Catalog")
        self.catalog = catalog
        self.channels: tuple[Channel, ...] | None = tuple(channels) if channels is not None else None
        if identity is not None and not isinstance(identity, Sequence):
            identity = [identity]
        self.identity: tuple[ActorResolver, ...] | None = tuple(identity) if identity is not None else None
        self.approval_policy = approval_policy
        if branding is not None and not isinstance(branding, Branding):
            raise UserError(f"Gateway(branding=...): {branding!r} is not a Branding")
        self.branding = branding
        self.static_dir = Path(static_dir).resolve() if static_dir is not None else None
        if self.static_dir is not None and not self.static_dir.is_dir():
            raise UserError(f"Gateway(static_dir=...): {str(static_dir)!r} is not a folder")
        self.pricing = Pricing(pricing).table if pricing is not None else None
        """Prices by model name (``None``: ``AGORA_PRICING``)."""
        self.demo = False
        """Whether this is (or includes) the offline demo: its page, texts and card."""
        self.source = "app"
        """What the start-up line names this app by (``demo`` or its import path)."""
        self._tool_factories: list[Callable[[bytes], list[Tool]]] = []

    def _variant(
        self,
        source: str,
        *,
        tools: Sequence[str | Path] = (),
        demo: Callable[[bytes], list[Tool]] | None = None,
        branding: Branding | None = None,
    ) -> Gateway:
        """A copy of this app to serve as ``source``, the app itself left as declared.

        ``tools`` (folders or packages) join its tools; ``demo`` makes its tools beside them (the
        app's win a name) and marks the copy as the demo, with ``branding`` if the app has none.
        """
        other = copy.copy(self)
        other.source = source
        other.tools = (*self.tools, *tools)
        other._tool_factories = [*self._tool_factories, *([demo] if demo is not None else [])]
        if demo is not None:
            other.demo = True
            other.branding = self.branding if self.branding is not None else branding
        return other

    # -- what it serves --------------------------------------------------------------------------

    def resolved_branding(self) -> Branding:
        """The branding served: the app's, else ``Branding()`` from ``AGORA_BRAND_*``."""
        return self.branding if self.branding is not None else Branding()

    def resolve_tools(self, secret: bytes) -> list[Tool | Toolset]:
        """Every tool this app serves, in order, and its toolsets; ``secret`` signs confirm tokens (the demo's).

        A toolset's tools are found when the runtime starts; a name they share with a tool here
        stays this tool's (logged then).

        Raises:
            UserError: A folder or package whose modules failed to import (each logged), or
                two tools of one name.
        """
        found: list[Tool] = []
        toolsets: list[Toolset] = []
        for spec in self.tools:
            if isinstance(spec, Toolset):
                toolsets.append(spec)
            elif isinstance(spec, str | Path):
                try:
                    found.extend(discover_tools(spec, strict=True))
                except ToolDefinitionError as exc:
                    raise UserError(f"tools {str(spec)!r}: {exc}") from None
            else:
                found.append(as_tool(spec))
        names: dict[str, Tool] = {}
        for tool in found:
            if tool.name in names:
                raise UserError(f"two tools are named {tool.name!r} ({names[tool.name].source} and {tool.source})")
            names[tool.name] = tool
        for factory in self._tool_factories:
            for tool in factory(secret):
                if tool.name in names:  # the app's own tool of that name wins over the demo's
                    logger.warning("demo tool %r is shadowed by the app's tool of that name", tool.name)
                    continue
                names[tool.name] = tool
                found.append(tool)
        return [*found, *toolsets]

    def resolved_agents(self) -> list[Agent]:
        """The agents served (one ``assistant`` with ``APP_INSTRUCTIONS`` when none were declared)."""
        if self.agents:
            return list(self.agents)
        return [Agent(name="assistant", instructions=APP_INSTRUCTIONS)]

    def resolved_model(self, settings: Settings) -> Model:
        """The model: ``--model`` / ``AGORA_MODEL`` when set explicitly, else the app's, else the demo model.

        Raises:
            UserError: An unknown model name.
        """
        from .app import build_model

        if "model" in settings.model_fields_set or self.model is None:
            return build_model(settings.model)
        if isinstance(self.model, str):
            return build_model(self.model, where="Gateway(model)")
        return self.model

    # -- building ----------------------------------------------------------------------------------

    def runtime(self, settings: Settings | None = None) -> Runtime:
        """A runtime of this app's tools, agents and model, on the store ``settings`` names.

        It is yours to ``start()`` and ``aclose()``; ``aclose()`` closes the store it built too.

        Raises:
            StoreUnavailableError: The folder of a SQLite store's file cannot be created.
        """
        from ._guard_builtins import guards_from_settings
        from ._runtime import Runtime
        from .app import build_store

        settings = settings or Settings()
        return Runtime(
            tools=self.resolve_tools(settings.secret_bytes()),
            agents=guards_from_settings(self.resolved_agents(), settings),
            model=self.resolved_model(settings),
            store=build_store(settings),
            owns_store=True,
            approval_policy=self.approval_policy,
            lease_ttl=settings.lease_ttl,
            retention_days=settings.retention_days,
            pricing=self.pricing if self.pricing is not None else settings.pricing,
            quota=settings.default_quota(),
        )

    def create_app(self, settings: Settings | None = None) -> web.Application:
        """The ``aiohttp`` application serving this app (it owns and closes its runtime)."""
        from .app import assemble

        return assemble(settings or Settings(), self)

    def tool_names(self, runtime: Runtime) -> dict[str, list[str]]:
        """The names of the tools each agent of ``runtime`` may offer, by agent (for the start-up line)."""
        everything = [tool.name for tool in runtime.registry]
        return {
            name: (everything if agent.tools == "*" else [t for t in everything if t in agent.tools])
            for name, agent in runtime.agents.items()
        }
