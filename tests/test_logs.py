"""``gateway._logs``: JSON lines that stay one line, fields that follow the work, the actor's pseudonym."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import logging
import re
import subprocess
from pathlib import Path

import pytest

from gateway._logs import actor_hash, bind_log, configure_logging, log_context, log_scope
from tools import UserError


def json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_json_line_is_one_line_whatever_the_message_holds(restore_root: None) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, "json", stream=stream)
    log = logging.getLogger("probe")
    nasty = "two\nlines\r\u2028sep\u2029 caf\u00e9 \ud800 \x1b[31m"
    log.info("said %s", nasty)
    try:
        raise ValueError("bad thing")
    except ValueError:
        log.exception("it failed")
    log.info("fields", extra={"log_fields": {"method": "GET", "level": "spoofed", "message": "spoofed", "n": None}})
    text = stream.getvalue()
    assert text.isascii()
    assert len(text.splitlines()) == len(text.split("\n")) - 1 == 3  # str.splitlines cuts at U+2028 too: none left
    said, failed, fields = json_lines(stream)
    assert said["message"] == f"said {nasty}" and said["logger"] == "probe" and said["level"] == "INFO"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", str(said["ts"]))
    assert list(said) == ["ts", "level", "logger", "message"]  # no context here, no fields
    assert failed["level"] == "ERROR" and str(failed["exc"]).startswith("Traceback")
    assert str(failed["exc"]).endswith("ValueError: bad thing")
    assert (fields["method"], fields["message"], fields["level"], "n" in fields) == ("GET", "fields", "INFO", False)


def test_text_is_the_classic_line_and_a_second_call_replaces_the_first(restore_root: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(logging.INFO, "json", stream=first)
    configure_logging(logging.WARNING, "text", stream=second)
    logging.getLogger("probe").info("hidden")
    logging.getLogger("probe").warning("shown")
    assert first.getvalue() == ""
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING probe: shown\n", second.getvalue())


def test_the_format_comes_from_agora_log_format_and_a_bad_one_is_refused(
    restore_root: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setenv("AGORA_LOG_FORMAT", "json")
    configure_logging(logging.INFO, None, stream=stream)
    logging.getLogger("probe").info("hello")
    assert json_lines(stream)[0]["message"] == "hello"
    monkeypatch.setenv("AGORA_LOG_FORMAT", "xml")
    before = list(logging.getLogger().handlers)
    with pytest.raises(UserError, match="AGORA_LOG_FORMAT: use json or text"):
        configure_logging(logging.INFO, None, stream=stream)
    with pytest.raises(UserError, match="'yaml': use json or text"):
        configure_logging(logging.INFO, "yaml", stream=stream)
    assert logging.getLogger().handlers == before  # nothing changed


def test_the_actor_is_a_stable_hmac_pseudonym_never_the_id() -> None:
    expected = hmac.new(b"agora-gateway log actor v1", b"whatsapp:+15551230001", hashlib.sha256).hexdigest()[:12]
    assert actor_hash("whatsapp:+15551230001") == expected
    assert re.fullmatch(r"[0-9a-f]{12}", expected) and actor_hash("whatsapp:+15551230002") != expected
    with log_scope(actor="whatsapp:+15551230001"):
        assert log_context() == {"actor": expected}


async def test_scopes_nest_and_reset_and_tasks_keep_their_own(restore_root: None) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, "json", stream=stream)
    log = logging.getLogger("probe")
    seen: list[dict[str, str]] = []

    async def child() -> None:
        bind_log(run_id="run-child")  # in the child's context only
        seen.append(dict(log_context()))

    with log_scope(thread_id="t1", channel="web"):
        with log_scope(run_id="r1", channel=None):
            log.info("inner")
        bind_log(actor="bob")
        log.info("outer")
        await asyncio.create_task(child())
        assert "run_id" not in log_context()
    log.info("after")
    inner, outer, after = json_lines(stream)
    assert (inner["thread_id"], inner["run_id"], "channel" in inner) == ("t1", "r1", False)
    assert (outer["thread_id"], outer["channel"], outer["actor"], "run_id" in outer) == (
        "t1",
        "web",
        actor_hash("bob"),
        False,
    )
    assert seen == [{"thread_id": "t1", "channel": "web", "actor": actor_hash("bob"), "run_id": "run-child"}]
    assert not {"thread_id", "channel", "actor", "run_id"} & set(after)  # the bind inside the scope went with it


def test_the_documented_command_computes_the_pseudonym() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    [command] = [block for block in re.findall(r"```sh\n(.*?)\n```", text, re.S) if "log actor v1" in block]
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.strip() == actor_hash("whatsapp:+15551230001")
