"""Hostile input found by trying the gateway as an attacker: cookies, token headers, static paths, log lines."""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

import pytest

from .conftest import ALICE, token_for

DEEP_JWT = base64.urlsafe_b64encode(b"[" * 2900).rstrip(b"=").decode() + ".e30.AAAA"
"""A token whose header is 2,900 nested arrays: json.loads raises RecursionError before the signature is checked."""

FORGED = "x\n2026-12-01 14:00:00,000 WARNING gateway.http: FORGED"


def _faults(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def _multi_line(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "\n" in r.getMessage() or "\r" in r.getMessage()]


@pytest.mark.parametrize("cookie", ["agora_anon=abc.\u00e9", "agora_anon=\u00e9.\u00e9"])
async def test_a_bad_anonymous_cookie_gets_a_fresh_visitor_not_a_500(
    make_client: Any, caplog: pytest.LogCaptureFixture, cookie: str
) -> None:
    client = await make_client()
    with caplog.at_level(logging.INFO):
        response = await client.get("/agent/tools", headers={"Cookie": cookie})
    assert response.status == 200, await response.text()
    assert _faults(caplog) == []


@pytest.mark.parametrize("path", ["/agent/tools", "/"])
async def test_a_token_with_a_deeply_nested_header_is_a_401(
    make_client: Any, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    client = await make_client()
    with caplog.at_level(logging.INFO):
        response = await client.get(path, headers={"Authorization": f"Bearer {DEEP_JWT}"})
    assert response.status == 401, await response.text()
    assert (await response.json())["code"] == "invalid_token"
    assert _faults(caplog) == []


async def test_a_static_path_too_long_for_the_file_system_is_a_404(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    with caplog.at_level(logging.INFO):
        response = await client.get("/static/" + "a" * 300)
    assert response.status == 404, await response.text()
    assert _faults(caplog) == []


async def test_an_a2a_refusal_logs_one_line_whatever_the_task_id(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": FORGED}}
    with caplog.at_level(logging.INFO):
        response = await client.post(
            "/a2a",
            data=json.dumps(body),
            headers={
                "Authorization": f"Bearer {token_for(ALICE)}",
                "Content-Type": "application/json",
                "A2A-Version": "1.0",
            },
        )
    assert response.status == 200
    assert (await response.json())["error"]["code"] == -32001
    assert _multi_line(caplog) == []


async def test_an_ag_ui_refusal_logs_one_line_whatever_the_role(
    make_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client()
    body = {
        "threadId": "t-forged",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "m1", "role": FORGED, "content": "hi"}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    with caplog.at_level(logging.INFO):
        response = await client.post(
            "/agent/ag-ui",
            data=json.dumps(body),
            headers={"Authorization": f"Bearer {token_for(ALICE)}", "Content-Type": "application/json"},
        )
    assert response.status == 400
    assert _multi_line(caplog) == []
