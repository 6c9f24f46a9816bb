"""Signed page cursors: good only for the caller and the list that gave them."""

from __future__ import annotations

import pytest

from gateway._cursors import BadCursorError, decode_cursor, encode_cursor
from tools import Actor

SECRET = b"s" * 32
ALICE = Actor(id="alice")
BOB = Actor(id="bob")


def test_a_cursor_reads_back_for_its_caller_and_list() -> None:
    cursor = encode_cursor(SECRET, ALICE, (1712.5, "t-1"), purpose="threads")
    assert decode_cursor(SECRET, ALICE, cursor, purpose="threads") == (1712.5, "t-1")


@pytest.mark.parametrize(
    ("actor", "purpose", "secret"),
    [(BOB, "threads", SECRET), (ALICE, "approvals", SECRET), (ALICE, "threads", b"t" * 32)],
    ids=["another caller", "another list", "another secret"],
)
def test_a_cursor_is_refused_anywhere_else(actor: Actor, purpose: str, secret: bytes) -> None:
    cursor = encode_cursor(SECRET, ALICE, (1712.5, "t-1"), purpose="threads")
    with pytest.raises(BadCursorError) as refused:
        decode_cursor(secret, actor, cursor, purpose=purpose)
    assert (refused.value.status, refused.value.code) == (400, "invalid_request")


@pytest.mark.parametrize("cursor", ["", "abc", "a" * 8 + "." + "!" * 22, "a" * 9 + "." + "A" * 22])
def test_a_garbled_cursor_is_refused(cursor: str) -> None:
    with pytest.raises(BadCursorError):
        decode_cursor(SECRET, ALICE, cursor, purpose="threads")
