"""``CodeBlock``: source text, escaped, in a monospace block."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from renderers._catalog import MediaKind
from renderers._props import ComponentProps
from renderers._textform import bold

__all__ = ["LONG_CODE_LINES", "CodeBlockProps", "code_context", "code_media", "code_text"]

LONG_CODE_LINES = 60
"""More lines than this read better as a PDF than as images."""

WIDE_CODE_COLUMNS = 48
"""Lines longer than this do not fit a phone-width image: the code gets a wider page."""


class CodeBlockProps(ComponentProps):
    """Props of ``CodeBlock``: ``{code, language?}`` (and an optional ``title``, e.g. a file name)."""

    code: str = Field(max_length=100_000)
    language: str | None = Field(default=None, max_length=30, pattern=r"^[A-Za-z0-9_+#.\- ]*$")
    title: str | None = Field(default=None, max_length=300)


def code_context(props: CodeBlockProps) -> dict[str, Any]:
    """Template variables of ``CodeBlock``.

    The code without trailing blank lines, its line count, and whether its lines need a wider
    image page.
    """
    code = props.code.rstrip("\n").expandtabs(4)
    lines = code.split("\n")
    return {"code": code, "lines": len(lines), "wide": max(len(line) for line in lines) > WIDE_CODE_COLUMNS}


def code_text(props: CodeBlockProps) -> str:
    """Text form of ``CodeBlock``: the code in a fenced block (monospace in WhatsApp)."""
    head = f"{bold(props.title)}\n" if props.title else ""
    body = props.code.rstrip("\n").replace("```", "`\u200b``")
    return f"{head}```\n{body}\n```"


def code_media(props: CodeBlockProps | None) -> MediaKind:
    """Long code reads better as a PDF."""
    return "pdf" if props is not None and props.code.count("\n") >= LONG_CODE_LINES else "image"
