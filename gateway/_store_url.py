"""The store setting (``AGORA_STORE_URL``, ``serve --store``): a URL naming one store.

=========================================================  ================================
URL                                                        store
=========================================================  ================================
``memory://``                                              ``MemoryStore``: this process
                                                           only, gone when it stops
``sqlite:///relative/path.db``                             ``SqliteStore``; three slashes:
                                                           a path relative to the folder
                                                           the gateway starts in
``sqlite:////absolute/path.db``                            four slashes: an absolute path
``postgresql://user:password@host:5432/db``                ``PostgresStore`` (``postgres://``
                                                           too; any libpq query parameter)
``redis://``, ``rediss://``, ``unix://``,                  ``RedisStore``; ``?prefix=name``
``redis+sentinel://``, ``rediss+sentinel://``,             names its keys (``agora``
``redis+cluster://host:port,host:port``                    unless given)
=========================================================  ================================

The slash rule is SQLAlchemy's: after ``sqlite://`` comes an empty host, then ``/``, then the
path as written; so ``sqlite:///agora.db`` is ``./agora.db`` and ``sqlite:////var/lib/agora.db``
is ``/var/lib/agora.db``. A SQLite URL names a file: ``sqlite://``, ``:memory:``, a host or a
query string are refused (``memory://`` is the in-process store). Percent-escapes in the path
are decoded. The folder of a SQLite file is created on first start (mode 0700) when missing.

A refused URL is named by its scheme only: the rest may hold a password.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ._errors import StoreUnavailableError

if TYPE_CHECKING:
    from .stores import Store

__all__ = [
    "ACCEPTED",
    "REDIS_SCHEMES",
    "SECRET_FILE",
    "SERVE_DEFAULT",
    "StoreKind",
    "StoreUrl",
    "kept_secret",
    "open_store",
    "parse_store_url",
]

StoreKind = Literal["memory", "sqlite", "postgresql", "redis"]

logger = logging.getLogger("gateway.store_url")

SERVE_DEFAULT = "sqlite:///.agora/agora.db"
"""``agora-gateway serve``'s store when none is set: a SQLite file in ``./.agora/``.
(``create_app(Settings())`` in code, without a store setting, keeps an in-process ``memory://``.)"""

REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster")
"""The schemes ``RedisStore`` connects to (``gateway.stores._redis_client.connect``)."""

_KINDS: dict[str, StoreKind] = {
    "memory": "memory",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
    **dict.fromkeys(REDIS_SCHEMES, "redis"),
}

ACCEPTED = (
    "memory://, sqlite:///path.db, postgresql://... (postgres://),"
    " redis://... (rediss://, unix://, redis+sentinel://, redis+cluster://)"
)
"""The schemes an error names when it refuses a URL."""


@dataclass(frozen=True, kw_only=True)
class StoreUrl:
    """A store URL, checked: which kind of store, and where."""

    kind: StoreKind
    url: str
    """The URL as given (it may hold a password: show ``display()`` instead)."""
    path: Path | None = None
    """A SQLite store's file, absolute (relative paths are resolved when the URL is parsed)."""
    prefix: str | None = None
    """A Redis store's key prefix (its URL's ``prefix=``, taken out of ``url``); ``None``: ``agora``."""

    def display(self) -> str:
        """The kind and where, without a password: ``sqlite at /srv/.agora/agora.db``, ``memory``."""
        if self.kind == "memory":
            return "memory"
        if self.kind == "sqlite":
            return f"sqlite at {self.path}"
        from .stores._redis_client import redact

        named = f" (prefix {self.prefix})" if self.prefix else ""
        return f"{self.kind} at {redact(self.url)}{named}"


def parse_store_url(url: str, *, cwd: Path | None = None) -> StoreUrl:
    """Check ``url`` and say what it names; a relative SQLite path is resolved against ``cwd`` (the current folder).

    Raises:
        ValueError: An unknown scheme (the message lists the accepted ones), or a SQLite URL
            that names no file. The message never repeats the URL beyond its scheme.
    """
    scheme, sep, rest = url.strip().partition("://")
    if not sep or not scheme:
        raise ValueError(f"not a store URL (scheme://...); use {ACCEPTED}")
    kind = _KINDS.get(scheme.lower())
    if kind is None:
        raise ValueError(f"unknown store scheme {scheme.lower()[:40]!r}; use {ACCEPTED}")
    if kind == "memory":
        if rest.strip("/"):
            raise ValueError("memory:// takes nothing after the scheme")
        return StoreUrl(kind="memory", url="memory://")
    if kind == "sqlite":
        return StoreUrl(kind="sqlite", url=url, path=_sqlite_path(url, cwd or Path.cwd()))
    if kind == "redis":
        return _redis_url(url.strip())
    return StoreUrl(kind=kind, url=url.strip())


def _redis_url(url: str) -> StoreUrl:
    """A Redis URL with its ``prefix=`` query item taken out (redis-py would refuse it)."""
    parts = urlsplit(url)
    items = parse_qsl(parts.query, keep_blank_values=True)
    prefixes = [value for name, value in items if name == "prefix"]
    if not prefixes:
        return StoreUrl(kind="redis", url=url)
    if len(prefixes) > 1 or not prefixes[0] or "{" in prefixes[0] or "}" in prefixes[0]:
        raise ValueError("a Redis URL's prefix= names the keys' prefix once, not empty, without braces")
    rest = urlencode([(name, value) for name, value in items if name != "prefix"])
    return StoreUrl(kind="redis", url=urlunsplit(parts._replace(query=rest)), prefix=prefixes[0])


def _sqlite_path(url: str, cwd: Path) -> Path:
    parts = urlsplit(url.strip())
    if parts.netloc:
        raise ValueError("a SQLite URL has no host: sqlite:///relative.db or sqlite:////absolute/path.db")
    if parts.query or parts.fragment:
        raise ValueError("a SQLite URL takes no query (?...) or fragment (#...)")
    # urlsplit("sqlite:///a.db").path is "/a.db" and "sqlite:////abs.db" gives "//abs.db": one slash
    # belongs to the URL, the rest is the path as written (SQLAlchemy's rule).
    raw = unquote(parts.path.removeprefix("/"))
    if not raw or raw == ":memory:" or raw.endswith("/"):
        raise ValueError("a SQLite URL names a file: sqlite:///relative.db or sqlite:////absolute/path.db")
    if "\x00" in raw:
        raise ValueError("a SQLite path has no NUL character")
    path = Path(raw)
    return Path(os.path.normpath(path if path.is_absolute() else cwd / path))


def open_store(location: StoreUrl) -> Store:
    """The store ``location`` names (not connected yet: its ``ping`` says whether it answers).

    A SQLite file's folder is created (mode 0700) when it is missing.

    Raises:
        StoreUnavailableError: The folder of a SQLite file cannot be created.
    """
    if location.kind == "sqlite":
        assert location.path is not None  # parse_store_url sets it for SQLite
        _make_folder(location.path.parent)
        from .stores import SqliteStore

        return SqliteStore(location.path)
    if location.kind == "postgresql":
        from .stores import PostgresStore

        return PostgresStore(location.url)
    if location.kind == "redis":
        from .stores import RedisStore

        return RedisStore(location.url, prefix=location.prefix or "agora")
    from .stores import MemoryStore

    return MemoryStore()


SECRET_FILE = "secret"
"""The file beside a SQLite store where ``serve`` keeps the secret it made (no ``AGORA_SECRET``)."""


def kept_secret(location: StoreUrl) -> str:
    """The signing secret kept beside a SQLite store's file, made (mode 0600) on the first start.

    ``serve`` uses it when ``AGORA_SECRET`` is not set, so the visitors' cookies and actor tokens
    outlive a restart as their conversations do: a new secret each start would make every visitor
    a stranger to threads the file still holds.

    Raises:
        StoreUnavailableError: The folder cannot be made, or the file cannot be read or written.
    """
    if location.path is None:
        raise ValueError("only a SQLite store keeps a secret beside it")
    folder = location.path.parent
    _make_folder(folder)
    path = folder / SECRET_FILE
    try:
        if not path.exists():
            # Written aside, then linked into place: two processes starting at once agree on one
            # secret, and neither ever reads a half-written file.
            made = folder / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
            try:
                os.link(made, path)
                logger.info("AGORA_SECRET is not set: made a secret, kept in %s (sign-ins outlive restarts)", path)
            except FileExistsError:
                pass  # another process made it first: theirs it is
            finally:
                made.unlink()
        value = path.read_text(encoding="ascii").strip()
        if len(value) < 32:
            raise StoreUnavailableError(f"{path} holds no secret (delete it to make a new one)")
        return value
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise StoreUnavailableError(f"cannot keep the secret in {path}: {reason}") from exc


def _make_folder(folder: Path) -> None:
    if folder.is_dir():
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise StoreUnavailableError(f"cannot create the SQLite store's folder {folder}: {reason}") from exc
