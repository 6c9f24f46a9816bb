"""Who is acting: the identity every gate, tool and approval reads."""

from __future__ import annotations

import json
import re

from pydantic import ConfigDict, Field, field_validator

from ._models import PositionalModel

__all__ = ["Actor"]

MAX_IDENTITY_LENGTH = 256
"""Characters in an actor id or a tenant reference."""

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters (C0, DEL, C1) and lone surrogates: never part of an id or a tenant."""

_SEPARATOR = "\x1f"


def _actor_key(actor_id: str, tenant_ref: str | None) -> str:
    r"""Who this is across tenants, as one string that no other (id, tenant) pair gives.

    The historic form, ``id`` or ``tenant + "\x1f" + id``, is kept for every pair without
    control characters (every pair a validated ``Actor`` holds), so keys stored by earlier
    versions (a thread's owner in Redis) still match. It can hold at most one ``\x1f``. A pair
    that does hold control characters (only an ``Actor`` built without validation) is encoded as
    two ``\x1f`` and its JSON, which no historic key starts with and which escapes every control
    character, so it can never collide with another pair.
    """
    if _UNSAFE.search(actor_id) is None and (tenant_ref is None or _UNSAFE.search(tenant_ref) is None):
        return actor_id if tenant_ref is None else f"{tenant_ref}{_SEPARATOR}{actor_id}"
    return _SEPARATOR * 2 + json.dumps([tenant_ref, actor_id])


class Actor(PositionalModel):
    """The person or system a turn acts for.

    Identity comes from here only: a tool scopes its work with ``ctx.actor``, never with ids the
    model put in its arguments. ``id`` and ``tenant_ref`` hold no control characters and no lone
    surrogates, and are at most 256 characters long: every resolver refuses a credential that
    names anything else.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=MAX_IDENTITY_LENGTH)
    """Stable identifier (``anon:...``, ``whatsapp:+E164``, an app's user id)."""
    roles: list[str] = Field(default_factory=list)
    """Roles the gates intersect with a tool's ``roles``."""
    tenant_ref: str | None = Field(default=None, max_length=MAX_IDENTITY_LENGTH)
    """The tenant the actor belongs to, when the app is multi-tenant."""

    @field_validator("id", "tenant_ref")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and _UNSAFE.search(value) is not None:
            raise ValueError("must not contain control characters or lone surrogates")
        return value

    @field_validator("roles")
    @classmethod
    def _printable_roles(cls, value: list[str]) -> list[str]:
        # Roles come from token claims and proxy headers too: held to the same rule as the id.
        for role in value:
            if _UNSAFE.search(role) is not None:
                raise ValueError("a role must not contain control characters or lone surrogates")
        return value

    @property
    def key(self) -> str:
        """Who this is across tenants: the id, qualified by the tenant when there is one.

        Ownership compares keys, not ids: apps often reuse user ids across tenants. Two actors
        have the same key only when they have the same id and the same tenant.
        """
        return _actor_key(self.id, self.tenant_ref)
