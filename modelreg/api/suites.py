"""The suite attached to a model: attach (a gate fixed before results, its relaxations said),
detach, and a failed case added as a regression case."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import config
from modelreg.api.core import Core, _check_why
from modelreg.api.impact import production_changes, production_now, watch
from modelreg.api.views import (
    _suite_output,
)
from modelreg.errors import (
    InvalidInput,
)
from modelreg.judging import (
    load_suite_ref,
)
from modelreg.schemas.output import (
    SuiteCaseOutput,
    SuiteOutput,
    steps_out,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.schemas.suite import CaseResult


class Suites(Core):
    """The model's golden suite: attach, detach, add a case."""

    def attach_suite(
        self,
        model_id: str,
        suite_ref: str | Path,
        *,
        why: str | None = None,
        actor: str | None = None,
        dry_run: bool = False,
    ) -> SuiteOutput:
        """Attach a golden suite to a model: every verify of its records runs it, and runs
        under any other suite stop counting ("stale: suite changed"). The suite is a versioned
        decision: replacing an attached suite needs ``why``, and the event keeps both versions'
        differences (``suite_changes``) — a record that failed the earlier version and passes a
        weaker one is not deployable until a releaser accepts it
        (``gate_relaxed_after_failure``).

        The answer names every production entry of the model the change makes stale or
        failing (``production_affected``, each with the step that re-verifies it), read from
        the verdicts before and after it in its own transaction. ``dry_run``: the same answer
        from the same transaction, rolled back — nothing written, and no ``why`` needed."""
        from modelreg.schemas.suite import Suite
        from modelreg.suites import suite_changes

        _check_why(why)
        self._require_model(model_id)
        suite = load_suite_ref(suite_ref)
        with self.store.locked(model_id, dry_run=dry_run) as tx:
            attached = tx.model_suites([model_id]).get(model_id)
            if attached is not None and attached.suite_sha256 == suite.digest():
                return _suite_output(
                    model_id,
                    "attach",
                    suite,
                    f"{model_id} runs suite {suite.name} at this version already; nothing changed",
                ).model_copy(update={"dry_run": dry_run})
            if attached is not None and not dry_run:
                _check_why(why, required="a new version of an attached suite")
            old = Suite.model_validate_json(attached.suite_json) if attached else None
            changes = suite_changes(old, suite)
            watched = watch(tx, production_now(tx, [model_id]))
            tx.attach_suite(
                suite.model_dump_json(),
                suite.digest(),
                actor or config.actor(),
                why=why,
                detail={
                    "name": suite.name,
                    "previous_sha256": attached.suite_sha256 if attached else None,
                    "changes": changes[0],
                    "weakens": changes[1],
                },
            )
            affected = production_changes(tx, watched)
        message = f"{model_id} {'would run' if dry_run else 'now runs'} suite {suite.name}"
        if changes[1]:
            message += (
                f"; this weakens the gate ({'; '.join(changes[1])}): a record that failed the "
                "earlier version is not deployable on its later pass until a releaser accepts it"
            )
        return _suite_output(model_id, "attach", suite, message, changes).model_copy(
            update={"production_affected": affected, "dry_run": dry_run}
        )

    def detach_suite(
        self,
        model_id: str,
        *,
        why: str | None = None,
        actor: str | None = None,
        dry_run: bool = False,
    ) -> SuiteOutput:
        """Detach the model's suite (its target's suite, or the golden prompts, apply again):
        a change of the gate, so it needs ``why``. The answer names the production entries it
        makes stale or failing (``production_affected``); ``dry_run``: the same answer,
        nothing written."""
        from modelreg.schemas.suite import Suite
        from modelreg.suites import suite_changes

        self._require_model(model_id)
        with self.store.locked(model_id, dry_run=dry_run) as tx:
            attached = tx.model_suites([model_id]).get(model_id)
            if attached is None:
                return _suite_output(
                    model_id,
                    "detach",
                    None,
                    f"{model_id} had no suite attached; nothing changed",
                ).model_copy(update={"dry_run": dry_run})
            if not dry_run:
                _check_why(why, required="detaching a suite")
            changes = suite_changes(Suite.model_validate_json(attached.suite_json), None)
            watched = watch(tx, production_now(tx, [model_id]))
            tx.detach_suite(actor or config.actor(), why=why, detail={"changes": changes[0]})
            affected = production_changes(tx, watched)
        message = f"{model_id} {'would have' if dry_run else 'has'} no suite of its own now"
        return _suite_output(model_id, "detach", None, message, changes).model_copy(
            update={"production_affected": affected, "dry_run": dry_run}
        )

    def suite_add_case(
        self,
        suite_path: Path,
        run_id: str,
        *,
        case_id: str | None = None,
        dry_run: bool = False,
    ) -> SuiteCaseOutput:
        """Turn failing outputs of a stored run into regression cases appended to a suite
        file (``modelreg suite add-case SUITE --from-run RUN``).

        The file changes no verdict by itself; the answer says what attaching it would: for
        every model whose attached suite is the file's previous version, the production
        entries the grown suite makes stale or failing (``production_affected``, from the
        same transaction ``attach_suite`` writes in, rolled back) and the attach step
        (``next_steps``). ``dry_run``: the same answer, the file left as it is."""
        from modelreg.schemas.suite import SuiteResult
        from modelreg.suites import load_suite

        previous = load_suite(suite_path)  # refuse a malformed suite before reading the run
        with self.store.read() as reads:
            found = reads.run(run_id.strip())
            checks = reads.run_checks(found.run_id) if found is not None else []
            attached_to = sorted(
                m
                for m, row in reads.model_suites().items()
                if row.suite_sha256 == previous.digest()
            )
        if found is None:
            raise InvalidInput(
                f"run {run_id!r} not found",
                step=Step("show", "run ids are in a record's runs", ref=None),
            )
        results = [v for v in checks if "suite_result" in v.result.evidence]
        if not results:
            raise InvalidInput(f"run {run_id} ran no suite (no generation check)")
        result = SuiteResult.model_validate(results[0].result.evidence["suite_result"])
        cases = [c for c in result.cases if (c.case_id == case_id if case_id else not c.passed)]
        if not cases:
            raise InvalidInput(
                f"run {run_id} has no {'case ' + repr(case_id) if case_id else 'failing case'}",
                "name a case with `case_id`",
            )
        origin = f"run {found.run_id} of {found.record_id} on {found.target}"
        with tempfile.TemporaryDirectory(prefix="modelreg-add-case-") as scratch:
            grown = suite_path
            if dry_run:  # the same appends on a copy: the same checks, the same new suite
                grown = Path(scratch) / suite_path.name
                shutil.copyfile(suite_path, grown)
            added, digest = _append_cases(grown, cases, origin)
            affected = [
                change
                for model_id in attached_to
                for change in self.attach_suite(model_id, grown, dry_run=True).production_affected
            ]
        verb = "would add" if dry_run else "added"
        message = (
            f"{verb} {len(added)} regression case(s) to {suite_path}; its digest is new, so "
            "earlier runs under it stop counting once it is attached"
        )
        return SuiteCaseOutput(
            suite=str(suite_path),
            run_id=found.run_id,
            added=added,
            sha256=digest,
            message=message,
            production_affected=affected,
            attached_to=attached_to,
            dry_run=dry_run,
            next_steps=steps_out(
                [
                    Step("attach_suite", model_id=m, suite_ref=str(suite_path), why=None)
                    for m in attached_to
                ]
            ),
        )


def _append_cases(path: Path, cases: Sequence[CaseResult], origin: str) -> tuple[list[str], str]:
    """Append a regression case per failed case to the suite file at ``path``: (the new
    cases' ids, the suite's new digest)."""
    from modelreg.suites import append_case, regression_case

    added = []
    digest = ""
    for case in cases:
        new_case = regression_case(case, origin=origin)
        digest = append_case(path, new_case).digest()
        added.append(new_case.id)
    return added, digest
