"""The ``agora-gateway`` command (also ``python -m gateway``)."""

from __future__ import annotations

import argparse
import gc
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["GC_THRESHOLDS", "main", "tune_gc"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agora-gateway", description="A gateway between AI agents and the people who talk to them."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the gateway",
        description="Run the gateway. Options override AGORA_* environment variables and .env.",
    )
    serve.add_argument("--host", help="interface to listen on (AGORA_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (AGORA_PORT, default 8000)")
    serve.add_argument(
        "--store",
        dest="store_url",
        metavar="URL",
        help="where conversations live (AGORA_STORE_URL): sqlite:///path.db, sqlite:////abs/path.db, "
        "postgresql://..., redis://..., memory://; default sqlite:///.agora/agora.db",
    )
    serve.add_argument("--redis-url", help="a Redis URL: the older name of --store (which wins over it)")
    serve.add_argument(
        "--model", help="'demo' (offline), 'openai:<model>' or 'anthropic:<model>' (AGORA_MODEL, default demo)"
    )
    serve.add_argument(
        "--app", help="your app: pkg.module:attribute naming a gateway.Gateway (AGORA_APP); default: the demo"
    )
    serve.add_argument(
        "--tools", dest="tools_path", help="a folder or package of tools, served without the demo's (AGORA_TOOLS_PATH)"
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        default=None,
        help="serve the offline demo's tools, page and card (also beside --app or --tools)",
    )
    serve.add_argument("--public-base-url", help="the URL people and Twilio reach this gateway at")
    serve.add_argument(
        "--loop",
        choices=["auto", "asyncio", "uvloop"],
        default="auto",
        help="event loop: uvloop when installed (pip install 'agora-gateway[uvloop]'), else asyncio (default auto)",
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING... (default INFO)")
    serve.add_argument(
        "--log-format", choices=["json", "text"], help="json: one object per line (AGORA_LOG_FORMAT, default text)"
    )
    init = commands.add_parser(
        "init",
        help="write a starter app",
        description="Write a starter app (tools, an agent, .env.example) that 'serve --app' runs at once.",
    )
    init.add_argument("directory", nargs="?", default=".", help="where to write it (default: here)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    init.add_argument("--log-level", default="INFO", help=argparse.SUPPRESS)
    return parser


GC_THRESHOLDS = (100_000, 50, 100)
"""Collector thresholds for a serving process (CPython's default is (700, 10, 10)).

A turn allocates thousands of short-lived objects; with the default a busy gateway spends about
a third of its CPU in collections that find little garbage. Raising the first threshold and
freezing what start-up allocated (``gc.freeze``) keeps collections rare and cheap.
"""


def tune_gc() -> None:
    """Apply ``GC_THRESHOLDS`` and move every object alive now out of the collector's way."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _event_loop_name(choice: str) -> str:
    """The loop to serve on: ``uvloop`` roughly doubles web-socket throughput where installed."""
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise ValueError("--loop uvloop: uvloop is not installed (pip install 'agora-gateway[uvloop]')") from None
        return "asyncio"
    return "uvloop"


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from aiohttp import web
    from pydantic import SecretStr

    from ._server import serve_app
    from ._services import SERVICES
    from ._settings import Settings
    from ._store_url import SERVE_DEFAULT, kept_secret, parse_store_url
    from ._tracing_setup import configure_tracing
    from .app import assemble, load_gateway

    configure_tracing()  # only when OTEL_* variables ask for an exporter

    overrides: dict[str, Any] = {
        key: value
        for key, value in {
            "host": args.host,
            "port": args.port,
            # An option beats a variable: --redis-url names the store unless --store does.
            "store_url": args.store_url or args.redis_url,
            "redis_url": args.redis_url,
            "model": args.model,
            "tools_path": args.tools_path,
            "app": args.app,
            "demo": args.demo,
            "public_base_url": args.public_base_url,
        }.items()
        if value is not None
    }
    loop_name = _event_loop_name(args.loop)
    settings = Settings(**overrides)
    if settings.store_url is None and settings.redis_url is None:
        settings.store_url = SERVE_DEFAULT  # conversations and approvals outlive a restart
    location = parse_store_url(settings.resolved_store_url())
    store = location.display()
    if settings.secret is None and location.kind == "sqlite":
        # One process per SQLite file: the secret can live beside it, so sign-ins outlive a restart.
        settings.secret = SecretStr(kept_secret(location))
    gateway = load_gateway(settings)
    app = assemble(settings, gateway)
    runtime = app[SERVICES].runtime
    loop_factory = None
    if loop_name == "uvloop":
        import uvloop

        loop_factory = uvloop.new_event_loop

    async def settle_memory(_: web.Application) -> None:
        tune_gc()

    def announce() -> None:
        # Called once the listening socket is bound: the URL answers from now on.
        public = f", public URL: {settings.public_base_url}/" if settings.public_base_url else ""
        model = runtime.model.name if runtime.model is not None else settings.model
        print(
            f"agora-gateway listening on {settings.listen_url()}/  (app: {gateway.source}, model: {model}, "
            f"store: {store}, loop: {loop_name}{public})",
            flush=True,
        )
        for agent, names in gateway.tool_names(runtime).items():
            count = f"{len(names)} tool" if len(names) == 1 else f"{len(names)} tools"
            print(f"  agent {agent}: {count}: {', '.join(names) or '(none)'}", flush=True)

    app.on_startup.append(settle_memory)
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve_app(app, settings, ready=announce))
    return 0


def _env_prefix(title: str) -> str:
    """The environment prefix of the settings model named ``title`` (``AGORA_`` when unknown)."""
    from pydantic_settings import BaseSettings

    seen: list[type[BaseSettings]] = list(BaseSettings.__subclasses__())
    while seen:
        model = seen.pop()
        if model.__name__ == title:
            return str(model.model_config.get("env_prefix") or "AGORA_").upper()
        seen.extend(model.__subclasses__())
    return "AGORA_"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    level = getattr(logging, str(args.log_level).upper(), logging.INFO)
    from tools import UserError

    from ._logs import configure_logging

    try:
        configure_logging(level, getattr(args, "log_format", None))
    except UserError as exc:
        print(f"agora-gateway: cannot start: {exc}", file=sys.stderr)
        return 2
    if level > logging.DEBUG:
        # twilio's HTTP clients log every request and its headers at INFO, and httpx (the OpenAI
        # client's, "httpx2" in newer SDKs) every model call with its URL: only --log-level DEBUG shows them.
        for name in ("twilio.http_client", "twilio.async_http_client", "httpx", "httpx2"):
            logging.getLogger(name).setLevel(logging.WARNING)
    if args.command == "init":
        from ._starter import write_starter

        try:
            written = write_starter(args.directory, force=args.force)
        except (FileExistsError, OSError) as exc:
            print(f"agora-gateway init: {exc}", file=sys.stderr)
            return 2
        for path in written:
            print(f"wrote {path}")
        cd = "" if Path(args.directory) == Path() else f"cd {shlex.quote(args.directory)} && "
        print(f"\nNext: {cd}cp .env.example .env && agora-gateway serve --app starter_app:gateway", flush=True)
        return 0
    if args.command == "serve":
        from pydantic import ValidationError

        from tools import AgoraError

        from ._errors import StoreUnavailableError

        try:
            return _serve(args)
        except ValidationError as exc:
            # Each setting by its variable (with its model's own prefix: a channel's options read
            # AGORA_TELEGRAM_*...), without the value given: it may be a secret.
            prefix = _env_prefix(exc.title)
            for error in exc.errors(include_input=False, include_url=False):
                field = "_".join(str(part) for part in error["loc"]).upper()
                name = field if field.startswith("AGORA_") else prefix + field
                message = str(error["msg"]).removeprefix("Value error, ")
                print(f"agora-gateway: cannot start: {name}: {message}", file=sys.stderr)
            return 2
        except StoreUnavailableError as exc:
            # Down, unreachable, not creatable or of a newer schema: the store's own words, one line.
            logging.getLogger("gateway.cli").debug("start-up failed", exc_info=True)
            reason = " ".join(str(exc).split())
            print(
                f"agora-gateway: cannot start: the store (AGORA_STORE_URL, --store) is unavailable: {reason}",
                file=sys.stderr,
            )
            return 2
        except (AgoraError, OSError, ValueError) as exc:
            # A configuration mistake deserves one clear line, not a traceback (--log-level
            # DEBUG shows the traceback too).
            logging.getLogger("gateway.cli").debug("start-up failed", exc_info=True)
            print(f"agora-gateway: cannot start: {exc}", file=sys.stderr)
            return 2
    return 2  # pragma: no cover - argparse refuses other commands
