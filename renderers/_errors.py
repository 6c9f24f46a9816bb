"""Errors of the renderers.

The tree (``AgoraError`` and ``UserError`` come from ``tools``)::

    AgoraError
    ├── UserError
    │   └── ComponentDefinitionError   a component declared wrongly, or a name twice in a catalog
    ├── RenderError                    a render could not be carried out; nothing was produced
    │   ├── UnknownComponentError      no such component (at that version) in the catalog
    │   ├── PropsInvalidError          props failed validation (``errors`` names each field)
    │   ├── RenderTimeoutError         the render ran past its time limit and was cut off
    │   └── RenderFailedError          the engine raised, produced too many pages, or its worker died
    │       ├── TemplateFailedError    the component's own template, ``context`` or text form raised
    │       └── RemoteError            a worker's exception whose class the parent does not import
    ├── MediaTokenError                a media token is ``invalid``, ``expired`` or ``not_found``
    └── MediaUnavailableError          the media backend (Redis) cannot be reached: try again later

Every ``RenderError`` carries a stable ``code`` and the ``component`` it was about, so a channel
can log it and fall back to text without parsing messages.
"""

from __future__ import annotations

from typing import Any, Literal

from tools import AgoraError, UserError

__all__ = [
    "ComponentDefinitionError",
    "MediaTokenError",
    "MediaTokenReason",
    "MediaUnavailableError",
    "PropsInvalidError",
    "RenderError",
    "RenderFailedError",
    "RenderTimeoutError",
    "TemplateFailedError",
    "UnknownComponentError",
]


class ComponentDefinitionError(UserError):
    """A component was declared wrongly (bad name, bad template...) or a catalog got a name twice."""


class RenderError(AgoraError):
    """A render could not be carried out; nothing was produced.

    Attributes:
        code: A short machine-readable code, stable across versions.
        component: The component's name, when known.
    """

    code: str = "render_error"

    def __init__(self, message: str, *, component: str | None = None) -> None:
        super().__init__(message)
        self.component = component


class UnknownComponentError(RenderError):
    """The catalog has no component of that name, or not at the version asked for.

    Attributes:
        version: The version asked for, or ``None`` when any version would have done.
    """

    code = "unknown_component"

    def __init__(self, component: str, version: int | None = None, *, known_version: int | None = None) -> None:
        if version is None or known_version is None:
            message = f"Unknown component {component!r}."
        else:
            message = f"Component {component!r} is at version {known_version}, not {version}."
        super().__init__(message, component=component)
        self.version = version


class PropsInvalidError(RenderError):
    """The props failed validation against the component's props model; nothing was rendered.

    The message names every failing field by its dotted path (``columns.0.align``).

    Attributes:
        errors: The field errors as pydantic reports them (``loc``, ``msg``, ``type``), without
            the offending input, which may be large or sensitive.
    """

    code = "props_invalid"

    def __init__(self, component: str, errors: list[dict[str, Any]]) -> None:
        lines = [f"{_dotted(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors[:10]]
        if len(errors) > 10:
            lines.append(f"... and {len(errors) - 10} more")
        super().__init__(f"Invalid props for {component}: " + "; ".join(lines), component=component)
        self.errors = errors


def _dotted(loc: object) -> str:
    if isinstance(loc, tuple | list):
        return ".".join(str(part) for part in loc) or "props"
    return str(loc) or "props"


class RenderTimeoutError(RenderError):
    """The render ran past its time limit; its worker was stopped and replaced.

    Attributes:
        timeout: The limit that was exceeded, in seconds.
    """

    code = "render_timeout"

    def __init__(self, timeout: float, *, component: str | None = None) -> None:
        super().__init__(f"Rendering took longer than {timeout:g} s and was cut off.", component=component)
        self.timeout = timeout


class RenderFailedError(RenderError):
    """The rendering engine raised, the output broke a limit, or the worker process died."""

    code = "render_failed"


class TemplateFailedError(RenderFailedError):
    """The component's own code failed: its template, its ``context`` function or its text form.

    A template fails on an undefined name (templates run under ``StrictUndefined``), a filter
    that does not exist, an ``{% include %}`` of a missing file, or a filter that raises.

    It is a fault of the component, not of this render: the same component will most likely fail
    again, so a channel logs it once per component and sends the component's text form instead.
    """

    code = "template_failed"


MediaTokenReason = Literal["invalid", "expired", "not_found"]


class MediaTokenError(AgoraError):
    """A media token cannot be served.

    Attributes:
        reason: ``"invalid"`` (malformed, forged or signed with another secret), ``"expired"``
            (past the expiry it carries) or ``"not_found"`` (well signed and current, but the
            bytes are gone: evicted, or stored by a process that shares no backend with this one).
    """

    _MESSAGES = {
        "invalid": "The media link is not valid.",
        "expired": "The media link has expired.",
        "not_found": "The media is no longer available.",
    }

    def __init__(self, reason: MediaTokenReason) -> None:
        super().__init__(self._MESSAGES[reason])
        self.reason: MediaTokenReason = reason


class MediaUnavailableError(AgoraError):
    """The media backend cannot be reached (Redis down); the same token may work later.

    A backend translates its client's failures to this at its boundary, the original exception
    as ``__cause__``.
    """
