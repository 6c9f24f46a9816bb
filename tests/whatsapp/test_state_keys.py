"""The WhatsApp channel's state keys: parts that hold the separator never alias another key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from channels.whatsapp import ChannelState
from gateway.stores import MemoryStore


@pytest.fixture
async def state() -> AsyncIterator[ChannelState]:
    store = MemoryStore()
    yield ChannelState(store)
    await store.aclose()


async def test_a_status_claim_is_not_the_last_status_of_another_message(state: ChannelState) -> None:
    # "status:<sid>:<status>" (the claim of one status) used to be "status:<sid>" of the sid
    # "<sid>:<status>": one message's callbacks could be read as, or block, another's.
    delivered = {"status": "delivered", "error_code": None}
    assert await state.record_status("SM1", delivered)
    assert await state.status("SM1:delivered") is None
    assert await state.record_status("SM1:delivered", {"status": "failed", "error_code": "30008"})
    assert await state.status("SM1") == delivered
    assert not await state.record_status("SM1", delivered)  # a repeated callback is still seen once


def test_keys_of_ordinary_parts_are_unchanged() -> None:
    # What a previous version stored stays readable: only parts holding ":" or "%" are escaped.
    state = ChannelState(MemoryStore(), prefix="wa")
    assert state.key("msg", "SM0123abcd") == "wa:msg:SM0123abcd"
    assert state.key("sender", "+15551234567") == "wa:sender:+15551234567"
    assert state.key("status", "SM1", "delivered") == "wa:status:SM1:delivered"
    assert state.key("conv", "whatsapp-0123456789abcdef01234567") == "wa:conv:whatsapp-0123456789abcdef01234567"


def test_no_two_part_lists_of_a_kind_share_a_key() -> None:
    state = ChannelState(MemoryStore(), prefix="wa")
    pairs = [
        ("a:b", "c"),
        ("a", "b:c"),
        ("a%3Ab", "c"),
        ("a%3A", "b:c"),
        ("a:", "b"),
        ("a", ":b"),
        ("a:b:c", ""),
        ("", "a:b:c"),
        ("%", "3A"),
        ("%3", "A"),
    ]
    keys = [state.key("status", *pair) for pair in pairs]
    assert len(set(keys)) == len(keys), keys
    # Kinds never meet: a part cannot make one kind's key look like another's.
    assert state.key("status", "SM1", "delivered") != state.key("status-last", "SM1:delivered")
    assert state.key("btn", "used:x") != state.key("btn-used", "x")
