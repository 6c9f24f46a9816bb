"""A small MCP server for the McpToolset tests, built with the ``mcp`` package's FastMCP.

``python server.py`` serves stdio; ``python server.py http PORT`` serves Streamable HTTP on
127.0.0.1:PORT at ``/mcp``. Its tools cover what the client must handle: a read tool, a write
tool (no ``readOnlyHint``), one that echoes its request's ``_meta``, one that hangs, one that
crashes the process, a huge result, a remote error, an image, a tool that adds (or removes) a
tool and notifies ``list_changed``, and two tools whose schemas are broken on purpose.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from typing import Any

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.utilities.types import Image
from mcp.types import ToolAnnotations

READ = ToolAnnotations(readOnlyHint=True)
# A 1x1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = FastMCP(
    "test-server", host="127.0.0.1", port=int(sys.argv[2]) if len(sys.argv) > 2 else 8000, log_level="WARNING"
)
notes: list[str] = []


@server.tool(title="City lookup", annotations=READ, description="Facts about a city.")
def lookup(city: str) -> dict[str, Any]:
    return {"city": city, "population": len(city) * 1000}


@server.tool(title="Write a note", description="Store a note.")
def write_note(text: str) -> str:
    notes.append(text)
    return f"stored note {len(notes)}: {text}"


@server.tool(annotations=READ, description="The notes stored so far.")
def list_notes() -> str:
    return "\n".join(notes) or "(none)"


@server.tool(annotations=READ, description="Echo this request's _meta.")
def echo_meta(ctx: Context) -> dict[str, Any]:
    meta = ctx.request_context.meta
    return {"meta": meta.model_dump(mode="json", by_alias=True, exclude_none=True) if meta else None}


@server.tool(annotations=READ, description="Sleep, then answer.")
async def hang(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "woke"


@server.tool(annotations=READ, description="Exit the process in the middle of the call.")
def crash() -> str:
    os._exit(3)


@server.tool(annotations=READ, description="The server's process id.")
def pid() -> str:
    return str(os.getpid())


@server.tool(annotations=READ, description="A long text.")
def huge(chars: int) -> str:
    return "x" * chars


@server.tool(annotations=READ, description="Always fails.")
def broken() -> str:
    raise ValueError("the database is on fire")


@server.tool(annotations=READ, description="A picture.")
def picture() -> Image:
    return Image(data=PIXEL, format="png")


@server.tool(annotations=READ, description="Bounded count.")
def count(n: int, label: str = "items") -> str:
    return f"{n} {label}"


def added() -> str:
    return "I am new"


@server.tool(description="Add the tool 'added' (or remove it when present) and notify.", annotations=READ)
async def toggle(ctx: Context) -> str:
    if server._tool_manager.get_tool("added") is None:
        server.add_tool(added, annotations=READ, description="A tool added at run time.")
        state = "added"
    else:
        server.remove_tool("added")
        state = "removed"
    await ctx.session.send_tool_list_changed()
    return state


@server.tool(description="Its schema is made invalid below.")
def bad_schema(x: int) -> str:
    return "never"


@server.tool(description="Its schema is made a non-object below.")
def not_object(x: int) -> str:
    return "never"


server._tool_manager.get_tool("bad_schema").parameters = {"type": "object", "properties": {"x": {"type": 12}}}
server._tool_manager.get_tool("not_object").parameters = {"type": "string"}
# A minimum the model's arguments must respect, checked by the client before the call.
server._tool_manager.get_tool("count").parameters["properties"]["n"]["minimum"] = 0

if __name__ == "__main__":
    server.run("streamable-http" if len(sys.argv) > 1 and sys.argv[1] == "http" else "stdio")
