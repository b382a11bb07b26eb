"""How the rollback answer reads in a terminal: production, the candidate and why, what is
held, the drill's answer, earlier records and the commands — at most ~10 lines (``--json``
has the whole of it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelreg.cli.records import deployability_text, named, unit_text
from modelreg.cli.render import command_of, out

if TYPE_CHECKING:
    from modelreg.schemas.output import (
        DeployedOut,
        DrillOut,
        RejectedCandidate,
        RollbackOutput,
    )


def _bytes_line(unit: DeployedOut) -> str:
    if unit.fetch_from:
        return f"  bytes     {unit.fetch_from}"
    return f"  bytes     NO FETCHABLE COPY ({unit.unfetchable})"


def _deployed_line(label: str, unit: DeployedOut) -> None:
    record = unit.record
    out(f"{label:<11} {named(record)}  {deployability_text(unit.deployability)}")


def _earlier_lines(plan: RollbackOutput, label: str, rows: list[RejectedCandidate]) -> None:
    """Earlier production records, newest first: usable or why not, and the command."""
    for row in rows[:3]:
        name = f"v{row.handle.rpartition('@v')[2]} {row.record_id}" if row.handle else row.record_id
        why = row.why if len(row.why) <= 90 else row.why[:87] + "..."
        out(f"{label:<11} {name}  {'usable' if row.usable else 'not usable: ' + why}")
        if row.next is not None and not (row.usable and row.next in plan.next_steps):
            out(f"  {'to apply:' if row.usable else 'to fix:':<9} {command_of(row.next)}")
        if row.force is not None:
            out(f"  {'or now:':<9} {command_of(row.force)}")
    if len(rows) > 3:
        out(f"{label:<11} {len(rows) - 3} more (--json lists them)")


def _drill_text(drill: DrillOut) -> None:
    """The drill in a few lines: its answer and run, then each case asked again (what
    failed first)."""
    verdict = {"safe": "PASSED", "fails": "FAILED", "could_not_run": "COULD NOT RUN"}
    incidents = sum(c.source == "incident" for c in drill.cases)
    parts = []
    if len(drill.cases) > incidents:
        parts.append(f"{len(drill.cases) - incidents} failing case(s) of run {drill.from_run}")
    if incidents:
        parts.append(f"{incidents} incident prompt(s)")
    asked = " + ".join([*parts, drill.suite_in_force or "the golden prompts"])
    run = f"run {drill.run_id} (exploratory: never counted)" if drill.run_id else "nothing ran"
    out(f"drill       {verdict[drill.verdict]}  {drill.record_id}  {run}: {asked}")
    answer = {
        "safe": "safe to apply",
        "fails": "the candidate fails what failed"
        + (f": {', '.join(drill.failing_cases)}" if drill.failing_cases else ""),
        "could_not_run": f"could not run: {drill.could_not_run}",
    }
    out(f"  answer    {answer[drill.verdict]}")
    if drill.bytes_from:
        out(f"  bytes     {drill.bytes_from}")
    for line in drill.failed[:4] if drill.verdict == "fails" else []:
        out(f"  failed    {line}")
    if drill.verdict == "fails" and len(drill.failed) > 4:
        out(f"  failed    {len(drill.failed) - 4} more (--json lists them)")
    for case in drill.cases[:4] if drill.passed else []:
        out(
            f"  passed    {case.case_id} (was {case.from_case}): {case.prompt!r} -> {case.output!r}"
        )
    if drill.failed_inside_passing_run:
        shown = ", ".join(drill.failed_inside_passing_run[:6])
        out(f"  also      failed within the suite's pass rate: {shown}")
    for gate in drill.baseline_gates[:2]:
        out(f"  gate      {gate.outcome.value}: {gate.message}")


def rollback_text(plan: RollbackOutput, command: str) -> None:
    """At most ~10 lines: production now, the candidate and why, what is held, where its
    bytes are, the runtime in one line, the command (the whole of it: --json)."""
    if plan.drill is not None:
        _drill_text(plan.drill)
    if plan.applied is not None and plan.production is not None:
        _deployed_line("production", plan.production)
        out(_bytes_line(plan.production))
        out(f"  runtime   {plan.production.runtime_summary}")
        if plan.rolled_back_from is not None:
            _deployed_line("held", plan.rolled_back_from)
        return
    if plan.production is not None:
        _deployed_line("production", plan.production)
    if plan.decision == "nothing_to_do":
        _earlier_lines(plan, "earlier", plan.earlier)
        if not plan.earlier:
            out("earlier     none: no earlier production record is left to roll back to")
        return
    if plan.candidate is None:
        _earlier_lines(plan, "passed over", plan.rejected)
        return
    candidate = plan.candidate
    if plan.forced:
        out(f"candidate   {named(candidate.record)}  FORCED (break glass): not deployable")
        for reason in plan.forced[:3]:
            out(f"  unmet     {reason}")
        out(_bytes_line(candidate))
        if plan.production is not None:
            out(f"will hold   {named(plan.production.record)} (production now)")
        out(f"to apply:   {command}")
        return
    if plan.named:
        chosen = "the record named (--to), deployable now with a fetchable copy"
    elif plan.rejected:
        chosen = (
            "the newest earlier production record that can take production "
            f"({len(plan.rejected)} passed over)"
        )
    else:
        chosen = (
            "the newest earlier production record that is deployable now and has a fetchable copy"
        )
    out(f"candidate   {named(candidate.record)}  deployable — {chosen}")
    out(_bytes_line(candidate))
    out(f"  runtime   {candidate.runtime_summary}")
    if candidate.unit:
        out("  unit      " + unit_text(candidate.unit))
    if plan.production is not None:
        out(f"will hold   {named(plan.production.record)} (production now)")
    for rejected in plan.rejected[:2]:
        why = rejected.why if len(rejected.why) <= 100 else rejected.why[:97] + "..."
        out(f"passed over {rejected.record_id}  {why}")
    if len(plan.rejected) > 2:
        out(f"passed over {len(plan.rejected) - 2} more (--json lists them)")
    if plan.drill is not None and plan.drill.verdict == "could_not_run":
        out("to apply:   none — the drill could not run (see its answer; --path gives the files)")
    elif plan.drill is not None and not plan.drill.passed:
        out("to apply:   none — the candidate fails what failed (drill another: --to RECORD)")
    else:
        out(f"to apply:   {command}")
