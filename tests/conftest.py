"""Shared fixtures."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the shared test Redis (``AGORA_TEST_REDIS_URL``, else 127.0.0.1:6379/0).

    Tests that use it must namespace their keys (a unique prefix) and never flush the database:
    other suites use the same server concurrently. Without a Redis the tests fail (never skip):
    ``.ci/bootstrap`` starts one.
    """
    url = os.environ.get("AGORA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    parts = urlsplit(url)
    if parts.scheme in {"redis", "rediss"}:
        try:
            socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=1).close()
        except OSError as exc:
            pytest.fail(f"no Redis answers at {parts.hostname}:{parts.port} (run .ci/bootstrap): {exc}")
    return url
