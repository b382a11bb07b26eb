"""Deploy decisions: promote (with its approval record and a releaser's acceptance of a gate
relaxed after a failure), hold, release, retire."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from modelreg import clock, config, reasons, rules
from modelreg.api.core import Core, _check_why
from modelreg.api.status import approval_out
from modelreg.api.views import promotion_out, record_out
from modelreg.errors import (
    InvalidInput,
    NotDeployable,
)
from modelreg.reasons import ReasonCode
from modelreg.rules import Deployability, RecordStateKind
from modelreg.schemas.output import (
    AcceptedRelaxationOut,
    PromoteOutput,
    RelaxationOut,
    StateChangeOutput,
    steps_out,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.api.rollback import Rollback
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.rows import Promotion
    from modelreg.registry.store import Store
    from modelreg.registry.writes import Writes
    from modelreg.targets import Target


# The drill suite's subset of the cases asked again: every one of them must pass.
DRILL_SUBSET = "rollback-drill"
# How much of an answer a drill's one-line finding quotes (the stored run keeps it whole).
DRILL_OUTPUT_CHARS = 200


def _approval(
    owner: str | None, limitations: Sequence[str], retest_by: date | None
) -> tuple[str | None, tuple[str, ...], datetime | None]:
    """The approval kept with a promotion, checked: a named owner, non-empty limitations (each
    bounded like a reason), a re-test day that has not passed (kept as its start, UTC)."""
    from modelreg.limits import ACTOR_MAX, MAX_LIMITATIONS, WHY_MAX, check_length

    if owner is not None:
        owner = owner.strip()
        if not owner:
            raise InvalidInput("the owner must not be empty", "name who answers for the release")
        check_length("owner", owner, ACTOR_MAX)
    kept: list[str] = []
    for limitation in limitations:
        text = limitation.strip()
        if not text:
            raise InvalidInput("a limitation must not be empty", "say what it is known not to do")
        check_length("limitation", text, WHY_MAX)
        if text not in kept:
            kept.append(text)
    if len(kept) > MAX_LIMITATIONS:
        raise InvalidInput(
            f"{len(kept)} limitations: at most {MAX_LIMITATIONS}", "say the rest in the card"
        )
    due = None
    if retest_by is not None:
        day = retest_by.astimezone(UTC).date() if isinstance(retest_by, datetime) else retest_by
        today = clock.utcnow().date()
        if day < today:
            raise InvalidInput(
                f"re-test date {day.isoformat()} is in the past (today is {today.isoformat()} UTC)",
                "give the day it must be tested again by",
            )
        due = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return owner, tuple(kept), due


def _label(label: str | None) -> str | None:
    """A promotion's label, checked: the grammar of a handle's last part (``release-14``), and
    never a version number (``v3`` names the third record added)."""
    from modelreg.limits import LABEL_MAX
    from modelreg.schemas.manifest import LABEL_RE, VERSION_LIKE_RE

    if label is None:
        return None
    if not LABEL_RE.fullmatch(label):
        raise InvalidInput(
            f"label {label[:80]!r} is not a label: letters, digits and ._- (at most "
            f"{LABEL_MAX}), starting with a letter or digit",
            "e.g. release-14",
        )
    if VERSION_LIKE_RE.fullmatch(label):
        raise InvalidInput(
            f"label {label!r} reads as a version number (MODEL@{label} names the record added "
            f"as {label})",
            "give another name, e.g. release-14",
        )
    return label


def _differs(
    approval: tuple[str | None, tuple[str, ...], datetime | None], kept: Promotion
) -> bool:
    """Whether an approval given says something else than the one ``kept`` was promoted with
    (what is not given says nothing)."""
    owner, limitations, retest_by = approval
    return (
        (owner is not None and owner != kept.owner)
        or (bool(limitations) and limitations != kept.limitations)
        or (retest_by is not None and retest_by != kept.retest_by)
    )


def _accepted_out(reason: reasons.Reason) -> AcceptedRelaxationOut:
    """What a releaser accepted: the terms and each change, from the reason's detail."""
    detail = dict(reason.detail or {})
    changes = detail.get("changes")
    return AcceptedRelaxationOut.model_validate(
        {
            "terms": str(detail.get("terms", "")),
            "suite": detail.get("suite"),
            "changes": [
                RelaxationOut.model_validate(
                    {k: c.get(k) for k in ("what", "before", "after", "failed_run")}
                )
                for c in (changes if isinstance(changes, list) else [])
                if isinstance(c, dict)
            ],
            "failed_runs": detail.get("failed_runs") or [],
        }
    )


def _accepted_text(accepted: Sequence[AcceptedRelaxationOut]) -> str:
    changes = [c for a in accepted for c in a.changes]
    return "; ".join(rules.Relaxation(c.what, c.before, c.after).describe() for c in changes)


class Deploy(Core):
    """Deploy decisions: promote, hold, release, retire. Collaborator: ``rollback`` (what a
    hold or retirement of production leaves to roll back to)."""

    def __init__(self, store: Store, url: str, *, rollback: Rollback) -> None:
        super().__init__(store, url)
        self._rollback = rollback

    def promote(
        self,
        ref: str,
        target: str,
        *,
        why: str | None = None,
        actor: str | None = None,
        owner: str | None = None,
        limitations: Sequence[str] = (),
        retest_by: date | None = None,
        accept_relaxed_gate: bool = False,
        label: str | None = None,
    ) -> PromoteOutput:
        """Make the record production for its model on ``target``. Refused (``NotDeployable``)
        unless it is deployable there now — decided inside the transaction that moves the
        pointer, with the target's current runtime fingerprint.

        ``owner``, ``limitations``, ``retest_by``: the approval kept with the promotion — who
        answers for it, what it is known not to do, the day it must be tested again by
        (``status`` says when that day has passed). ``label``: a name for the promotion
        (``release-14``); ``MODEL@LABEL`` then names this record wherever a record is asked
        for, until a newer promotion takes the label.

        ``accept_relaxed_gate`` (needs ``why``): when the only reasons it is not deployable are
        passes under gates weakened after it failed them (``gate_relaxed_after_failure``),
        record a releaser's acceptance of each (a ``gate-relaxation-accepted`` event), judge
        again and promote if that made it deployable — all in the one locked transaction.
        Any other reason refuses it as ever, with nothing written; nothing relaxed to accept
        is bad input."""
        _check_why(why, required="accepting a relaxed gate" if accept_relaxed_gate else None)
        approval = _approval(owner, limitations, retest_by)
        label = _label(label)
        record = self.get(ref)
        the_target = self.target(target)
        actor = actor or config.actor()
        accepted: list[AcceptedRelaxationOut] = []
        with self.store.locked(record.model_id) as tx:
            verdict = self._verdict(tx, record, target)
            current = tx.production(record.model_id, target)
            same = current is not None and current.record_id == record.id
            if (
                same
                and current is not None
                and (_differs(approval, current) or label not in (None, current.label))
            ):
                raise InvalidInput(
                    f"{record.id} is already production for {record.model_id} on {target} "
                    f"(since {current.at:%Y-%m-%d %H:%M} UTC); its approval and label are the "
                    "ones it was promoted with, and promoting it again changes nothing",
                    "promote it again without owner, limitations, re-test date or label",
                )
            if accept_relaxed_gate:
                accepted = self._accept_relaxed(tx, record, target, verdict, why, actor)
                verdict = self._verdict(tx, record, target)  # judged again, with them
            if not verdict.deployable:
                raise NotDeployable(record.id, target, verdict.reasons)
            said = (
                f"accepted a gate relaxed after failure on {target}: {_accepted_text(accepted)}; "
                if accepted
                else ""
            )
            today = clock.utcnow().date()
            if same and current is not None:
                return PromoteOutput(
                    changed=False,
                    message=f"{said}{record.id} is already production for {record.model_id} on "
                    f"{target} (since {current.at:%Y-%m-%d %H:%M} UTC); nothing changed",
                    promotion=promotion_out(current),
                    approval=approval_out(current, today),
                    accepted=accepted,
                )
            warnings = []
            if current is not None:
                previous = tx.records_by_id([current.record_id])[current.record_id]
                warnings.append(rules.attribution_warning(previous.manifest, record.manifest))
            warnings.append(license_warning(record.license, the_target))
            warning = "; ".join(w for w in warnings if w) or None
            promotion = tx.set_production(
                record,
                target,
                "promote",
                actor,
                why,
                owner=approval[0],
                limitations=approval[1],
                retest_by=approval[2],
                label=label,
            )
        return PromoteOutput(
            changed=True,
            message=f"{said}{record.id} is now production for {record.model_id} on {target} "
            f"(was {promotion.previous_record_id or 'none'})"
            + (f"; labelled {label}: {record.model_id}@{label} names it" if label else ""),
            promotion=promotion_out(promotion),
            warning=warning,
            approval=approval_out(promotion, today),
            accepted=accepted,
        )

    def _verdict(self, view: Reads, record: Record, target: str) -> Deployability:
        """The record's verdict on ``target`` as ``view`` stores it (a writing transaction's
        own writes settled first)."""
        return view.verdict(record.id, target)

    def _accept_relaxed(
        self,
        tx: Writes,
        record: Record,
        target: str,
        verdict: Deployability,
        why: str | None,
        actor: str,
    ) -> list[AcceptedRelaxationOut]:
        """Record the acceptance of every relaxed gate in ``verdict`` — only when those are
        all that keep the record from being deployable."""
        relaxed = [r for r in verdict.reasons if r.code is ReasonCode.GATE_RELAXED_AFTER_FAILURE]
        if len(relaxed) != len(verdict.reasons):
            raise NotDeployable(record.id, target, verdict.reasons)
        if not relaxed:
            raise InvalidInput(
                f"nothing to accept: {record.id} on {target} passed no gate that was relaxed "
                "after it failed it",
                step=Step(
                    "promote",
                    "promote it without accepting a relaxed gate",
                    ref=record.id,
                    target=target,
                ),
            )
        for reason in relaxed:
            tx.event(
                rules.RELAXATION_ACCEPTED,
                actor,
                record.id,
                target,
                why,
                dict(reason.detail or {}),
            )
        return [_accepted_out(r) for r in relaxed]

    def _change_state(
        self,
        ref: str,
        new: RecordStateKind,
        why: str,
        actor: str | None,
        detail: dict[str, Any] | None = None,
    ) -> StateChangeOutput:
        record = self.get(ref)
        action = {
            RecordStateKind.HELD: "hold",
            RecordStateKind.ACTIVE: "release",
            RecordStateKind.RETIRED: "retire",
        }[new]
        _check_why(why, required=action)
        with self.store.locked(record.model_id) as tx:
            current = tx.state(record.id)
            if current.state is RecordStateKind.RETIRED:
                raise InvalidInput(
                    f"record {record.id} is retired; retired records stay retired",
                    "retirement is final: the same bytes and facts added again are this record, "
                    "still retired — only a changed artifact or changed facts (a new build, "
                    "another source pin) make a new record",
                )
            if new is RecordStateKind.ACTIVE and current.state is not RecordStateKind.HELD:
                if record.hold_reasons:
                    # Held by its facts, not by a person: nothing a release writes changes them.
                    raise InvalidInput(
                        f"record {record.id} is held because its manifest does not know or "
                        f"contradicts facts: {'; '.join(record.hold_reasons)}",
                        "release cannot lift that (it lifts a hold someone put): add the artifact "
                        "again with the missing facts, as each reason says — the facts are the "
                        "record's identity, so that is a new record",
                    )
                raise InvalidInput(f"record {record.id} is not on hold (state: active)")
            tx.set_state(record, new, why, actor or config.actor(), detail)
            production_on = sorted(
                p.target for p in tx.productions(record.model_id) if p.record_id == record.id
            )
            out = record_out(record, tx.files([record.id])[record.id], tx.state(record.id))
        message = {
            "hold": f"{record.id} is on hold: {why}",
            "release": f"{record.id} released",
            "retire": f"{record.id} retired: {why}",
        }[action]
        steps: list[Step] = []
        if production_on and new is not RecordStateKind.ACTIVE:
            message += (
                f". WARNING: {record.id} is production for {record.model_id} on "
                f"{', '.join(production_on)} and is no longer deployable there — production is "
                f"still {record.id}"
            )
            for t in production_on:
                said, step = self._what_rollback_leaves(record.model_id, t)
                message += f"; on {t}: {said}"
                steps += [step] if step is not None else []
        if new is RecordStateKind.ACTIVE and record.hold_reasons:
            message += ". Still on hold for facts it does not know: " + "; ".join(
                record.hold_reasons
            )
        return StateChangeOutput(
            record=out,
            action=action,
            changed=True,
            production_on=production_on,
            message=message,
            next_steps=steps_out(steps),
        )

    def _what_rollback_leaves(self, model_id: str, target: str) -> tuple[str, Step | None]:
        """Whether a rollback has a candidate once production is held, and the command."""
        apply = Step("rollback", model_id=model_id, target=target, why=None)
        plan = self._rollback.rollback_plan(model_id, target)
        if plan.decision == "rollback" and plan.candidate is not None:
            shown = plan.candidate.record
            return f"roll back to {shown.handle or shown.record_id} ({shown.record_id})", apply
        if plan.decision != "no_candidate":
            return plan.message, plan.next_steps[0].step() if plan.next_steps else None
        if not plan.rejected:
            return "nothing to roll back to: nothing was production there before it", None
        why = "; ".join(f"{r.handle or r.record_id}: {r.why}" for r in plan.rejected[:2])
        # break glass first (the one step that restores service now), else the first fix
        force = next((r.force for r in plan.rejected if r.force is not None), None)
        fix = next((r.next for r in plan.rejected if r.next is not None), None)
        step = force or fix
        return f"nothing to roll back to ({why})", step.step() if step else None

    def hold(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Put a record on hold: not deployable, not promotable, until released."""
        return self._change_state(ref, RecordStateKind.HELD, why, actor)

    def release(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Release a held record, saying why (facts missing from its manifest keep it on hold
        regardless)."""
        return self._change_state(ref, RecordStateKind.ACTIVE, why, actor)

    def retire(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Retire a record: kept with its evidence, never deployable or a rollback candidate."""
        return self._change_state(ref, RecordStateKind.RETIRED, why, actor)


def license_warning(license_id: str | None, target: Target) -> str | None:
    """What a target's license policy says of a license it lets through with a warning."""
    if not target.license_policy:
        return None
    from modelreg.license_policy import policy

    decided = policy(license_id, target.license_policy)
    return decided.reason if decided.decision == "warn" else None
