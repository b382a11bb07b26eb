"""What a change of the gate does to production, said before anyone finds out from the gate.

A suite attached or detached, a target redefined or removed, a trusted key added or taken away:
each can make production entries (model × target) stale or failing at once. The verdicts are
materialised in the transaction of every write (``modelreg.registry.verdicts.settle``), so the
answer is read, never re-derived: the production entries' stored verdicts before the change,
and again after it has settled, in the same transaction under the settling lock — what a reader
sees the moment it commits. A dry run is the same transaction rolled back (``Store.write``'s
``dry_run``): the same answer, nothing written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelreg.api.views import deployability_out
from modelreg.schemas.output import ProductionChangeOut, ReasonOut, StepOut
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.registry.reads import Reads
    from modelreg.registry.rows import Promotion
    from modelreg.registry.writes import Writes
    from modelreg.rules import Deployability


@dataclass(frozen=True)
class ProductionWatch:
    """The production entries a change may affect, with their verdicts before it."""

    promotions: tuple[Promotion, ...]
    before: dict[tuple[str, str], Deployability]


def watch(tx: Writes, promotions: Sequence[Promotion]) -> ProductionWatch:
    """Take the settling lock (no other write settles a verdict until this one commits) and
    read the stored verdicts of ``promotions``' records on their targets."""
    from modelreg.registry.verdicts import stored

    tx.lock_settling()
    return ProductionWatch(tuple(promotions), stored(tx, _pairs(promotions)))


def production_changes(tx: Writes, watched: ProductionWatch) -> list[ProductionChangeOut]:
    """Settle what ``tx`` wrote and return every watched production entry whose verdict it
    changed: before and after in one word, the reasons now, and the step that clears them."""
    return _diff(watched, tx.verdicts(_pairs(watched.promotions)))


def production_now(reads: Reads, model_ids: Sequence[str]) -> list[Promotion]:
    """Every production entry of these models."""
    return reads.productions_of(sorted(set(model_ids)))


def production_on(reads: Reads, targets: Sequence[str]) -> list[Promotion]:
    """Every production entry on these targets."""
    found: list[Promotion] = []
    for target in sorted(set(targets)):
        found += reads.productions(None, target)
    return found


def _pairs(promotions: Sequence[Promotion]) -> list[tuple[str, str]]:
    return [(p.record_id, p.target) for p in promotions]


def _diff(
    watched: ProductionWatch, after: dict[tuple[str, str], Deployability]
) -> list[ProductionChangeOut]:
    found = []
    for p in watched.promotions:
        old = deployability_out(watched.before[(p.record_id, p.target)])
        new = deployability_out(after[(p.record_id, p.target)])
        if (old.now, [r.code for r in old.reasons]) == (new.now, [r.code for r in new.reasons]):
            continue
        found.append(
            ProductionChangeOut(
                model_id=p.model_id,
                target=p.target,
                record_id=p.record_id,
                before=old.now,
                after=new.now,
                reasons=new.reasons,
                next=None if new.deployable else _next(new.reasons, p.record_id, p.target),
            )
        )
    return found


def _next(reasons: Sequence[ReasonOut], record_id: str, target: str) -> StepOut:
    """The re-verify the verdict itself names (the rules' own step: with a signing key where
    the target demands one), else the first step it names, else a verify of the record on
    the target. Every reason keeps its own step in ``reasons``."""
    steps = [r.next for r in reasons if r.next is not None]
    for step in steps:
        if step.action == "verify":
            return step
    return steps[0] if steps else StepOut(**Step("verify", ref=record_id, target=target).json())
