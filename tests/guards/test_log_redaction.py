"""``AGORA_REDACT_PII``: log lines (messages, fields, tracebacks) are redacted, as JSON or text."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gateway._logs import configure_logging, log_scope
from tools import UserError


def log_some_pii() -> None:
    log = logging.getLogger("probe")
    log.info("reply to %s about card %s", "ana@example.com", "4111 1111 1111 1111")
    log.info("sent", extra={"log_fields": {"to": "+55 11 91234-5678", "order": 1042, "nested": ["bob@example.org"]}})
    try:
        raise ValueError("could not reach ana@example.com")
    except ValueError:
        log.exception("failed for %s on 2026-12-02", "(555) 123-4567")


def test_json_lines_are_redacted(restore_root: None) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, "json", stream=stream, redact_pii=True)
    with log_scope(thread_id="t-1"):
        log_some_pii()
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["message"] for line in lines] == [
        "reply to [email] about card [card]",
        "sent",
        "failed for [phone] on 2026-12-02",
    ]
    assert (lines[1]["to"], lines[1]["order"], lines[1]["nested"]) == ("[phone]", 1042, ["[email]"])
    assert "ValueError: could not reach [email]" in lines[2]["exc"]
    assert lines[0]["thread_id"] == "t-1"
    assert "example.com" not in stream.getvalue() and "4111" not in stream.getvalue()


def test_text_lines_are_redacted(restore_root: None) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, "text", stream=stream, redact_pii=True)
    log_some_pii()
    text = stream.getvalue()
    assert "reply to [email] about card [card]" in text
    assert "ValueError: could not reach [email]" in text and "failed for [phone] on 2026-12-02" in text
    assert "example.com" not in text and "91234" not in text and "123-4567" not in text


def test_off_by_default_and_on_from_the_environment(restore_root: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, "text", stream=stream)
    logging.getLogger("probe").info("to ana@example.com")
    assert "to ana@example.com" in stream.getvalue()
    monkeypatch.setenv("AGORA_REDACT_PII", "true")
    stream = io.StringIO()
    configure_logging(logging.INFO, "text", stream=stream)
    logging.getLogger("probe").info("to ana@example.com")
    assert "to [email]" in stream.getvalue() and "ana@" not in stream.getvalue()
    monkeypatch.setenv("AGORA_REDACT_PII", "maybe")
    with pytest.raises(UserError, match="AGORA_REDACT_PII: use true or false"):
        configure_logging(logging.INFO, "text", stream=stream)


def test_a_message_whose_arguments_do_not_fit_is_left_to_logging(restore_root: None) -> None:
    stream = io.StringIO()
    handler = configure_logging(logging.INFO, "text", stream=stream, redact_pii=True)
    record = logging.LogRecord("probe", logging.INFO, __file__, 1, "%s and %s", ("one",), None)
    assert all(f.filter(record) for f in handler.filters)  # the filter keeps it, unchanged
    assert (record.msg, record.args) == ("%s and %s", ("one",))


def test_an_apps_own_handler_takes_the_filter() -> None:
    from gateway import PiiLogFilter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(PiiLogFilter())
    log = logging.getLogger("probe.own")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("paid with %s", "5500 0055 5555 5559")
    finally:
        log.removeHandler(handler)
        log.propagate = True
    assert stream.getvalue() == "paid with [card]\n"


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_the_works_fields_are_redacted_too(restore_root: None, log_format: str) -> None:
    stream = io.StringIO()
    handler = configure_logging(logging.INFO, log_format, stream=stream, redact_pii=True)
    if log_format == "text":
        handler.setFormatter(logging.Formatter("%(message)s %(agora_context)s"))
    with log_scope(thread_id="555-123-4567", run_id="run_1"):  # a client chooses its thread id
        logging.getLogger("probe").info("refused")
    line = stream.getvalue()
    assert "555-123-4567" not in line and "[phone]" in line and "run_1" in line


def test_an_apps_own_handler_redacts_the_works_fields(restore_root: None) -> None:
    from gateway import PiiLogFilter
    from gateway._logs import JsonFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(PiiLogFilter())
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("probe.own")
    log.addHandler(handler)
    try:
        with log_scope(thread_id="4111-1111-1111-1111"):
            log.warning("hello")
    finally:
        log.removeHandler(handler)
    assert json.loads(stream.getvalue())["thread_id"] == "[card]"
