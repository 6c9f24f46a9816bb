"""``Actor``: what an id and a tenant may hold, and keys that no two identities share."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from tools import Actor

HOSTILE = {
    "unit separator": "acme\x1fu1",
    "record separator": "acme\x1eu1",
    "NUL": "u1\x00",
    "newline": "u1\n",
    "carriage return": "u1\r",
    "tab": "u\t1",
    "DEL": "u1\x7f",
    "C1 control (NEL)": "u1\x85",
    "C1 control (APC)": "\x9fu1",
    "lone high surrogate": "u1\ud800",
    "lone low surrogate": "\udfffu1",
    "too long": "u" * 257,
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_ids_and_tenants_refuse_control_characters_invalid_unicode_and_length(value: str) -> None:
    with pytest.raises(ValidationError):
        Actor(id=value)
    with pytest.raises(ValidationError):
        Actor(id="u1", tenant_ref=value)


def test_ordinary_ids_are_accepted_as_they_are() -> None:
    for value in ("u1", "whatsapp:+15551234567", "anon:abc", "José Ñandú", "用户", "a b", "😀", "x" * 256, "{t}"):
        assert Actor(id=value, tenant_ref=value).id == value


def test_keys_keep_the_historic_form_for_every_valid_actor() -> None:
    # Stores kept these keys (a thread's owner in Redis): they must read the same after an upgrade.
    assert Actor(id="u1").key == "u1"
    assert Actor(id="u1", tenant_ref="acme").key == "acme\x1fu1"
    assert Actor(id="u1", tenant_ref="").key == "\x1fu1"


def test_no_two_identities_share_a_key_even_without_validation() -> None:
    # Pairs that joined alike under the old "tenant \x1f id" key, built without validation.
    parts = ["u1", "acme", "acme\x1fu1", "\x1fu1", "u1\x1f", "", "\x1f", '["acme","u1"]', "\x1f\x1f", "u1\ud800"]
    pairs = [(actor_id, tenant) for actor_id in parts if actor_id for tenant in [None, *parts]]
    keys = {pair: Actor.model_construct(id=pair[0], roles=[], tenant_ref=pair[1]).key for pair in pairs}
    for (one, key_one), (two, key_two) in itertools.combinations(keys.items(), 2):
        assert key_one != key_two, (one, two)
    assert all(key.encode("utf-8") for key in keys.values())  # every key can be stored
