"""Lone surrogates never get past the edge: parse_json and valid_text replace them with U+FFFD."""

from __future__ import annotations

import json

import pytest

from gateway import parse_json, valid_text


def test_parse_json_replaces_lone_surrogates_in_keys_and_values() -> None:
    raw = '{"text": "hi \\ud83d", "\\udc00k": ["a\\udfffb", {"x": "\\ud83d\\ude00"}], "n": 1}'
    value = parse_json(raw)
    assert value == {"text": "hi \ufffd", "\ufffdk": ["a\ufffdb", {"x": "\U0001f600"}], "n": 1}
    # Everything that came back has a UTF-8 form (the pair stayed one emoji).
    json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_parse_json_keeps_clean_input_as_parsed() -> None:
    raw = '{"a": ["é", "ü", {"b": "日本"}], "c": null}'
    assert parse_json(raw) == json.loads(raw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("plain", "plain"), ("caf\u00e9", "caf\u00e9"), ("\ud83d", "\ufffd"), ("a\udc00b\ud800", "a\ufffdb\ufffd")],
)
def test_valid_text(text: str, expected: str) -> None:
    assert valid_text(text) == expected
    valid_text(text).encode("utf-8")
