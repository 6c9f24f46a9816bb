"""Who is acting: the identity every gate, tool and approval reads."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from ._models import PositionalModel

__all__ = ["Actor"]


class Actor(PositionalModel):
    """The person or system a turn acts for.

    Identity comes from here only: a tool scopes its work with ``ctx.actor``, never with ids the
    model put in its arguments.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256)
    """Stable identifier (``anon:...``, ``whatsapp:+E164``, an app's user id)."""
    roles: list[str] = Field(default_factory=list)
    """Roles the gates intersect with a tool's ``roles``."""
    tenant_ref: str | None = None
    """The tenant the actor belongs to, when the app is multi-tenant."""

    @property
    def key(self) -> str:
        """Who this is across tenants: the id, qualified by the tenant when there is one.

        Ownership compares keys, not ids: apps often reuse user ids across tenants.
        """
        return self.id if self.tenant_ref is None else f"{self.tenant_ref}\x1f{self.id}"
