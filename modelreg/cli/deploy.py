"""Deploy-time commands: verify, promote, rollback, status, history, hold, release,
retire."""

from __future__ import annotations

import math
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from modelreg import units
from modelreg.cli.app import (
    JsonOption,
    ModelArg,
    RecordArg,
    TargetOption,
    WhyOption,
    app,
    registry,
)
from modelreg.cli.records import deployability_text, named, unit_text
from modelreg.cli.render import command_of, emit, out, say, say_next, table
from modelreg.cli.rollback_text import rollback_text
from modelreg.errors import InvalidInput, NoRollbackCandidate
from modelreg.progress import ProgressMode

if TYPE_CHECKING:
    from modelreg.progress import ProgressCallback, ProgressEvent
    from modelreg.schemas.output import (
        ApprovalOut,
        StateChangeOutput,
        StatusOutput,
        VerifyOutput,
    )


def _verify_text(report: VerifyOutput) -> None:
    rows = [(c.check, c.outcome.value, c.classification or "", c.summary) for c in report.checks]
    print(table(rows, ["check", "outcome", "class", "summary"]))
    for check in report.checks:
        # The check's summary has the suite's pass rate per subset; here: what failed, and
        # what the runtime used.
        suite = check.evidence.get("suite_result")
        for case in suite.get("cases", []) if isinstance(suite, dict) else []:
            if case.get("classification") != "pass":
                out(
                    f"  failed {case.get('case_id')} [{case.get('classification')}]: "
                    f"{case.get('prompt')!r} -> {case.get('output')!r}"
                )
        resources = check.evidence.get("resources")
        if isinstance(resources, dict):
            figures = []
            if resources.get("peak_rss_bytes"):
                figures.append(f"peak RSS {units.size_bytes(resources['peak_rss_bytes'])}")
            for key, label, show in (
                ("load_ms", "load", units.duration_ms),
                ("ttft_ms_max", "first token (max)", units.duration_ms),
                ("prompt_tokens_per_s", "prompt", units.rate),
                ("decode_tokens_per_s", "decode", units.rate),
                ("context_used_tokens", "context used", lambda n: f"{n:,} tokens"),
            ):
                if resources.get(key) is not None:
                    figures.append(f"{label} {show(resources[key])}")
            if figures:
                out(f"{check.check} resources: " + ", ".join(figures))
    if report.signed_by:
        out(f"signed by key {report.signed_by}")
    verdict = report.deployability
    unchanged = f"{report.record.record_id} on {report.target} is unchanged: " + (
        "deployable" if verdict.deployable else "not deployable"
    )
    if report.purpose == "missing_bytes":
        say(
            f"nothing verified: the files are not on this host (not counted, not a failure); "
            f"{unchanged}. Verify a copy from its recorded locations: modelreg verify "
            f"{report.record.record_id} --target {report.target} --fetch (or give --path)"
        )
    elif report.purpose == "investigate":
        say(
            f"investigation run {'passed' if report.passed else 'FAILED'} (exploratory: never "
            f"counted; the record's state is left as it was); {unchanged}"
        )
    elif report.exploratory:
        say(
            f"one-off run {'passed' if report.passed else 'FAILED'} (not counted: the suite is "
            f"not the one in force); {unchanged}"
        )
    elif verdict.deployable:
        say(f"{report.record.record_id} is deployable on {report.target}")
    else:
        why = "; ".join(r.message for r in verdict.reasons)
        say(f"{report.record.record_id} is NOT deployable on {report.target}: {why}")


def progress_printer(mode: ProgressMode) -> ProgressCallback | None:
    """Where ``verify --progress MODE`` shows its events: stderr (stdout stays data)."""
    from modelreg.progress import json_line, terminal_line

    if mode is ProgressMode.JSON:

        def json_lines(event: ProgressEvent) -> None:
            sys.stderr.write(json_line(event) + "\n")
            sys.stderr.flush()

        return json_lines
    if mode is ProgressMode.AUTO and sys.stderr.isatty():
        return lambda event: say(terminal_line(event))
    return None


def _finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise InvalidInput(f"{name} {value} must be a finite number")


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
    fetch: Annotated[
        bool,
        typer.Option(
            "--fetch",
            help="Take the files from RECORD's recorded locations into this host's cache (every "
            "sha256 checked) and verify that copy. Without it, files that are not here are "
            "'missing_bytes': nothing runs and no verdict changes.",
        ),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=1,
            help="Seconds a runtime check may take (default: 300 on cpu targets, 900 on inf2 "
            "or more for a bundle whose measured cold start needs it).",
        ),
    ] = None,
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
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            help="A golden suite file (or 'default-chat') for this run only; a run counts only "
            "under the suite in force (the model's, else the target's).",
        ),
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            metavar="RECORD",
            help="Measure agreement with this record (same tokenizer): top-1 and mean KL.",
        ),
    ] = None,
    sign_key: Annotated[
        Path | None,
        typer.Option(
            "--sign-key",
            help="EC private key (PEM) to sign the run with (default: $MODELREG_SIGNING_KEY).",
        ),
    ] = None,
    progress: Annotated[
        ProgressMode,
        typer.Option(
            "--progress",
            help="Progress on stderr, never stdout: auto (a line per check start and end when "
            "stderr is a terminal), json (JSON lines), none.",
        ),
    ] = ProgressMode.AUTO,
    investigate: Annotated[
        bool,
        typer.Option(
            "--investigate",
            help="Run on a held RECORD without releasing it: an exploratory run, never "
            "counted (exit 0 if it passed); the record stays held.",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """Re-run the record's required checks on TARGET; exit 0 only if it is deployable there."""
    _finite("--timeout", timeout)
    _finite("--memory-limit-gib", memory_limit_gib)
    limit = int(memory_limit_gib * 2**30) if memory_limit_gib else None
    if stale:
        if record_ref is not None:
            raise InvalidInput("give either RECORD or --stale, not both")
        if path is not None or fetch:
            raise InvalidInput(
                "--path and --fetch apply to one record",
                "give RECORD with --path or --fetch, or --stale without them",
            )
    elif record_ref is None:
        raise InvalidInput("give a RECORD to verify (or --stale --target T)")
    if path is not None and fetch:
        raise InvalidInput("give --path or --fetch, not both")
    if stale:
        if suite is not None or reference is not None or investigate:
            raise InvalidInput(
                "--suite, --reference and --investigate apply to one record, not --stale"
            )
        from modelreg.api import VerifyOptions

        options = VerifyOptions(timeout_seconds=timeout, context=context, memory_limit_bytes=limit)
        reports = registry(ctx).verify_stale(target, options=options, sign_key=sign_key)
        if json_out:
            emit(reports)
        elif not reports.runs and not reports.skipped:
            say(f"no stale evidence on {target}")
        for skipped in reports.skipped if not json_out else []:
            say(f"not verified again: {skipped.message}")
        for r in reports.runs if not json_out else []:
            out(f"{r.record.record_id}  {r.record.model_id}  {deployability_text(r.deployability)}")
        return 0 if all(r.deployability.deployable for r in reports.runs) else 1

    # The one import past the API: the llama.cpp child is started before the API is imported
    # (~0.2 s), the API receives it (``prestarted``) and uses or kills it.
    from modelreg.validators.llama_child import prestart

    assert record_ref is not None
    # Started before anything heavy is imported: llama_cpp imports in the child while this
    # process imports the registry (SQLAlchemy, pydantic) and reads the database. The child
    # only waits for its request; the API sends it once the record is staged, or kills it.
    warm = prestart(limit)
    try:
        from modelreg.api import VerifyOptions

        options = VerifyOptions(timeout_seconds=timeout, context=context, memory_limit_bytes=limit)
        report = registry(ctx).verify(
            record_ref,
            target,
            path=path,
            fetch=fetch,
            options=options,
            suite=suite,
            reference=reference,
            sign_key=sign_key,
            prestarted=warm,
            progress=progress_printer(progress),
            investigate=investigate,
        )
    finally:
        warm.discard()
    if json_out:
        emit(report)
    else:
        _verify_text(report)
    if report.purpose == "missing_bytes":
        return 1  # nothing ran: no answer for this host
    if report.exploratory:  # a one-off answers for its own run only
        return 0 if report.passed else 1
    return 0 if report.deployability.deployable else 1


def _day(option: str, value: str | None) -> date | None:
    """A YYYY-MM-DD option as a date (bad input: one line, exit 2)."""
    if value is None:
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"{option} {value[:40]!r} is not a day: give YYYY-MM-DD") from None


def _approval_text(approval: ApprovalOut) -> str:
    parts = []
    if approval.owner:
        parts.append(f"owner {approval.owner}")
    if approval.retest_by:
        overdue = " (OVERDUE)" if approval.retest_overdue else ""
        parts.append(f"re-test by {approval.retest_by.isoformat()}{overdue}")
    parts += [f"known limitation: {text}" for text in approval.limitations]
    return "; ".join(parts)


@app.command()
def promote(
    ctx: typer.Context,
    record_ref: RecordArg,
    target: TargetOption,
    why: WhyOption = None,
    owner: Annotated[
        str | None, typer.Option("--owner", help="Who answers for this release (kept with it).")
    ] = None,
    limitation: Annotated[
        list[str] | None,
        typer.Option("--limitation", help="A known limitation of this release (repeat for more)."),
    ] = None,
    retest_by: Annotated[
        str | None,
        typer.Option(
            "--retest-by",
            metavar="YYYY-MM-DD",
            help="The day it must be tested again by; status says when that day has passed.",
        ),
    ] = None,
    accept_relaxed_gate: Annotated[
        bool,
        typer.Option(
            "--accept-relaxed-gate",
            help="Accept (with --why) passes under a gate weakened after RECORD failed it; "
            "refused if anything else keeps it from being deployable.",
        ),
    ] = False,
    label: Annotated[
        str | None,
        typer.Option(
            "--label",
            metavar="NAME",
            help="Name this promotion (release-14): MODEL@NAME then names RECORD wherever a "
            "record is asked for, until a newer promotion takes the name.",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Make RECORD production on TARGET (refused unless it is deployable there), with its
    approval: owner, known limitations, re-test date — and a label, if given."""
    result = registry(ctx).promote(
        record_ref,
        target,
        why=why,
        owner=owner,
        limitations=limitation or (),
        retest_by=_day("--retest-by", retest_by),
        accept_relaxed_gate=accept_relaxed_gate,
        label=label,
    )
    if result.warning:
        say(f"warning: {result.warning}")
    if json_out:
        emit(result)
    else:
        say(result.message)
        if result.approval is not None:
            say(f"approval: {_approval_text(result.approval)}")
    return 0


@app.command()
def rollback(
    ctx: typer.Context,
    model: ModelArg,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            "-t",
            help="Target name; default: the one target MODEL is production on.",
        ),
    ] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Make the candidate production.")] = False,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Roll back to this record (it was production here before and is deployable "
            "now) instead of the newest candidate.",
        ),
    ] = None,
    drill: Annotated[
        bool,
        typer.Option(
            "--drill",
            help="First run the failing cases of the record rolled away from, and the suite in "
            "force, against the candidate on this host (kept as a one-off run); with --apply, "
            "a drill that fails switches nothing (exit 1).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Break glass (with --to): make it production although it is not deployable, "
            "when all that keeps it out is staleness (runtime, target or suite changed since its "
            "counting run). Never past a hold, a retirement or a failed run. Audited; marked "
            "forced until a counting run; the gate passes it only with --accept-forced.",
        ),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask to confirm a --force --apply.")
    ] = False,
    prompt: Annotated[
        list[str] | None,
        typer.Option(
            "--prompt",
            help="With --drill: the incident's own input, asked of the candidate too (repeat "
            "for more; each with its --expect, in order).",
        ),
    ] = None,
    expect: Annotated[
        list[str] | None,
        typer.Option(
            "--expect",
            help="With --drill: what the answer to the --prompt in the same place must contain.",
        ),
    ] = None,
    path: Annotated[
        Path | None,
        typer.Option(
            "--path",
            help="With --drill: where the candidate's files are on this host (default: where "
            "added if they are there, else a copy fetched from its recorded locations).",
        ),
    ] = None,
    why: WhyOption = None,
    progress: Annotated[
        ProgressMode,
        typer.Option("--progress", help="The drill's progress on stderr: auto, json, none."),
    ] = ProgressMode.AUTO,
    json_out: JsonOption = False,
) -> int:
    """Name the last known-good record for MODEL on TARGET; --apply (with --why) makes it
    production and holds the record rolled back from. Applying twice changes nothing.
    Records may be given as MODEL@vN (--to acme/chat@v2)."""
    if apply and (why is None or not why.strip()):
        raise InvalidInput("rollback --apply needs --why", "say why, e.g. --why 'incident 42'")
    prompts, expected = prompt or [], expect or []
    if not drill and (prompts or expected or path is not None):
        raise InvalidInput("--prompt, --expect and --path are for a drill: add --drill")
    if len(prompts) != len(expected):
        raise InvalidInput(
            f"--prompt and --expect go in pairs: got {len(prompts)} --prompt and "
            f"{len(expected)} --expect",
            "give each --prompt the --expect its answer must contain, in the same order",
        )
    api = registry(ctx)
    if target is None:
        target = api.only_production_target(model)
        say(f"target {target}: the one target {model} is production on")
    shown = progress_printer(progress) if drill else None
    if apply and force and not yes:
        planned = api.rollback_plan(model, target, to=to, force=True)
        if planned.decision == "no_candidate":
            raise NoRollbackCandidate.of_plan(planned)
        if planned.forced and not typer.confirm(
            f"force {to} to production on {target} although it is not deployable "
            f"({'; '.join(planned.forced)})?",
            err=True,
        ):
            raise InvalidInput("break glass not confirmed: nothing changed", "or pass --yes")
    if apply:
        plan = api.rollback(
            model,
            target,
            why=why or "",
            to=to,
            drill=drill,
            force=force,
            progress=shown,
            prompts=prompts,
            expect=expected,
            path=path,
        )
    elif drill:
        plan = api.drill_rollback(
            model, target, to=to, progress=shown, prompts=prompts, expect=expected, path=path
        )
    else:
        plan = api.rollback_plan(model, target, to=to, force=force)
        if plan.decision == "no_candidate":
            if not json_out:
                rollback_text(plan, "")
            raise NoRollbackCandidate.of_plan(plan)  # exit 1, as an apply would
    code = 1 if plan.drill is not None and not plan.drill.passed else 0
    if json_out:
        emit(plan)
        return code
    command = (
        f"modelreg rollback {model} --target {target}"
        + (f" --to {to}" if to else "")
        + (" --force" if force else "")
    )
    rollback_text(plan, f"{command}{' --drill' if drill else ''} --apply --why '...'")
    if plan.decision != "rollback" or plan.applied is not None or plan.drill is not None:
        say(plan.message)  # (a plan's own lines say what it would do)
    say_next(plan)
    return code


@app.command()
def status(
    ctx: typer.Context,
    model: Annotated[
        str | None, typer.Argument(metavar="[MODEL]", help="Only this model, org/name.")
    ] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Only this target.")] = None,
    expect_sha256: Annotated[
        str | None,
        typer.Option(
            "--expect-sha256",
            help="Deploy gate: exit 0 only if this sha256 is a file of MODEL's production "
            "record on TARGET and that record is deployable there now.",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 1 when any listed production record is not deployable now or has no "
            "fetchable copy.",
        ),
    ] = False,
    accept_forced: Annotated[
        bool,
        typer.Option(
            "--accept-forced",
            help="With --expect-sha256: pass a production record a break-glass rollback forced "
            "there while it is only stale.",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """What runs where: model × target → production record, files, deployable now / stale /
    held, where its bytes can be fetched, promoted when (UTC), by whom, why."""
    api = registry(ctx)
    if expect_sha256 is not None:
        if model is None or target is None:
            raise InvalidInput("--expect-sha256 needs MODEL and --target")
        report = api.gated_status(model, target, expect_sha256, accept_forced=accept_forced)
        gate = report.gate
        assert gate is not None
        if json_out:
            emit(report)
        elif gate.passed and gate.forced:
            say(
                f"gate passed (FORCED): {gate.sha256} is a file of {gate.record_id}, production "
                f"for {model} on {target} by a break-glass rollback, not deployable: "
                + "; ".join(r.message for r in gate.reasons)
            )
        elif gate.passed:
            say(
                f"gate passed: {gate.sha256} is a file of {gate.record_id}, production for "
                f"{model} on {target} and deployable there now"
            )
        else:
            say("gate FAILED: " + "; ".join(r.message for r in gate.reasons))
            for r in gate.reasons:
                if r.next:
                    say(f"  fix: {command_of(r.next)}")
        return 0 if gate.passed else 1
    return _status_report(api.status(model, target), json_out, check)


def _status_report(report: StatusOutput, json_out: bool, check: bool = False) -> int:
    bad = [e for e in report.entries if not (e.deployability.deployable and e.fetch_from)]
    code = 1 if check and bad else 0
    if json_out:
        emit(report)
        return code
    if not report.entries:
        say(
            "nothing is production anywhere yet — promote a verified record with: "
            "modelreg promote RECORD --target T"
        )
        return 0
    rows = []
    for e in report.entries:
        v = e.deployability
        now = v.now if v.deployable else v.now.upper()
        if e.forced:
            now = f"FORCED ({now})"
        rows.append(
            (
                e.model_id,
                e.target,
                named(e.record) + (f" ({e.promotion.label})" if e.promotion.label else ""),
                now,
                f"{e.promotion.at:%Y-%m-%d %H:%M}",
                e.promotion.actor,
                f"{e.promotion.action}: {e.promotion.why or ''}".rstrip(": "),
            )
        )
    print(table(rows, ["model", "target", "production", "now", "since (UTC)", "by", "why"]))
    for e in report.entries:
        for f in e.record.files:
            out(f"{e.record.record_id}  {f.path}  sha256:{f.sha256}  at {e.record.location}")
        if e.unit:
            out(f"{e.record.record_id}  on {e.target}: unit {unit_text(e.unit)}")
        if e.fetch_from:
            out(f"{e.record.record_id}  fetch from {e.fetch_from}")
        else:
            out(
                f"{e.record.record_id}  NO FETCHABLE COPY ({e.unfetchable}) — fix: modelreg "
                f"locate {e.record.record_id} --add file://HOST/DIR"
            )
        approval = e.approval
        if approval is not None and approval.retest_overdue and approval.retest_by:
            out(
                f"{e.record.record_id}  on {e.target}: re-test overdue since "
                f"{approval.retest_by.isoformat()} (owner {approval.owner or 'not named'})"
            )
        elif approval is not None:
            out(f"{e.record.record_id}  on {e.target}: {_approval_text(approval)}")
        if e.forced:
            out(
                f"{e.record.record_id}  on {e.target}: FORCED to production by a break-glass "
                f"rollback ({e.promotion.actor}: {e.promotion.why}); the gate passes it only "
                "with --accept-forced (or the target's accept_forced) until a counting run"
            )
        if not e.deployability.deployable:
            for r in e.deployability.reasons:
                out(
                    f"{e.record.record_id}  on {e.target}: {r.message}"
                    + (f" — fix: {command_of(r.next)}" if r.next else "")
                )
    if check and bad:
        say(f"check FAILED: {len(bad)} of {len(report.entries)} production records cannot ship now")
    return code


@app.command()
def history(
    ctx: typer.Context,
    model: ModelArg,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Only the newest N events.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only events at or after: 2026-11-30, 2026-11-30T09:00Z, 12h, 7d."
        ),
    ] = None,
    target: Annotated[
        str | None,
        typer.Option("--target", "-t", help="Only events on this target (and those of none)."),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Adds, verifications, promotions, rollbacks, holds of MODEL, newest first (--json:
    oldest first, the order they were committed in)."""
    report = registry(ctx).history(model, limit=limit, since=since, target=target)
    if json_out:
        emit(report)
        return 0
    rows = [
        (
            f"{e.at:%Y-%m-%d %H:%M:%S}",
            e.kind,
            (f"v{e.record_version} " if e.record_version else "") + (e.record_id or ""),
            e.target or "",
            e.actor,
            e.why or "",
            e.summary,
        )
        for e in reversed(report.events)
    ]
    print(table(rows, ["when (UTC)", "event", "record", "target", "who", "why", "detail"]))
    return 0


@app.command()
def attest(
    ctx: typer.Context,
    record_ref: RecordArg,
    target: TargetOption,
    json_out: JsonOption = False,
) -> int:
    """Print the signed statement of RECORD's latest signed run on TARGET, for an auditor:
    exit 0 only if it verifies with a key TARGET trusts and vouches for the stored run."""
    result = registry(ctx).attest(record_ref, target)
    if json_out:
        emit(result)
    else:
        import json

        sys.stdout.write(json.dumps(result.statement, indent=2, sort_keys=True) + "\n")
        say(
            f"run {result.run_id}: "
            + (
                f"signature verified (key {result.signed_by})"
                if result.verified
                else f"NOT verified: {result.problem}"
            )
        )
        say(
            "stored evidence matches the signed digests"
            if result.evidence_matches
            else "stored evidence does NOT match the signed digests"
        )
    return 0 if result.verified and result.evidence_matches else 1


def _state_change(result: StateChangeOutput, json_out: bool) -> int:
    if json_out:
        emit(result)
    else:
        say(result.message)
        say_next(result)
    return 0


@app.command()
def hold(
    ctx: typer.Context,
    record_ref: RecordArg,
    why: Annotated[str, typer.Option("--why", help="Why it is held (required).")],
    json_out: JsonOption = False,
) -> int:
    """Put RECORD on hold: not deployable, not promotable, until released."""
    return _state_change(registry(ctx).hold(record_ref, why), json_out)


@app.command()
def release(
    ctx: typer.Context,
    record_ref: RecordArg,
    why: Annotated[str, typer.Option("--why", help="Why it is released (required).")],
    json_out: JsonOption = False,
) -> int:
    """Release a held RECORD (facts missing from its manifest keep it on hold regardless)."""
    return _state_change(registry(ctx).release(record_ref, why), json_out)


@app.command()
def retire(
    ctx: typer.Context,
    record_ref: RecordArg,
    why: Annotated[str, typer.Option("--why", help="Why it is retired (required).")],
    json_out: JsonOption = False,
) -> int:
    """Retire RECORD: kept with its evidence, never deployable or a rollback candidate again."""
    return _state_change(registry(ctx).retire(record_ref, why), json_out)
