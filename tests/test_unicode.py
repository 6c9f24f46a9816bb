"""What enters as JSON text: lone surrogates become U+FFFD; NaN, Infinity and out-of-range numbers are refused."""

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


@pytest.mark.parametrize("raw", ["NaN", '{"a": [Infinity]}', '{"a": -Infinity}', "1e999", '{"n": -1e400}'])
def test_parse_json_refuses_what_the_json_standard_does_not_allow(raw: str) -> None:
    # Python's json takes NaN and Infinity, and 1e999 becomes inf: no other JSON peer can read them back.
    with pytest.raises(ValueError):
        parse_json(raw)


def test_parse_json_replaces_a_raw_lone_surrogate_in_text_input() -> None:
    # A str (a web-socket text frame, say) may hold the surrogate itself rather than its escape.
    assert parse_json('{"a": "x\ud83d"}') == {"a": "x\ufffd"}
