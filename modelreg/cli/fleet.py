"""Fleet commands: host report (what a host of a target runs) and deploy (a deploy host's
fetch-and-gate before its model server starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modelreg.cli.app import JsonOption, app, registry
from modelreg.cli.render import emit, out, say
from modelreg.progress import ProgressMode

host_app = typer.Typer(
    help="This host as one of a target's hosts: what it runs, recorded for every reader.",
    no_args_is_help=True,
)
app.add_typer(host_app, name="host")


@host_app.command("report")
def host_report(
    ctx: typer.Context,
    target: Annotated[str, typer.Option("--target", "-t", help="A target this host serves.")],
    runtime: Annotated[
        str | None,
        typer.Option(
            "--runtime",
            help="Only this runtime (llama.cpp, transformers, neuron): default all installed here.",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Record what this host runs for TARGET (packages, the llama.cpp build, CPU flags, the
    libraries its evidence names) — cheap, for a cron job or an agent on every host. A
    runtime other than the one a record's evidence was produced under makes that evidence
    stale for every reader, naming this host. Exit 1 when production evidence expired."""
    report = registry(ctx).host_report(target, runtime=runtime)
    if json_out:
        emit(report)
    else:
        for r in report.reports:
            change = f"CHANGED: {r.changes}" if r.changes else "unchanged"
            before = f" (before: {r.previous})" if r.previous else " (first report)"
            out(f"{r.runtime}: {change}{before}")
        say(report.message)
    return 1 if report.stale else 0


@app.command()
def deploy(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(metavar="MODEL", help="org/name.")],
    target: Annotated[str, typer.Option("--target", "-t", help="The target this host serves.")],
    to: Annotated[Path, typer.Option("--to", help="The directory the model server reads.")],
    check_runtime: Annotated[
        bool,
        typer.Option(
            "--check-runtime",
            help="Also compare this host's runtime with the one production's evidence was "
            "produced under (exit 1 when they differ).",
        ),
    ] = False,
    accept_forced: Annotated[
        bool,
        typer.Option(
            "--accept-forced",
            help="Take a production record a break-glass rollback forced there while it is "
            "only stale (never a held, retired or failing one).",
        ),
    ] = False,
    progress: Annotated[
        ProgressMode,
        typer.Option("--progress", help="Fetch progress on stderr: auto, json or none."),
    ] = ProgressMode.AUTO,
    json_out: JsonOption = False,
) -> int:
    """Before a model server starts (a Kubernetes init container, a systemd ExecStartPre):
    fetch MODEL's production record on TARGET into DIR from its recorded locations, every
    sha256 checked (nothing left unless every file matched; a DIR already holding exactly
    those bytes is kept), then pass the deploy gate for each file. Exit 0: start; 1: do not
    (not deployable, no fetchable copy, the gate failed, or --check-runtime found another
    runtime); 2: bad input; 4: the registry cannot be reached."""
    from modelreg.cli.render import FetchProgress

    shown = FetchProgress(progress.value)
    ok = False
    try:
        done = registry(ctx).deploy(
            model,
            target,
            to,
            check_runtime=check_runtime,
            accept_forced=accept_forced,
            progress=shown if shown.enabled else None,
            on_start=shown.start if shown.enabled else None,
        )
        ok = True
    finally:
        if shown.enabled:
            shown.finish(ok)
    if json_out:
        emit(done)
    else:
        for f in done.files:
            out(f"{done.to}/{f.path}  sha256:{f.sha256}")
        if done.runtime_check is not None:
            check = done.runtime_check
            say(
                "runtime here: the one production was verified under"
                if check.matches
                else f"runtime here: DIFFERS from production's evidence: {check.changes}"
            )
        say(done.message)
    return 0 if done.deployed else 1
