"""``modelreg suite``: golden suites — check a file, attach one to a model, grow it from a run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from modelreg.cli.app import JsonOption, ModelArg, WhyOption, app, registry
from modelreg.cli.render import command_of, emit, say, say_next

if TYPE_CHECKING:
    from modelreg.schemas.output import ProductionChangeOut

suite_app = typer.Typer(
    help="Golden suites: thresholds fixed before results, attached to a model or a target.",
    no_args_is_help=True,
)
app.add_typer(suite_app, name="suite")

SuiteArg = Annotated[str, typer.Argument(metavar="SUITE", help="Suite file, or 'default-chat'.")]
DRY_RUN_NOTE = "dry run: nothing written"
DryRunOption = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Show what it would change and which production entries it would take out; "
        "write nothing.",
    ),
]


def say_production_affected(
    affected: list[ProductionChangeOut], dry_run: bool, *, when: str | None = None
) -> None:
    """The production entries a change of the gate takes out (or brings back), each with the
    command that re-verifies it; then, for a dry run, that nothing was written. ``when``:
    the change is not this command's but a later one's ("once attached")."""
    if affected:
        verb = f"{when}, would change" if when else "would change" if dry_run else "changed"
        n = len(affected)
        say(f"production {verb}: {n} entr{'y' if n == 1 else 'ies'}")
    for change in affected:
        after = change.after if change.after == "deployable" else change.after.upper()
        why = "; ".join(r.message for r in change.reasons)
        say(
            f"  {change.model_id} on {change.target}: {change.record_id} {change.before} -> "
            f"{after}" + (f" ({why})" if why else "")
        )
        if change.next is not None:
            say(f"    re-verify: {command_of(change.next)}")
    if dry_run:
        say(DRY_RUN_NOTE)


@suite_app.command("check")
def check(
    suite: SuiteArg,
    recipe: Annotated[
        Path | None,
        typer.Option(
            "--recipe",
            metavar="RECIPE",
            help="A quantization recipe: its calibration set must not hold the suite's prompts.",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            metavar="FILE",
            help="The calibration text itself: no prompt of the suite may be in it (and its "
            "sha256 must be the recipe's).",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Validate a suite file: its cases, subsets, thresholds; print its digest. A suite that
    asks one question twice, or the same question in two subsets, is refused; so is one whose
    prompts are in the calibration set of --recipe / --calibration."""
    from modelreg.api import check_suite
    from modelreg.suite_hygiene import check_calibration

    result = check_suite(Path(suite))
    if recipe is not None or calibration is not None:
        from modelreg.judging import load_suite_ref

        check_calibration(load_suite_ref(suite), recipe, calibration, suite)
    if json_out:
        emit(result)
    else:
        say(f"{result.message}; subsets {', '.join(result.subsets)}; sha256 {result.sha256}")
    return 0


@suite_app.command("attach")
def attach(
    ctx: typer.Context,
    model: ModelArg,
    suite: SuiteArg,
    why: WhyOption = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """Attach SUITE to MODEL: every verify of its records runs it; runs under another suite
    stop counting. A new version of an attached suite needs --why; history shows what
    changed, and a record that failed the earlier version needs a releaser's acceptance of a
    pass under a weaker one (promote --accept-relaxed-gate). Says which production entries it
    makes stale or failing, and the command that re-verifies each; --dry-run shows the same
    and writes nothing."""
    result = registry(ctx).attach_suite(model, suite, why=why, dry_run=dry_run)
    if json_out:
        emit(result)
    else:
        say(f"{result.message} (sha256 {result.sha256}, {result.cases} cases)")
        for line in result.changes:
            say(f"  {'weakens: ' if line in result.weakens else 'changed: '}{line}")
        say_production_affected(result.production_affected, result.dry_run)
    return 0


@suite_app.command("detach")
def detach(
    ctx: typer.Context,
    model: ModelArg,
    why: WhyOption = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """Detach MODEL's suite (the target's suite, or the golden prompts, apply again); needs
    --why. Says which production entries it makes stale or failing; --dry-run shows the same
    and writes nothing."""
    result = registry(ctx).detach_suite(model, why=why, dry_run=dry_run)
    if json_out:
        emit(result)
    else:
        say(result.message)
        say_production_affected(result.production_affected, result.dry_run)
    return 0


@suite_app.command("add-case")
def add_case(
    ctx: typer.Context,
    suite: Annotated[Path, typer.Argument(metavar="SUITE", help="The suite file to grow.")],
    from_run: Annotated[str, typer.Option("--from-run", metavar="RUN", help="A run id.")],
    case: Annotated[
        str | None, typer.Option("--case", help="Only this case of the run (default: failing).")
    ] = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """Turn a run's failing outputs into regression cases appended to SUITE. Says which
    production entries attaching the grown suite would make stale (for every model that runs
    its previous version) and the commands that attach it and re-verify them; --dry-run
    shows the same and leaves SUITE as it is."""
    result = registry(ctx).suite_add_case(suite, from_run, case_id=case, dry_run=dry_run)
    if json_out:
        emit(result)
    else:
        say(f"{result.message}: {', '.join(result.added)} (sha256 {result.sha256})")
        say_next(result)
        say_production_affected(result.production_affected, False, when="once attached")
        if result.dry_run:
            say(DRY_RUN_NOTE)
    return 0
