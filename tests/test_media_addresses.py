"""``MediaSource`` refuses IPv6 addresses that carry a private IPv4 one inside (no SSRF through them).

Besides ``::ffff:a.b.c.d`` (IPv4-mapped), an IPv6 address can name an IPv4 host as
IPv4-compatible (``::a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``), 6to4 (``2002:AABB:CCDD::``)
or NAT64 (``64:ff9b::a.b.c.d``); a host that resolves to one of those reaches the IPv4 address
where the network routes it, so each is judged by the address inside.
"""

from __future__ import annotations

import ipaddress

import pytest
from yarl import URL

from gateway import MediaFetchError, MediaSource

SOURCE = MediaSource(hosts=frozenset({"api.twilio.com"}))


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:127.0.0.1",
        "::127.0.0.1",  # IPv4-compatible
        "::10.0.0.1",
        "::ffff:0:127.0.0.1",  # IPv4-translated
        "::ffff:0:169.254.169.254",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "64:ff9b::10.0.0.1",  # NAT64 (well-known prefix)
        "64:ff9b::169.254.169.254",
        "64:ff9b:1::808:808",  # NAT64 (a local-use prefix: never public)
    ],
)
def test_an_ipv6_address_holding_a_private_ipv4_one_is_refused(address: str) -> None:
    assert not SOURCE.allows_address(address)
    literal = MediaSource(hosts=frozenset({str(ipaddress.ip_address(address))}))  # as yarl spells it
    with pytest.raises(MediaFetchError, match="not public"):
        literal.check(URL(f"https://[{address}]/media"))


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::", "64:ff9b::8.8.8.8"]
)
def test_public_addresses_stay_allowed(address: str) -> None:
    assert SOURCE.allows_address(address)
