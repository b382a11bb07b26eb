"""``modelreg suite``: golden suites — check a file, attach one to a model, grow it from a run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modelreg.cli.app import JsonOption, ModelArg, WhyOption, app, registry
from modelreg.cli.render import emit, say

suite_app = typer.Typer(
    help="Golden suites: thresholds fixed before results, attached to a model or a target.",
    no_args_is_help=True,
)
app.add_typer(suite_app, name="suite")

SuiteArg = Annotated[str, typer.Argument(metavar="SUITE", help="Suite file, or 'default-chat'.")]


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
    json_out: JsonOption = False,
) -> int:
    """Attach SUITE to MODEL: every verify of its records runs it; runs under another suite
    stop counting. A new version of an attached suite needs --why; history shows what
    changed, and a record that failed the earlier version needs a releaser's acceptance of a
    pass under a weaker one (promote --accept-relaxed-gate)."""
    result = registry(ctx).attach_suite(model, suite, why=why)
    if json_out:
        emit(result)
    else:
        say(f"{result.message} (sha256 {result.sha256}, {result.cases} cases)")
        for line in result.changes:
            say(f"  {'weakens: ' if line in result.weakens else 'changed: '}{line}")
    return 0


@suite_app.command("detach")
def detach(
    ctx: typer.Context, model: ModelArg, why: WhyOption = None, json_out: JsonOption = False
) -> int:
    """Detach MODEL's suite (the target's suite, or the golden prompts, apply again); needs
    --why."""
    result = registry(ctx).detach_suite(model, why=why)
    if json_out:
        emit(result)
    else:
        say(result.message)
    return 0


@suite_app.command("add-case")
def add_case(
    ctx: typer.Context,
    suite: Annotated[Path, typer.Argument(metavar="SUITE", help="The suite file to grow.")],
    from_run: Annotated[str, typer.Option("--from-run", metavar="RUN", help="A run id.")],
    case: Annotated[
        str | None, typer.Option("--case", help="Only this case of the run (default: failing).")
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Turn a run's failing outputs into regression cases appended to SUITE."""
    result = registry(ctx).suite_add_case(suite, from_run, case_id=case)
    if json_out:
        emit(result)
    else:
        say(f"{result.message}: {', '.join(result.added)} (sha256 {result.sha256})")
    return 0
