"""``RoleMap``: who a channel's people are, from configuration (``123=admin|ops,456=member``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tools import Actor

__all__ = ["RoleMap"]


class RoleMap:
    """Roles by a channel's own user key (a number, a user id); the others get ``default_roles``.

    With ``allow_unknown`` False, a key missing from ``roles`` is refused (``actor`` answers
    ``None``: the channel says so politely). ``normalize`` makes configured keys and looked-up
    keys comparable (``normalize_number`` for phone numbers).
    """

    def __init__(
        self,
        *,
        roles: Mapping[str, Sequence[str]] | None = None,
        default_roles: Sequence[str] = ("member",),
        allow_unknown: bool = True,
        normalize: Callable[[str], str] = str.strip,
    ) -> None:
        self.roles = {normalize(str(key)): list(values) for key, values in (roles or {}).items()}
        self.default_roles = list(default_roles)
        self.allow_unknown = allow_unknown

    def actor(self, key: str, actor_id: str) -> Actor | None:
        """The actor ``actor_id`` with ``key``'s roles, or ``None`` for an unknown key when those are refused."""
        roles = self.roles.get(key)
        if roles is None:
            if not self.allow_unknown:
                return None
            roles = self.default_roles
        return Actor(id=actor_id, roles=roles)
