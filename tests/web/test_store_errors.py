"""A store that fails surfaces as one error type, ``StoreUnavailableError``, answered 503 by every route."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from gateway import Runtime, StoreUnavailableError
from gateway.models import ScriptedModel
from gateway.stores import RedisStore

from ..stores._server import RedisServer
from .conftest import ALICE, token_for


@pytest.mark.parametrize("path", ["/agent/threads/t-away", "/healthz"])
async def test_a_route_over_a_store_that_cannot_be_reached_answers_503(
    make_client: Any, caplog: pytest.LogCaptureFixture, tmp_path: Path, path: str
) -> None:
    server = RedisServer(tmp_path)
    await server.start()
    try:
        store = RedisStore(server.url, timeout=2.0, retry=None)
        client = await make_client(Runtime(model=ScriptedModel([]), store=store))  # starts: the store answers
    finally:
        server.kill()  # then it goes away
    caplog.set_level(logging.INFO)
    answer = await client.get(path, headers={"Authorization": f"Bearer {token_for(ALICE)}"})
    assert answer.status == StoreUnavailableError.status == 503
    body = await answer.json()
    if path == "/healthz":
        assert body["status"] == "unavailable"
    else:
        assert body["code"] == StoreUnavailableError.code
        refusals = [r for r in caplog.records if "store_unavailable" in r.getMessage()]
        assert len(refusals) == 1 and refusals[0].exc_info is None, "one line, no traceback"
    assert not any("Traceback" in r.getMessage() or r.exc_info for r in caplog.records)
