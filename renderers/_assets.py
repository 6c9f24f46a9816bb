"""``published_path``: which files of an app's assets folder may be read, by the page or a render."""

from __future__ import annotations

from pathlib import Path

__all__ = ["published_path"]


def published_path(root: Path, path: Path) -> Path | None:
    """``path`` resolved, when it exists inside ``root`` (a resolved folder) and is not hidden; else ``None``.

    Symlinks are followed, so one inside that points out of ``root``, or at a hidden name, is
    refused. Hidden means a name starting with ``.`` anywhere below ``root`` (``.env``,
    ``.git/config``): an app that publishes its own folder by mistake still keeps those. ``GET
    /assets/...`` and the PNG / PDF renders both read through this rule.
    """
    if "\0" in str(path):
        return None
    try:
        resolved = path.resolve()
    except (RuntimeError, OSError):  # a symlink loop (RuntimeError before Python 3.13)
        return None
    if not resolved.is_relative_to(root) or any(part.startswith(".") for part in resolved.relative_to(root).parts):
        return None
    return resolved if resolved.exists() else None
