"""Conversions from the domain (store rows, rules verdicts) to the output contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from modelreg import rules
from modelreg.deployed_unit import deployed_unit
from modelreg.reasons import Reason
from modelreg.rules import Deployability, RecordState
from modelreg.schemas.output import (
    CardClaimOut,
    CardFinding,
    CardValidateOutput,
    DeployabilityOut,
    EventOut,
    FileOut,
    GateOutput,
    ImportedRunOut,
    PromotionOut,
    ReasonOut,
    RecordOut,
    RunOut,
    StateOut,
    StatusOutput,
    StepOut,
    SuiteOutput,
    TargetOut,
    TargetsOutput,
    TokenOut,
    WebhookDeliveryOut,
    WebhookOut,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.hooks import StoredWebhook
    from modelreg.registry.rows import (
        Event,
        ForeignRun,
        Promotion,
        StoredFile,
        StoredToken,
        Verification,
    )
    from modelreg.schemas.suite import Suite
    from modelreg.targets import Target


def _reason_out(r: Reason) -> ReasonOut:
    detail = dict(r.detail) if r.detail is not None else None
    return ReasonOut(code=r.code.value, message=r.message, next=StepOut.of(r.step), detail=detail)


def deployability_out(d: Deployability) -> DeployabilityOut:
    return DeployabilityOut(
        record_id=d.record_id,
        target=d.target,
        deployable=d.deployable,
        stale=d.stale,
        held=d.held,
        reasons=[_reason_out(r) for r in d.reasons],
        run_id=d.run_id,
        verified_at=d.verified_at,
    )


def promotion_out(p: Promotion) -> PromotionOut:
    return PromotionOut(
        model_id=p.model_id,
        target=p.target,
        record_id=p.record_id,
        previous_record_id=p.previous_record_id,
        action="rollback" if p.action == "rollback" else "promote",
        at=p.at,
        actor=p.actor,
        why=p.why,
        owner=p.owner,
        limitations=list(p.limitations),
        retest_by=p.retest_by.astimezone(UTC).date() if p.retest_by is not None else None,
        forced=list(p.forced),
        label=p.label,
    )


def _state_out(s: RecordState) -> StateOut:
    return StateOut(state=s.state.value, reason=s.reason, at=s.at, actor=s.actor)


def record_out(record: Record, files: Sequence[StoredFile], state: RecordState) -> RecordOut:
    return RecordOut(
        record_id=record.id,
        model_id=record.model_id,
        version=record.version,
        handle=record.handle,
        format=record.format,
        source=record.source,
        license=record.license,
        location=str(record.root),
        files=[FileOut(path=f.path, bytes=f.bytes, sha256=f.sha256) for f in files],
        state=_state_out(state),
        effective_state=rules.effective_state(state, record.hold_reasons).value,
        hold_reasons=list(record.hold_reasons),
        created_at=record.created_at,
        created_by=record.created_by,
    )


def event_out(e: Event) -> EventOut:
    return EventOut(
        id=e.id,
        at=e.at,
        actor=e.actor,
        kind=e.kind,
        record_id=e.record_id,
        target=e.target,
        why=e.why,
        summary=event_summary(e.kind, e.detail),
        detail=e.detail,
    )


def event_summary(kind: str, detail: Any) -> str:
    """An event in words, from its structured detail (the verify summary by the same rule
    that decides deployability: a skipped check never reads as a failure). Events imported
    from a file are not trusted to be well formed: a detail that cannot be read says so."""
    try:
        return _event_summary(kind, detail) if isinstance(detail, dict) else ""
    except (AttributeError, KeyError, TypeError, ValueError):
        return "(detail not readable)"


def _event_summary(kind: str, detail: dict[str, Any]) -> str:
    if kind == "verify":
        blocking = detail.get("blocking")
        if blocking is None:  # events written before the rules module: recompute
            checks = detail.get("checks", {})
            verdict = rules.run_verdict((c, True, o, None) for c, o in checks.items())
            blocking = [b.describe() for b in verdict.blocking]
        said = "passed" if not blocking else "failed: " + ", ".join(blocking)
        if detail.get("exploratory"):
            what = {
                "investigate": "investigation",
                "drill": "rollback drill",
            }.get(str(detail.get("purpose")), "one-off run")
            return f"{what} of {detail.get('suite')} {said} (not counted: changes no verdict)"
        return said
    previous = detail.get("previous_record_id")
    if kind in ("promote", "rollback"):
        said = f"was {previous}" if previous else "first production record"
        if detail.get("label"):
            said += f"; labelled {detail['label']}"
        if detail.get("forced"):
            # First: a table cut to the terminal's width keeps it.
            said = f"FORCED (break glass), not deployable: {'; '.join(detail['forced'])}; {said}"
        return said
    if kind == "add" and detail.get("hold_reasons"):
        return f"on hold: {'; '.join(detail['hold_reasons'])}"
    if kind == "locate":
        return "can be fetched from " + ", ".join(detail.get("added", []))
    if kind == "upload-run":
        checks = ", ".join(f"{c}={o}" for c, o in sorted(detail.get("checks", {}).items()))
        signer = detail.get("signed_by")
        trust = (
            f"signed by trusted key {signer}"
            if signer
            else "signed, not checked: the target trusts no verifier keys"
            if detail.get("signed")
            else "unsigned: never counted"
        )
        return f"uploaded run from {detail.get('host')} ({checks}): {trust}"
    if kind in ("suite-attach", "suite-detach"):
        sha = str(detail.get("suite_sha256", ""))[:16]
        said = f"suite {detail.get('name') or ''} sha256:{sha}".replace("  ", " ")
        if detail.get("changes"):
            said += ": " + "; ".join(detail["changes"])
        if detail.get("weakens"):
            said += " — WEAKENS: " + "; ".join(detail["weakens"])
        return said
    if kind == "rollback-drill":
        cases = ", ".join(f"{c} {o}" for c, o in sorted(detail.get("cases", {}).items()))
        said = "passed" if detail.get("passed") else "FAILED"
        return f"drill run {detail.get('run_id')}: {said}" + (f" ({cases})" if cases else "")
    if kind == rules.RELAXATION_ACCEPTED:
        changes = detail.get("changes", [])
        shown = "; ".join(
            rules.Relaxation(c["what"], c["before"], c["after"]).describe() for c in changes
        )
        return f"accepted a gate relaxed after failure: {shown}"
    if kind == "hold" and detail.get("rolled_back_to"):
        return f"rolled back from (to {detail['rolled_back_to']} on {detail.get('target')})"
    return ""


def targets_output(found: dict[str, Target], *, here: bool = False) -> TargetsOutput:
    """Targets as the output contract shows them, with their origin (builtin, registry) and,
    with ``here``, whether the host answering is one of their hosts (``targets.for_host``:
    shown, never part of a verdict)."""
    from modelreg.targets import for_host

    return TargetsOutput(
        targets=[
            TargetOut(
                name=t.name,
                kind=t.kind,
                description=t.description,
                memory_bytes=t.memory_bytes,
                neuron_cores=t.neuron_cores,
                hbm_bytes=t.hbm_bytes,
                is_local=for_host(t).is_local if here else None,
                origin=t.origin,
                cpu_flags=sorted(t.cpu_flags) if t.cpu_flags is not None else None,
                runtime=dict(t.runtime),
                unit=deployed_unit(t),
                spec_sha256=t.spec_sha256,
            )
            for t in found.values()
        ]
    )


def _token_out(t: StoredToken) -> TokenOut:
    return TokenOut(
        name=t.name,
        role=t.role,
        created_at=t.created_at,
        created_by=t.created_by,
        revoked_at=t.revoked_at,
        revoked_by=t.revoked_by,
    )


def _webhook_out(h: StoredWebhook) -> WebhookOut:
    from modelreg.urls import redact_url

    last = h.last
    return WebhookOut(
        id=h.id,
        url=redact_url(h.url),
        events=list(h.events),
        created_at=h.created_at,
        created_by=h.created_by,
        removed_at=h.removed_at,
        removed_by=h.removed_by,
        deliveries=dict(sorted(h.counts.items())),
        last_delivery=None
        if last is None
        else WebhookDeliveryOut(
            event=last.event_kind,
            status=last.status,
            attempts=last.attempts,
            at=last.at,
            http_status=last.http_status,
            error=last.error,
        ),
    )


def _origin(origin: str) -> Literal["imported", "uploaded"]:
    return "uploaded" if origin == "uploaded" else "imported"


def _imported_out(run: ForeignRun, counted: bool) -> ImportedRunOut:
    first = run.checks[0] if run.checks else None
    return ImportedRunOut(
        run_id=run.run_id,
        target=run.target,
        origin=_origin(run.origin),
        origin_detail=run.origin_detail,
        host=first.host if first else "",
        fingerprint=first.fingerprint if first else {},
        checks=[c.result for c in run.checks],
        signed=run.signed,
        signed_by=run.signer_key_id,
        counted=counted,
        at=run.created_at,
    )


def _runs_out(
    verifications: Sequence[Verification],
    foreign: Sequence[ForeignRun] = (),
    exploratory: Mapping[str, str] | None = None,
) -> list[RunOut]:
    one_off = dict(exploratory or {})
    origins = {r.run_id: r for r in foreign}
    runs: dict[str, RunOut] = {}
    for v in verifications:
        run = runs.get(v.run_id)
        if run is None:
            elsewhere = origins.get(v.run_id)
            run = runs[v.run_id] = RunOut(
                run_id=v.run_id,
                target=v.target,
                host=v.host,
                fingerprint=v.fingerprint,
                checks=[],
                origin=_origin(elsewhere.origin) if elsewhere else "local",
                origin_detail=elsewhere.origin_detail if elsewhere else None,
                exploratory=v.run_id in one_off,
                purpose=one_off.get(v.run_id),
            )
        run.checks.append(v.result)
    return list(runs.values())


def _total_parameters(record: Record) -> int | None:
    return record.manifest.parameters.total.value


def _bits_per_weight(record: Record) -> float | None:
    quant = record.manifest.quantization
    return quant.bits_per_weight if quant else None


def _suite_output(
    model_id: str | None,
    action: str,
    suite: Suite | None,
    message: str,
    changes: tuple[list[str], list[str]] = ([], []),
) -> SuiteOutput:
    return SuiteOutput(
        changes=changes[0],
        weakens=changes[1],
        model_id=model_id,
        action="attach" if action == "attach" else "detach" if action == "detach" else "check",
        name=suite.name if suite else None,
        sha256=suite.digest() if suite else None,
        cases=len(suite.cases) if suite else 0,
        subsets=sorted({c.subset for c in suite.cases}) if suite else [],
        message=message,
    )


def _card_output(
    path: Path, report: Any, record_id: str | None, held: str | None
) -> CardValidateOutput:
    return CardValidateOutput(
        card=str(path),
        record_id=record_id,
        clean=not report.errors,
        missing=report.missing,
        held=held,
        checked=report.checked,
        findings=[
            CardFinding(
                severity=f.severity,
                field=f.field,
                message=f.message,
                expected=f.expected,
                found=f.found,
                line=f.line,
                quote=f.quote,
            )
            for f in report.findings
        ],
        claims=[
            CardClaimOut(kind=c.kind, value=c.value, line=c.line, quote=c.quote, where=c.where)
            for c in report.claims
        ],
    )


def _gate_of(
    status: StatusOutput, model_id: str, target: str, sha256: str, accept_forced: bool = False
) -> GateOutput:
    """The deploy gate's answer from the status of one (model, target). ``accept_forced``:
    the caller or the target accepts a production record forced there while only stale."""

    def fail(message: str, step: Step | None, record_id: str | None) -> GateOutput:
        reason = ReasonOut(code="gate", message=message, next=StepOut.of(step))
        return GateOutput(
            model_id=model_id,
            target=target,
            sha256=sha256,
            passed=False,
            record_id=record_id,
            reasons=[reason],
        )

    if not status.entries:
        return fail(
            f"nothing is production for {model_id} on {target}",
            Step("promote", "promote a record", ref=None, target=target),
            None,
        )
    (entry,) = status.entries
    record = entry.record
    if sha256 not in {f.sha256 for f in record.files}:
        return fail(
            f"sha256 {sha256} is not a file of {record.record_id}, the production record "
            f"for {model_id} on {target} (its files: "
            + ", ".join(f"{f.path} {f.sha256}" for f in record.files)
            + "); deploy the production record's files, or promote the record you mean to deploy",
            None,
            record.record_id,
        )
    verdict = entry.deployability
    forced = rules.gate_passes_forced(
        verdict.deployable, [r.code for r in verdict.reasons], bool(entry.forced), accept_forced
    )
    if (verdict.deployable or forced) and entry.fetch_from is None:
        return fail(
            f"{record.record_id} is deployable on {target} but no recorded location is "
            f"verified to hold its files ({entry.unfetchable}): nothing could fetch what the "
            "gate passes",
            Step(
                "locate",
                "check a copy from a host that can read it",
                ref=record.record_id,
                check=None,
            ),
            record.record_id,
        )
    return GateOutput(
        model_id=model_id,
        target=target,
        sha256=sha256,
        passed=verdict.deployable or forced,
        record_id=record.record_id,
        reasons=verdict.reasons
        + (
            [
                ReasonOut(
                    code="gate",
                    message=f"{record.record_id} was forced to production by a break-glass "
                    "rollback and is not deployable: the gate passes it only where forced "
                    "entries are accepted (the caller's `accept_forced`, or the target's "
                    "`accept_forced: true`)",
                )
            ]
            if entry.forced and not forced and not verdict.deployable
            else []
        ),
        forced=forced,
    )
