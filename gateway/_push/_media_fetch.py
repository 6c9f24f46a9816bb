"""``fetch_media``: a provider's media (a WhatsApp photo, a Telegram document) into ``Attachments``.

A provider's webhook names its media by URL (Twilio's ``MediaUrl0``, the Graph API's answer, a
Bot API file path). The URL comes from a request anyone could forge if a signature check were
ever missed, so fetching it is guarded, not trusted (no SSRF):

- only the provider's own hosts (``MediaSource.hosts``), over HTTPS;
- every address a host name resolves to must be public (the check runs in the connector's
  resolver, when connecting, so a name that changes its answer between a check and the connect
  gains nothing); an IP-literal host is checked the same;
- redirects are followed by hand, each hop checked as the first, at most ``max_redirects``;
  credentials go only to the first URL's host (a redirect to a CDN gets none);
- the body is counted while it streams and the reading stops at the size limit; the type comes
  from the bytes (``Attachments.store_upload``).

Tests serve the provider on loopback: they pass a ``MediaSource`` naming ``127.0.0.1`` with
``allow_loopback=True`` and ``https_only=False``; the defaults of every channel allow neither.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from tools import Actor

from .._attachments import Attachments
from .._errors import MediaFetchError
from ..events import Attachment

__all__ = ["MediaFetchError", "MediaSource", "ProviderMedia", "fetch_media"]

_CHUNK = 64 * 1024
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.IPv6Network("64:ff9b:1::/48")
"""A network's own translation prefix (RFC 8215): never public, whatever it embeds."""


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, translated, 6to4, NAT64), or ``None``.

    Where the network routes those (a tunnel, a NAT64 gateway) a connection reaches the IPv4
    address: it is the one to judge.
    """
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_TRANSLATED or ip in _NAT64:
        return low
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # not :: nor ::1, which are IPv6's own
        return low
    return None


@dataclass(frozen=True, kw_only=True)
class MediaSource:
    """Where one provider's media may be fetched from.

    Args:
        hosts: Host names allowed (exact, lower case; ``.example.com`` allows its subdomains).
        https_only: Refuse plain ``http`` URLs.
        allow_loopback: Accept loopback addresses (tests serving the provider on 127.0.0.1 only).
        max_redirects: Redirects followed, each checked like the first URL.
    """

    hosts: frozenset[str]
    https_only: bool = True
    allow_loopback: bool = False
    max_redirects: int = 3

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` is one of the provider's."""
        host = host.lower().rstrip(".")
        return host in self.hosts or any(h.startswith(".") and host.endswith(h) for h in self.hosts)

    def allows_address(self, address: str) -> bool:
        """Whether a connection may go to ``address`` (public, or loopback when allowed)."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address):
            if ip in _LOCAL_NAT64:
                return False
            ip = _embedded_ipv4(ip) or ip
        if ip.is_loopback:
            return self.allow_loopback
        return ip.is_global

    def check(self, url: URL) -> None:
        """Refuse a URL this source does not allow.

        Raises:
            MediaFetchError: Not HTTPS (when required), not a provider host, or a literal address
                that is not public.
        """
        if url.scheme not in ("https", "http") or (self.https_only and url.scheme != "https"):
            raise MediaFetchError(f"media URLs must be https, not {url.scheme or 'none'}")
        host = url.raw_host or ""
        if not self.allows_host(host):
            raise MediaFetchError(f"media host {host[:100]!r} is not the provider's")
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return  # a name: its addresses are checked as it is resolved
        if not self.allows_address(host.strip("[]")):
            raise MediaFetchError(f"media address {host[:100]!r} is not public")


@dataclass(frozen=True, kw_only=True)
class ProviderMedia:
    """One media item a provider's message named, fetched once its sender and thread are known."""

    fetch: Callable[[Actor, str], Awaitable[Attachment]]
    """``(owner, thread_id)`` -> the stored attachment (``fetch_media`` with the provider's credentials)."""
    kind: str = ""
    """What the provider called it (``image/jpeg``, ``photo``...), for the log."""


class _PublicResolver(AbstractResolver):
    """The default resolver, keeping only the addresses the source allows (none left: refused)."""

    def __init__(self, source: MediaSource) -> None:
        self._source = source
        self._inner = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        allowed = [entry for entry in found if self._source.allows_address(entry["host"])]
        if not allowed:
            raise OSError(f"{host} resolves to no public address")
        return allowed

    async def close(self) -> None:
        await self._inner.close()


async def _body(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    async for chunk in response.content.iter_chunked(_CHUNK):
        yield chunk


async def fetch_media(
    attachments: Attachments,
    *,
    url: str,
    source: MediaSource,
    actor: Actor,
    thread_id: str | None,
    name: str = "",
    claimed_mime: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> Attachment:
    """Fetch a provider's media and store it as ``actor``'s attachment.

    Args:
        attachments: The app's attachments (their size limit and accepted types apply).
        url: The media URL the provider gave.
        source: The provider's hosts (and, in tests, loopback).
        actor: The sender (the attachment's owner).
        thread_id: Their conversation (erasing it erases the file).
        name: A file name, when the provider gave one.
        claimed_mime: The type the provider claimed; the bytes must agree.
        headers: Sent to the first URL's host only (a bearer token, Twilio's basic auth).
        timeout: Seconds the whole fetch may take.

    Raises:
        MediaFetchError: A host or address not allowed, too many redirects, or the provider failed.
        AttachmentTooLargeError: The media is over the size limit (reading stopped there).
        AttachmentTypeError: The bytes are no accepted type, or not the claimed one.
    """
    target = URL(url)
    origin = target.raw_host
    connector = aiohttp.TCPConnector(resolver=_PublicResolver(source), force_close=True)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        for _ in range(source.max_redirects + 1):
            source.check(target)
            credentials: dict[str, Any] = {}
            if target.raw_host == origin:
                credentials = {"headers": dict(headers or {})}
            try:
                async with session.get(target, allow_redirects=False, **credentials) as response:
                    if response.status in _REDIRECTS and "Location" in response.headers:
                        target = target.join(URL(response.headers["Location"]))
                        continue
                    if response.status != 200:
                        raise MediaFetchError(f"the provider answered {response.status} for its media")
                    attachments.check_size(response.content_length)
                    return await attachments.store_upload(
                        actor, thread_id, name, claimed_mime or response.content_type, _body(response)
                    )
            except (aiohttp.ClientError, OSError) as exc:
                # aiohttp's text may carry the URL, and a URL may carry a token: not repeated.
                raise MediaFetchError(f"the provider's media could not be fetched ({type(exc).__name__})") from None
        raise MediaFetchError(f"the provider's media redirected more than {source.max_redirects} times")
