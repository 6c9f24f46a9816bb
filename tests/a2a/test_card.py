"""The public agent card: strictly 1.0 by default, the 0.3 shape for a caller that asks for 0.3."""

from __future__ import annotations

from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

from a2a.client import A2ACardResolver
from a2a.compat.v0_3 import types as v03
from a2a.types import AgentCard
from google.protobuf import json_format

from .conftest import Gateway

CARD_PATH = "/.well-known/agent-card.json"


def strict_v10(card: dict[str, Any]) -> AgentCard:
    """The card read as the 1.0 protobuf type, refusing any field 1.0 does not define (CARD-STRUCT-001)."""
    return json_format.ParseDict(card, AgentCard())  # no ignore_unknown_fields


async def test_the_public_card_is_a_strict_1_0_card(demo: Gateway) -> None:
    anonymous = demo.http(None, version=None)
    default = await anonymous.get(demo.base_url + CARD_PATH)
    assert default.status_code == 200
    card = strict_v10(default.json())
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (demo.rpc_url, "JSONRPC", "1.0"),
        (demo.rpc_url, "JSONRPC", "0.3"),
    ]
    bearer = card.security_schemes["bearer"].http_auth_security_scheme
    assert (bearer.scheme, bearer.bearer_format) == ("Bearer", "JWT")
    assert card.capabilities.extended_agent_card and card.skills
    # Asking for 1.0 (header or query) gives the same card; the extended card is as strict.
    for asked in ({"headers": {"A2A-Version": "1.0"}}, {"params": {"A2A-Version": "1.0"}}):
        assert (await anonymous.get(demo.base_url + CARD_PATH, **asked)).json() == default.json()
    extended = strict_v10((await demo.rpc("GetExtendedAgentCard", {}))["result"])
    assert {s.id for s in extended.skills} >= {s.id for s in card.skills}


async def test_a_0_3_caller_gets_the_0_3_card(demo: Gateway) -> None:
    anonymous = demo.http(None, version=None)
    by_header = await anonymous.get(demo.base_url + CARD_PATH, headers={"A2A-Version": "0.3"})
    by_query = await anonymous.get(demo.base_url + CARD_PATH, params={"A2A-Version": "0.3"})
    assert by_header.status_code == by_query.status_code == 200
    body = by_header.json()
    assert by_query.json() == body
    known = {field.alias or name for name, field in v03.AgentCard.model_fields.items()}
    assert set(body) <= known, set(body) - known  # nothing of 1.0 (supportedInterfaces...)
    legacy = v03.AgentCard.model_validate(body)
    assert (legacy.url, legacy.preferred_transport, legacy.protocol_version) == (demo.rpc_url, "JSONRPC", "0.3")
    assert legacy.supports_authenticated_extended_card is True
    assert legacy.security_schemes is not None
    scheme = legacy.security_schemes["bearer"].root
    assert isinstance(scheme, v03.HTTPAuthSecurityScheme) and scheme.bearer_format == "JWT"
    assert legacy.security == [{"bearer": []}]
    assert by_header.headers["ETag"] != (await anonymous.get(demo.base_url + CARD_PATH)).headers["ETag"]
    assert "A2A-Version" in by_header.headers["Vary"]


async def test_the_sdk_client_still_discovers_both_cards(demo: Gateway) -> None:
    card = await A2ACardResolver(demo.http(version=None), demo.base_url).get_agent_card()
    assert card.supported_interfaces[0].protocol_version == "1.0"
    legacy_path = CARD_PATH + "?A2A-Version=0.3"
    legacy = await A2ACardResolver(demo.http(version=None), demo.base_url, legacy_path).get_agent_card()
    # The SDK maps the 0.3 card's url / preferredTransport / protocolVersion onto an interface.
    assert [(i.url, i.protocol_version) for i in legacy.supported_interfaces] == [(demo.rpc_url, "0.3")]


async def test_the_card_has_last_modified_and_answers_if_modified_since(demo: Gateway) -> None:
    anonymous = demo.http(None, version=None)
    first = await anonymous.get(demo.base_url + CARD_PATH)
    stamp = first.headers["Last-Modified"]
    modified = parsedate_to_datetime(stamp)
    again = await anonymous.get(demo.base_url + CARD_PATH)
    assert again.headers["Last-Modified"] == stamp  # the same card: the same date

    fresh = await anonymous.get(demo.base_url + CARD_PATH, headers={"If-Modified-Since": stamp})
    assert fresh.status_code == 304 and fresh.content == b"" and fresh.headers["ETag"] == first.headers["ETag"]
    older = format_datetime(modified.replace(year=modified.year - 1), usegmt=True)
    stale = await anonymous.get(demo.base_url + CARD_PATH, headers={"If-Modified-Since": older})
    assert stale.status_code == 200 and stale.json() == first.json()
    # If-None-Match wins over If-Modified-Since (RFC 9110 section 13.2.2): another ETag is a 200.
    other = await anonymous.get(
        demo.base_url + CARD_PATH, headers={"If-None-Match": 'W/"other"', "If-Modified-Since": stamp}
    )
    assert other.status_code == 200
    garbage = await anonymous.get(demo.base_url + CARD_PATH, headers={"If-Modified-Since": "yesterday-ish"})
    assert garbage.status_code == 200
