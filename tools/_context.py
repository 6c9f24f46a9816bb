"""``ToolContext``: everything a tool knows about the call it serves."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._actor import Actor
from ._ui import UiCapabilities, UiComponent

if TYPE_CHECKING:
    from ._confirm_store import ConfirmTokenStore

__all__ = ["AttachedFile", "ToolContext", "UiSink"]

UiSink = Callable[[UiComponent], None]
"""Receives each component a tool pushes; the runtime turns it into a ``ui`` event."""


@dataclass(kw_only=True, frozen=True)
class AttachedFile:
    """A file the person sent with the turn, as a tool sees it (``ctx.attachments``).

    The bytes stay in the gateway's media store until ``read()`` (they may be megabytes).
    """

    id: str
    """The attachment's id (``att_...``)."""
    name: str
    """The file name the person gave it (may be empty)."""
    mime: str
    """The type its bytes show (``image/png``, ``application/pdf``...), never a client's claim."""
    size: int
    """Bytes."""
    reader: Callable[[], Awaitable[bytes]] = field(repr=False, compare=False)
    """Reads the bytes (the runtime passes its media store's reader)."""

    async def read(self) -> bytes:
        """The file's bytes.

        Raises:
            AgoraError: The file is no longer kept (it expired, or its thread was erased).
        """
        return await self.reader()


@dataclass(kw_only=True)
class ToolContext:
    """The per-call context handed to ``execute`` and every hook.

    Identity comes from ``actor`` only, never from the model's arguments. Outside a run (a test, a
    direct ``ToolRegistry.invoke``) ``emit_ui`` still works: it collects into ``emitted``.
    """

    actor: Actor
    """Who the call acts for."""
    thread_id: str = ""
    """The conversation."""
    run_id: str = ""
    """The run (one turn's work) this call belongs to."""
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    """Correlates logs of one inbound request."""
    tool_call_id: str | None = None
    """The model's id for this call; ``None`` outside a run."""
    agent_name: str | None = None
    """The agent whose turn this is."""
    page_context: dict[str, Any] = field(default_factory=dict)
    """Free-form context the client sent with the turn (page, selection...)."""
    ui_capabilities: UiCapabilities | None = None
    """What the client can draw."""
    channel: str | None = None
    """The channel the turn came from (``web``, ``whatsapp``, ``ag-ui``, ``a2a``), for wording only."""
    attachments: tuple[AttachedFile, ...] = ()
    """The files sent with the turn this call serves (images, PDFs...), in the order sent."""
    confirm_tokens: ConfirmTokenStore | None = None
    """Where confirmed tools claim their single-use tokens; the runtime passes its store's."""
    ui_sink: UiSink | None = None
    """Where ``emit_ui`` pushes; ``None`` collects into ``emitted``."""
    emitted: list[UiComponent] = field(default_factory=list)
    """The components pushed through ``emit_ui`` in this call, in order; a re-pushed id replaces its entry."""
    _ui_counter: int = field(default=0, repr=False)

    @property
    def idempotency_key(self) -> str:
        """``"<run_id>:<tool_call_id>"``: the same on every retry and resume of this call."""
        return f"{self.run_id}:{self.tool_call_id or self.request_id}"

    def emit_ui(
        self,
        component: str,
        props: dict[str, Any],
        *,
        id: str | None = None,
        version: int | None = None,
        fallback_text: str | None = None,
    ) -> str:
        """Push a component to the conversation while the tool runs.

        Args:
            component: Catalog name, e.g. ``"Chart"``.
            props: JSON props; they are copied, so later changes to the dict do not leak.
            id: Pushing an id again replaces that component in place.
            version: The props shape version (1 when omitted).
            fallback_text: Text for channels that cannot draw the component.

        Returns:
            The component's id (``"<tool_call_id>:ui:<n>"`` when not given).

        Raises:
            TypeError: ``props`` is not JSON.
        """
        try:
            snapshot = json.loads(json.dumps(props, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"emit_ui({component!r}) props must be JSON: {exc}") from exc
        if not isinstance(snapshot, dict):
            raise TypeError(f"emit_ui({component!r}) props must be a JSON object")
        if id is None:
            self._ui_counter += 1
            id = f"{self.tool_call_id or 'noop'}:ui:{self._ui_counter}"
        item = UiComponent(
            component=component,
            props=snapshot,
            version=1 if version is None else version,
            id=id,
            fallback_text=fallback_text,
        )
        for index, earlier in enumerate(self.emitted):
            if earlier.id == id:
                self.emitted[index] = item  # the same id replaces in place, as the runtime does
                break
        else:
            self.emitted.append(item)
        if self.ui_sink is not None:
            self.ui_sink(item)
        return id
