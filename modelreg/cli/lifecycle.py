"""Deploy-time commands: targets, verify, promote, rollback, history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from modelreg import config
from modelreg.cli.commands import _deployability_json
from modelreg.cli.main import JsonOption, TargetOption, _registry, app
from modelreg.cli.render import emit_json, human_bytes, say, table
from modelreg.errors import InvalidInput

RecordArg = Annotated[str, typer.Argument(metavar="RECORD", help="Record id or prefix.")]
ModelArg = Annotated[str, typer.Argument(metavar="MODEL", help="Model id, org/name.")]
WhyOption = Annotated[str | None, typer.Option("--why", help="Why (kept in the event log).")]


@app.command()
def targets(json_out: JsonOption = False) -> int:
    """List the targets: this host (cpu), Inferentia2 profiles, user-defined ones."""
    from modelreg.targets import all_targets

    found = all_targets()
    if json_out:
        emit_json(
            [
                {
                    "name": t.name,
                    "kind": t.kind,
                    "description": t.description,
                    "memory_bytes": t.memory_bytes,
                    "neuron_cores": t.neuron_cores,
                    "hbm_bytes": t.hbm_bytes,
                    "is_local": t.is_local,
                    "origin": t.origin,
                    "cpu_flags": sorted(t.cpu_flags) if t.cpu_flags is not None else None,
                }
                for t in found.values()
            ]
        )
        return 0
    rows = [
        (
            t.name,
            t.kind,
            human_bytes(t.memory_bytes),
            t.neuron_cores or "",
            "yes" if t.is_local else "",
            t.description,
        )
        for t in found.values()
    ]
    print(table(rows, ["target", "kind", "memory", "cores", "here", "description"]))
    return 0


def _verification_json(report: Any) -> dict[str, Any]:
    return {
        "record_id": report.record.id,
        "model_id": report.record.model_id,
        "target": report.target.name,
        "run_id": report.run_id,
        "passed": report.passed,
        "deployability": _deployability_json(report.deployability),
        "checks": [r.model_dump(mode="json") for r in report.results],
    }


@app.command()
def verify(
    ctx: typer.Context,
    record_ref: Annotated[
        str | None, typer.Argument(metavar="[RECORD]", help="Record id or prefix.")
    ] = None,
    target: TargetOption = "cpu",
    stale: Annotated[
        bool,
        typer.Option("--stale", help="Re-verify every record whose evidence on TARGET is stale."),
    ] = False,
    path: Annotated[
        Path | None,
        typer.Option("--path", help="Where the files are on this host (default: where added)."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds a runtime check may take.")
    ] = 300.0,
    context: Annotated[
        int | None, typer.Option("--context", min=1, help="Context tokens for the memory check.")
    ] = None,
    memory_limit_gib: Annotated[
        float | None,
        typer.Option(
            "--memory-limit-gib",
            min=0.01,
            help="Address-space limit for runtime children; going over fails the check as crashed.",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Re-run the record's required checks on TARGET; exit 0 only if all passed."""
    if stale:
        if record_ref is not None:
            raise InvalidInput("give either RECORD or --stale, not both")
        limit = int(memory_limit_gib * 2**30) if memory_limit_gib else None
        return _verify_stale(ctx, target, timeout, context, json_out, limit)
    if record_ref is None:
        raise InvalidInput("give a RECORD to verify (or --stale --target T)")
    from modelreg.validators.child import RuntimeChild
    from modelreg.validators.llama_child import CHILD_ARGV

    # Started before the heavy imports below: llama_cpp loads while we open the registry.
    limit = int(memory_limit_gib * 2**30) if memory_limit_gib else None
    warm = RuntimeChild(CHILD_ARGV, memory_limit_bytes=limit)
    try:
        return _verify(ctx, warm, record_ref, target, path, timeout, context, json_out, limit)
    finally:
        warm.discard()


def _verify_stale(
    ctx: typer.Context,
    target: str,
    timeout: float,
    context: int | None,
    json_out: bool,
    memory_limit_bytes: int | None,
) -> int:
    from modelreg.targets import get_target
    from modelreg.validators.base import VerifyOptions
    from modelreg.validators.verify import verify_stale

    options = VerifyOptions(
        timeout_seconds=timeout, context=context, memory_limit_bytes=memory_limit_bytes
    )
    reports = verify_stale(_registry(ctx), get_target(target), config.actor(), options)
    if json_out:
        emit_json([_verification_json(r) for r in reports])
    else:
        if not reports:
            say(f"no stale evidence on {target}")
        for r in reports:
            state = (
                "deployable"
                if r.passed
                else "NOT deployable: " + "; ".join(r.deployability.reasons)
            )
            print(f"{r.record.id}  {r.record.model_id}  {state}")
    return 0 if all(r.passed for r in reports) else 1


def _verify(
    ctx: typer.Context,
    warm: Any,
    record_ref: str | None,
    target: str,
    path: Path | None,
    timeout: float,
    context: int | None,
    json_out: bool,
    memory_limit_bytes: int | None,
) -> int:
    assert record_ref is not None
    from modelreg.targets import get_target
    from modelreg.validators.base import VerifyOptions
    from modelreg.validators.verify import verify_record

    registry = _registry(ctx)
    record = registry.get(record_ref)
    report = verify_record(
        registry,
        record,
        get_target(target),
        config.actor(),
        path=path,
        options=VerifyOptions(
            timeout_seconds=timeout, context=context, memory_limit_bytes=memory_limit_bytes
        ),
        warm_llama_child=warm,
    )
    if json_out:
        emit_json(_verification_json(report))
    else:
        rows = [
            (r.check, r.outcome.value, r.classification or "", r.summary) for r in report.results
        ]
        print(table(rows, ["check", "outcome", "class", "summary"]))
        verdict = report.deployability
        if verdict.deployable:
            say(f"{record.id} is deployable on {target}")
        else:
            say(f"{record.id} is NOT deployable on {target}: {'; '.join(verdict.reasons)}")
    return 0 if report.passed else 1


@app.command()
def promote(
    ctx: typer.Context,
    record_ref: RecordArg,
    target: TargetOption,
    why: WhyOption = None,
    json_out: JsonOption = False,
) -> int:
    """Make RECORD production on TARGET (refused unless it is deployable there)."""
    from modelreg import deploy

    registry = _registry(ctx)
    record = registry.get(record_ref)
    promotion, warning = deploy.promote(registry, record, target, config.actor(), why)
    if warning:
        say(f"warning: {warning}")
    if json_out:
        emit_json(_promotion_json(promotion))
    else:
        previous = promotion.previous_record_id or "none"
        say(f"{record.id} is now production for {record.model_id} on {target} (was {previous})")
    return 0


def _promotion_json(p: Any) -> dict[str, Any]:
    return {
        "model_id": p.model_id,
        "target": p.target,
        "record_id": p.record_id,
        "previous_record_id": p.previous_record_id,
        "action": p.action,
        "at": p.at.isoformat(),
        "actor": p.actor,
        "why": p.why,
    }


def _record_brief(registry: Any, record: Any, target: str) -> dict[str, Any]:
    run = registry.latest_run(record.id, target)
    smoke = next((v.result for v in run if v.result.check.endswith("smoke")), None)
    return {
        "record_id": record.id,
        "model_id": record.model_id,
        "source": record.source,
        "location": str(record.root),
        "files": [
            {"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in record.manifest.files
        ],
        "verified_at": max((v.result.finished_at for v in run), default=None),
        "verified_on_host": run[0].host if run else None,
        "runtime": {
            k: smoke.evidence.get(k) for k in ("llama_cpp_python_version", "system_info", "load_ms")
        }
        if smoke
        else None,
        "smoke_output": [g.get("output") for g in smoke.evidence.get("generations", [])]
        if smoke
        else None,
    }


@app.command()
def rollback(
    ctx: typer.Context,
    model: ModelArg,
    target: TargetOption,
    apply: Annotated[bool, typer.Option("--apply", help="Make the candidate production.")] = False,
    why: WhyOption = None,
    json_out: JsonOption = False,
) -> int:
    """Name the last known-good record for MODEL on TARGET; --apply makes it production."""
    from modelreg import deploy

    registry = _registry(ctx)
    plan = deploy.rollback_plan(registry, model, target)
    applied = registry.apply_rollback(plan, config.actor(), why) if apply else None
    candidate = _record_brief(registry, plan.candidate, target)
    current = _record_brief(registry, plan.current, target) if plan.current else None
    if json_out:
        emit_json(
            {
                "model_id": model,
                "target": target,
                "current": current,
                "rollback_to": candidate,
                "applied": _promotion_json(applied) if applied else None,
            }
        )
        return 0
    print(f"production  {current['record_id'] if current else 'none'}")
    print(f"rollback to {candidate['record_id']}  (source {candidate['source'] or 'unknown'})")
    verified_at = f"{candidate['verified_at']:%Y-%m-%d %H:%M:%S %Z}"
    print(f"  verified  {verified_at} on {candidate['verified_on_host']}")
    if candidate["runtime"]:
        print(f"  runtime   llama-cpp-python {candidate['runtime']['llama_cpp_python_version']}")
    if candidate["smoke_output"]:
        print(f"  answered  {candidate['smoke_output']}")
    print(f"  location  {candidate['location']}")
    for f in candidate["files"]:
        print(f"  file      {f['path']}  sha256:{f['sha256']}")
    if applied:
        say(f"rolled back: {candidate['record_id']} is production for {model} on {target}")
    else:
        say(f"to apply: modelreg rollback {model} --target {target} --apply --why '...'")
    return 0


@app.command()
def history(ctx: typer.Context, model: ModelArg, json_out: JsonOption = False) -> int:
    """Adds, verifications, promotions and rollbacks of MODEL, oldest first."""
    registry = _registry(ctx)
    events = registry.history(model)
    if json_out:
        emit_json(
            [
                {
                    "id": e.id,
                    "at": e.at.isoformat(),
                    "actor": e.actor,
                    "kind": e.kind,
                    "record_id": e.record_id,
                    "target": e.target,
                    "why": e.why,
                    "detail": e.detail,
                }
                for e in events
            ]
        )
        return 0
    rows = []
    for e in events:
        detail = ""
        if e.kind == "verify":
            detail = (
                "passed"
                if e.detail.get("passed")
                else "failed: "
                + ", ".join(
                    f"{k}={v}" for k, v in e.detail.get("checks", {}).items() if v != "pass"
                )
            )
        elif e.detail.get("previous_record_id"):
            detail = f"was {e.detail['previous_record_id']}"
        rows.append(
            (
                f"{e.at:%Y-%m-%d %H:%M:%S}",
                e.kind,
                e.record_id or "",
                e.target or "",
                e.actor,
                e.why or "",
                detail,
            )
        )
    print(table(rows, ["when", "event", "record", "target", "who", "why", "detail"]))
    return 0


@app.command()
def hold(
    ctx: typer.Context,
    record_ref: RecordArg,
    why: Annotated[str, typer.Option("--why", help="Why it is held (required).")],
) -> int:
    """Put RECORD on hold: not deployable, not promotable, until released."""
    registry = _registry(ctx)
    record = registry.get(record_ref)
    registry.set_state(record, "held", why, config.actor())
    say(f"{record.id} is on hold: {why}")
    return 0


@app.command()
def release(ctx: typer.Context, record_ref: RecordArg, why: WhyOption = None) -> int:
    """Release a held RECORD (facts missing from its manifest keep it on hold regardless)."""
    registry = _registry(ctx)
    record = registry.get(record_ref)
    registry.set_state(record, "active", why, config.actor())
    say(f"{record.id} released")
    for reason in record.hold_reasons:
        say(f"still on hold: {reason}")
    return 0


@app.command()
def retire(
    ctx: typer.Context,
    record_ref: RecordArg,
    why: Annotated[str, typer.Option("--why", help="Why it is retired (required).")],
) -> int:
    """Retire RECORD: kept with its evidence, never deployable or a rollback candidate again."""
    registry = _registry(ctx)
    record = registry.get(record_ref)
    registry.set_state(record, "retired", why, config.actor())
    say(f"{record.id} retired: {why}")
    return 0


@app.command()
def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(metavar="A", help="Record id/prefix or manifest .json.")],
    b: Annotated[str, typer.Argument(metavar="B", help="Record id/prefix or manifest .json.")],
    json_out: JsonOption = False,
) -> int:
    """What changed from A to B: identity, source, license, ledger, weights, quantization,
    tokenizer/template, config, runtime, files. Exit 0 even when they differ."""
    from modelreg.cli.main import _manifest_ref
    from modelreg.manifests.diff import diff_manifests

    name_a, manifest_a = _manifest_ref(ctx, a)
    name_b, manifest_b = _manifest_ref(ctx, b)
    result = diff_manifests(manifest_a, manifest_b)
    if json_out:
        emit_json(
            {
                "a": name_a,
                "b": name_b,
                "same_model": result.same_model,
                "metadata_only": result.metadata_only,
                "changed": result.changed,
                "changed_dimensions": result.changed_dimensions,
                "attribution_warning": result.attribution_warning,
                "notes": result.notes,
                "sections": {
                    s.name: {"changed": s.changed, "a": s.a, "b": s.b} for s in result.sections
                },
            }
        )
        return 0
    print(f"a: {name_a}\nb: {name_b}")
    for note in result.notes:
        print(note)
    rows = [(s.name, "changed" if s.changed else "same") for s in result.sections]
    print(table(rows, ["section", ""]))
    if result.attribution_warning:
        say(f"warning: {result.attribution_warning}")
    return 0
