"""``agora-gateway init``: write a starter app that ``serve --app`` runs at once."""

from __future__ import annotations

import ast
import inspect
import os
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings

__all__ = ["STARTER_MODULE", "env_example", "write_starter"]

STARTER_MODULE = "starter_app"
"""The package ``init`` writes: serve it with ``--app starter_app:gateway``."""

STARTER_FILES = Path(__file__).resolve().parent / "starter"
"""The starter app's files, copied as they are (they are linted and type-checked with the package)."""


def _field_docs(model: type[BaseSettings]) -> dict[str, str]:
    """The docstrings written under a settings model's fields (``name: int = 1`` then ``\"\"\"...\"\"\"``)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseSettings)) or cls is BaseSettings:
            continue
        try:
            tree = ast.parse(inspect.getsource(cls))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, [*body[1:], None], strict=True):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    if isinstance(after.value.value, str):
                        docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={'|'.join(v) if isinstance(v, list) else v}" for k, v in value.items())
    return str(value)


def env_example() -> str:
    """A ``.env.example`` naming every setting of the gateway and its channels, at its default."""
    lines = [
        "# Every setting agora-gateway reads, commented out at its default. Copy to .env and edit.",
        "# Secrets (tokens, AGORA_SECRET) belong in .env or the environment, never in the code.",
        "",
        "# AGORA_SECRET signs cookies, actor tokens, confirm tokens and media URLs. Unset, serve on a SQLite",
        "# store keeps the one it made beside the file (.agora/secret); other stores make one per process",
        "# (sign-ins end when it restarts). Set the same one on",
        "# every process, made with: openssl rand -hex 32. Never a value someone else has seen: whoever",
        "# knows it can sign a token as anyone, approvers included.",
        "# AGORA_SECRET=",
        "AGORA_APP=starter_app:gateway",
    ]
    from .app import setting_variable, settings_models

    for title, model in settings_models():
        docs = _field_docs(model)
        lines += ["", f"## {title}"]
        for name, field in model.model_fields.items():
            variable = setting_variable(model, name)
            if variable in ("AGORA_SECRET", "AGORA_APP"):
                continue
            doc = docs.get(name) or field.description or ""
            if doc:
                lines.append(f"# {doc}")
            default = field.get_default(call_default_factory=True)
            lines.append(f"# {variable}={_default(default)}")
    return "\n".join(lines) + "\n"


def write_starter(directory: str | Path, *, force: bool = False) -> list[Path]:
    """Write the starter app into ``directory`` (created if missing); returns the files written.

    Nothing is written unless every file can be: each is checked first.

    Raises:
        FileExistsError: A file ``init`` writes is there already (and ``force`` is not set), a
            symbolic link is where a file goes (even with ``force``: never written through), or
            a file is where a folder goes.
    """
    root = Path(directory)
    files = {
        root / path.relative_to(STARTER_FILES): path.read_text(encoding="utf-8")
        for path in sorted(STARTER_FILES.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    files[root / ".env.example"] = env_example()
    if os.path.lexists(root) and not root.is_dir():  # the folder itself may be a link to one
        raise FileExistsError(f"{root} is not a folder")
    for path in files:
        for parent in path.relative_to(root).parents:
            folder = root / parent
            if parent != Path(".") and (folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir())):
                raise FileExistsError(f"{folder} is in the way: init needs a folder there")
    existing = [path for path in files if os.path.lexists(path)]  # a dangling link too
    if existing and not force:
        raise FileExistsError(f"would overwrite {', '.join(map(str, existing))} (use --force)")
    links = [str(path) for path in existing if path.is_symlink()]
    if links:
        raise FileExistsError(f"{', '.join(links)}: a symbolic link, never written through; remove it first")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return list(files)
