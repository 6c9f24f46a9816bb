"""``python -m renderers preview COMPONENT props.json --format png -o out.png``: render one component."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._catalog import Catalog
from ._components import default_catalog
from ._errors import RenderError
from ._rendered import RENDER_FORMATS, Rendered, RenderFormat
from ._renderer import Renderer

__all__ = ["main"]

_EXTENSIONS = {"html": ".html", "png": ".png", "pdf": ".pdf", "text": ".txt"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m renderers", description="Render catalog components.")
    commands = parser.add_subparsers(dest="command", required=True)
    preview = commands.add_parser(
        "preview",
        help="render one component from a JSON props file",
        description="Render COMPONENT with the props in PROPS (a JSON file, or - for stdin).",
    )
    preview.add_argument("component", help="catalog name, e.g. DataTable")
    preview.add_argument("props", help="JSON file with the props, or - to read stdin")
    preview.add_argument("--format", "-f", choices=RENDER_FORMATS, default="png", help="output format (default png)")
    preview.add_argument(
        "--output", "-o", type=Path, help="file to write; default COMPONENT.<ext>, or stdout for html and text"
    )
    preview.add_argument("--version", type=int, default=None, help="component version (default the catalog's)")
    preview.add_argument("--catalog", help="your catalog as module:attribute (a Catalog, or a function returning one)")
    preview.add_argument(
        "--fragment", action="store_true", help="html: write the bare fragment, not a page with the stylesheet"
    )
    preview.add_argument("--timeout", type=float, default=30.0, help="seconds a png/pdf render may take")
    preview.add_argument(
        "--assets", type=Path, help="png/pdf: the folder /assets/... URLs read from (your app's static_dir)"
    )
    commands.add_parser("list", help="list the components of the catalog").add_argument("--catalog")
    return parser


def _load_catalog(spec: str | None) -> Catalog:
    if not spec:
        return default_catalog()
    module_name, _, attribute = spec.partition(":")
    target: Any = getattr(importlib.import_module(module_name), attribute or "catalog")
    catalog = target() if callable(target) and not isinstance(target, Catalog) else target
    if not isinstance(catalog, Catalog):
        raise SystemExit(f"error: {spec} is not a Catalog")
    return catalog


def _read_props(source: str) -> Any:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


def _standalone(fragment: str, title: str, stylesheet: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>body{{margin:24px auto;max-width:720px;padding:0 16px;"
        f"background:#f1f5f9}}\n{stylesheet}</style></head>\n<body>\n{fragment}\n</body></html>\n"
    )


def _write(rendered: Rendered, args: argparse.Namespace, stylesheet: str) -> list[str]:
    fmt: RenderFormat = args.format
    if isinstance(rendered.data, str):
        text = rendered.data
        if fmt == "html" and not args.fragment:
            text = _standalone(text, args.component, stylesheet)
        if args.output is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            return []
        args.output.write_text(text, encoding="utf-8")
        return [str(args.output)]
    output: Path = args.output or Path(args.component + _EXTENSIONS[fmt])
    written = []
    for index, page in enumerate(rendered.pages or (rendered.data,), start=1):
        path = output if index == 1 else output.with_name(f"{output.stem}-{index}{output.suffix}")
        path.write_bytes(page)
        written.append(str(path))
    return written


async def _preview(args: argparse.Namespace) -> int:
    catalog = _load_catalog(args.catalog)
    try:
        props = _read_props(args.props)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"error: cannot read props: {exc}", file=sys.stderr)
        return 2
    if args.assets is not None and not args.assets.is_dir():
        print(f"error: --assets {args.assets}: not a folder", file=sys.stderr)
        return 2
    async with Renderer(catalog, cache=None, timeout=args.timeout, assets_dir=args.assets) as renderer:
        try:
            rendered = await renderer.render(args.component, props, args.format, version=args.version)
        except RenderError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2 if exc.code in ("props_invalid", "unknown_component") else 1
    for path in _write(rendered, args, renderer.stylesheet):
        print(path, file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 render failed, 2 bad input)."""
    args = _parser().parse_args(argv)
    if args.command == "list":
        for definition in _load_catalog(args.catalog):
            print(f"{definition.name}@{definition.version}  {definition.description}")
        return 0
    return asyncio.run(_preview(args))
