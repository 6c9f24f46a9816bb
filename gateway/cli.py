"""The ``agora-gateway`` command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from aiohttp import web


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def _build_app() -> web.Application:
    app = web.Application()
    app.router.add_get("/healthz", _healthz)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="agora-gateway", description="A gateway between AI agents and people.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print(f"agora-gateway listening on http://{args.host}:{args.port}/", flush=True)
    web.run_app(_build_app(), host=args.host, port=args.port, print=None)
    return 0
