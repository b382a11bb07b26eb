"""A rollback plan as read from one view of the registry: the decision, and the records it
names with their readiness; and how it is said."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelreg import rules

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.rows import Promotion


@dataclass(frozen=True)
class _Plan:
    """A rollback decision (``rules.decide_rollback``), with the records and readiness it was
    decided from — worked out over one consistent view of the model."""

    history: list[Promotion]
    decision: rules.RollbackDecision
    current: Record | None
    current_ready: rules.Readiness | None
    candidate: Record | None
    candidate_ready: rules.Readiness | None
    # The candidate was named (``to``), not chosen as the newest earlier one that can serve.
    named: bool = False


def _plan_message(model_id: str, target: str, plan: _Plan) -> str:
    """The plan in one sentence (what an apply of it does)."""
    if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
        return _already_rolled_back(model_id, target, plan.history[-1])
    assert plan.candidate is not None and plan.current is not None
    forced = "break glass: " if plan.decision.forced else ""
    return (
        f"{forced}rollback would make {_named(plan.candidate)} production for {model_id} on "
        f"{target} instead of {_named(plan.current)}, and hold it"
    )


def _named(record: Record) -> str:
    """A record as a person reads it at 3 a.m.: its version handle and its id."""
    return f"{record.handle} ({record.id})" if record.handle else record.id


def _already_rolled_back(model_id: str, target: str, last: Promotion) -> str:
    return (
        f"nothing changed: already rolled back to {last.record_id} on {target} at "
        f"{last.at:%Y-%m-%d %H:%M} UTC ({last.actor}: {last.why}), and it is deployable; to go "
        "further back, roll back to an earlier record (`earlier` lists them)"
    )
