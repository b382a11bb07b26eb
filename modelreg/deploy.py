"""Deploy-time questions answered against a target's *current* runtime.

The store knows records and evidence; this module adds what the target is now (its
fingerprint), so that evidence from an older runtime counts as stale everywhere: show, list,
promote, rollback.
"""

from __future__ import annotations

from collections.abc import Callable

from modelreg.errors import TargetNotFound
from modelreg.fingerprint import Fingerprint, runtime_fingerprint
from modelreg.manifests.card import VerifiedOn
from modelreg.manifests.diff import diff_manifests
from modelreg.registry.store import Deployability, Promotion, Record, Registry, RollbackPlan
from modelreg.targets import Target, get_target


def fingerprint_for(target: Target) -> Callable[[Record], Fingerprint]:
    cache: dict[str, Fingerprint] = {}

    def of(record: Record) -> Fingerprint:
        runtime = record.manifest.runtime.runtime
        if runtime not in cache:
            cache[runtime] = runtime_fingerprint(target, runtime)
        return cache[runtime]

    return of


def deployability(registry: Registry, record: Record, target_name: str) -> Deployability:
    """Deployability on a target by name; a target that is no longer defined is not one."""
    try:
        target = get_target(target_name)
    except TargetNotFound:
        return Deployability(
            record.id, target_name, False, [f"target {target_name!r} is no longer defined"]
        )
    return registry.deployability(record, target_name, fingerprint_for(target)(record))


def promote(
    registry: Registry, record: Record, target_name: str, actor: str, why: str | None
) -> tuple[Promotion, str | None]:
    """Promote, and say when the change from the current production record cannot be
    attributed to one variable (the promotion still happens: the gate is deployability)."""
    target = get_target(target_name)
    current = registry.production(record.model_id, target_name)
    warning = None
    if current is not None and current.record_id != record.id:
        warning = diff_manifests(
            registry.get(current.record_id).manifest, record.manifest
        ).attribution_warning
    promotion = registry.promote(record, target_name, actor, why, fingerprint_for(target)(record))
    return promotion, warning


def rollback_plan(registry: Registry, model_id: str, target_name: str) -> RollbackPlan:
    target = get_target(target_name)
    return registry.rollback_plan(model_id, target_name, fingerprint_for(target))


def records_on(
    registry: Registry, target_name: str, model_id: str | None = None
) -> list[tuple[Record, Deployability]]:
    """Every record verified on the target, with its deployability there now."""
    target = get_target(target_name)
    verified = registry.records_verified_on(target_name, model_id)
    verdicts = registry.deployability_many(verified, target_name, fingerprint_for(target))
    return list(zip(verified, verdicts, strict=True))


def stale_records(registry: Registry, target_name: str) -> list[Record]:
    """Records whose latest run on the target passed with a runtime that has since changed."""
    return [
        record
        for record, verdict in records_on(registry, target_name)
        if any(reason.startswith("stale:") for reason in verdict.reasons)
    ]


def verified_on(registry: Registry, record: Record) -> list[VerifiedOn]:
    """Where the record's latest run passed, when, on which host, under which runtime."""
    return [
        VerifiedOn(target, max(v.result.finished_at for v in run), run[0].host, run[0].fingerprint)
        for target, run in registry.passing_runs(record).items()
    ]
