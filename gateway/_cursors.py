"""Signed page cursors of the list routes (``GET /agent/threads``, ``GET /agent/approvals``).

A cursor is a page's last position, ``(timestamp, id)`` as compact JSON in base64url, and a
16-byte HMAC of it bound to the caller and to the list it pages (``purpose``): a cursor is
only good for the caller it was given to and the route that gave it. Anything else (edited,
another caller's, another list's, garbled) is a ``400 invalid_request``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re

from tools import Actor

from ._errors import GatewayError

__all__ = ["BadCursorError", "decode_cursor", "encode_cursor"]

_CURSOR = re.compile(r"^[A-Za-z0-9_-]{8,400}\.[A-Za-z0-9_-]{22}$")


class BadCursorError(GatewayError):
    """A cursor this gateway did not give this caller for this list (400)."""

    status, code = 400, "invalid_request"


def _mac(secret: bytes, purpose: str, actor: Actor, payload: bytes) -> bytes:
    key = hmac.new(secret, f"agora-gateway/{purpose}-cursor/v1".encode(), hashlib.sha256).digest()
    return hmac.new(key, actor.key.encode("utf-8", "surrogatepass") + b"\0" + payload, hashlib.sha256).digest()[:16]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def encode_cursor(secret: bytes, actor: Actor, position: tuple[float, str], *, purpose: str) -> str:
    """The cursor of a page of ``purpose`` ending at ``position``, signed for ``actor``."""
    payload = json.dumps(list(position), separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, purpose, actor, payload))}"


def decode_cursor(secret: bytes, actor: Actor, cursor: str, *, purpose: str) -> tuple[float, str]:
    """The position an ``encode_cursor`` cursor holds.

    Raises:
        BadCursorError: Not a cursor given to ``actor`` for ``purpose`` (400).
    """
    bad = BadCursorError("Bad cursor: pass next_cursor as it was given")
    if not _CURSOR.match(cursor):
        raise bad
    body, mac = cursor.split(".")
    try:
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        given = base64.urlsafe_b64decode(mac + "==")
    except (binascii.Error, ValueError):
        raise bad from None
    if not hmac.compare_digest(given, _mac(secret, purpose, actor, payload)):
        raise bad
    position = json.loads(payload)  # signed by us: the JSON we wrote
    return float(position[0]), str(position[1])
