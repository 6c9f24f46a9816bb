"""What the attachment tests of every channel share: files, a tool that reads them, the model's script.

The model is ``openai_model`` (tests/conftest.py): an ``OpenAIModel`` on the ``fake`` server.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel

import tools
from tests.models.fake_openai import FakeOpenAI, finish, role, text, tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(48))
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"

Seen = list[tuple[str, str, int, bytes]]
"""What the photo tool read: ``(name, mime, size, bytes)`` per attachment."""


class _Nothing(BaseModel):
    pass


def photo_tool(seen: Seen) -> type:
    """A read tool that reads every attachment of its turn into ``seen``."""

    @tools.ai_tool(description="Look at the photo the person sent.", input=_Nothing, kind="read")
    class LookAtPhotoTool:
        async def execute(self, input: _Nothing, ctx: tools.ToolContext) -> dict[str, Any]:
            for attached in ctx.attachments:
                seen.append((attached.name, attached.mime, attached.size, await attached.read()))
            return {"files": len(ctx.attachments)}

    return LookAtPhotoTool


def script_photo_run(fake: FakeOpenAI) -> None:
    """The model calls ``look_at_photo``, then answers."""
    fake.script(
        fake.sse(role(), tool(0, id="call_p", name="look_at_photo"), finish("tool_calls")),
        fake.sse(role(), text("A fine photo."), finish()),
    )


def image_part(data: bytes, mime: str) -> dict[str, Any]:
    """The content part an image is to the model."""
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64," + base64.b64encode(data).decode()}}
