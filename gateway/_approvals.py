"""``ApprovalPolicy``: who may decide an action, and for how long it waits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tools import Actor, Tool, UserError

from .stores import ApprovalRecord

__all__ = ["REQUESTER", "ApprovalPolicy", "ApprovalRule"]

REQUESTER = "requester"
"""The approver value meaning "the person whose turn asked for the action"."""


@dataclass(frozen=True, kw_only=True)
class ApprovalRule:
    """How one tool's calls are approved.

    Attributes:
        approver: ``"requester"``, or a role whose members decide (the requester alone cannot,
            unless they hold the role: four eyes).
        ttl: Seconds a request waits before it expires and the model is told so.
    """

    approver: str = REQUESTER
    ttl: float = 24 * 3600.0

    def __post_init__(self) -> None:
        if not isinstance(self.approver, str) or not self.approver:
            raise UserError("ApprovalRule.approver must be 'requester' or a role name")
        if isinstance(self.ttl, bool) or not isinstance(self.ttl, int | float) or self.ttl <= 0:
            raise UserError("ApprovalRule.ttl must be a positive number of seconds")


@dataclass(frozen=True, kw_only=True)
class ApprovalPolicy:
    """Decides who approves each action tool and how long a request waits.

    Attributes:
        default: The rule for tools without one of their own (the requester, 24 h).
        rules: Per-tool rules, by tool name.
        allow_remember: Whether a decision may ``remember`` (approve later calls of the same
            tool in the same thread without asking).
    """

    default: ApprovalRule = field(default_factory=ApprovalRule)
    rules: Mapping[str, ApprovalRule] = field(default_factory=dict)
    allow_remember: bool = True

    def rule_for(self, tool: Tool) -> ApprovalRule:
        """The rule that applies to ``tool``."""
        return self.rules.get(tool.name, self.default)

    def can_decide(self, actor: Actor, approval: ApprovalRecord) -> bool:
        """Whether ``actor`` may decide ``approval``.

        The requester may, or a member of the approver role; in the requester's tenant either way.
        """
        if actor.tenant_ref != approval.requester_tenant:
            return False
        if approval.approver == REQUESTER:
            return actor.id == approval.requester_id
        return approval.approver in actor.roles

    def approver_roles(self) -> frozenset[str]:
        """Every role that approves some tool (its members may read the threads they decide in)."""
        roles = {rule.approver for rule in (self.default, *self.rules.values())}
        return frozenset(roles - {REQUESTER})
