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


def _plan_message(model_id: str, target: str, plan: _Plan) -> str:
    """The plan in one sentence (what an apply of it does)."""
    if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
        return _already_rolled_back(model_id, target, plan.history[-1])
    assert plan.candidate is not None and plan.current is not None
    return (
        f"rollback would make {plan.candidate.id} production for {model_id} on {target} "
        f"instead of {plan.current.id}, and hold {plan.current.id}"
    )


def _already_rolled_back(model_id: str, target: str, last: Promotion) -> str:
    return (
        f"already rolled back: {last.record_id} is production for {model_id} on {target} since "
        f"{last.at:%Y-%m-%d %H:%M} UTC (rolled back from {last.previous_record_id} by "
        f"{last.actor}: {last.why}) and deployable; nothing changed"
    )
