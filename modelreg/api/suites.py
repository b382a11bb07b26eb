"""The suite attached to a model: attach (a gate fixed before results, its relaxations said),
detach, and a failed case added as a regression case."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import config
from modelreg.api.core import Core, _check_why
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
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    pass


class Suites(Core):
    """The model's golden suite: attach, detach, add a case."""

    def attach_suite(
        self,
        model_id: str,
        suite_ref: str | Path,
        *,
        why: str | None = None,
        actor: str | None = None,
    ) -> SuiteOutput:
        """Attach a golden suite to a model: every verify of its records runs it, and runs
        under any other suite stop counting ("stale: suite changed"). The suite is a versioned
        decision: replacing an attached suite needs ``why``, and the event keeps both versions'
        differences (``suite_changes``) — a record that failed the earlier version and passes a
        weaker one is not deployable until a releaser accepts it
        (``gate_relaxed_after_failure``)."""
        from modelreg.schemas.suite import Suite
        from modelreg.suites import suite_changes

        _check_why(why)
        self._require_model(model_id)
        suite = load_suite_ref(suite_ref)
        with self.store.locked(model_id) as tx:
            attached = tx.model_suites([model_id]).get(model_id)
            if attached is not None and attached.suite_sha256 == suite.digest():
                return _suite_output(
                    model_id,
                    "attach",
                    suite,
                    f"{model_id} runs suite {suite.name} at this version already; nothing changed",
                )
            if attached is not None:
                _check_why(why, required="a new version of an attached suite")
            old = Suite.model_validate_json(attached.suite_json) if attached else None
            changes = suite_changes(old, suite)
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
        message = f"{model_id} now runs suite {suite.name}"
        if changes[1]:
            message += (
                f"; this weakens the gate ({'; '.join(changes[1])}): a record that failed the "
                "earlier version is not deployable on its later pass until a releaser accepts it"
            )
        return _suite_output(model_id, "attach", suite, message, changes)

    def detach_suite(
        self, model_id: str, *, why: str | None = None, actor: str | None = None
    ) -> SuiteOutput:
        """Detach the model's suite (its target's suite, or the golden prompts, apply again):
        a change of the gate, so it needs ``why``."""
        from modelreg.schemas.suite import Suite
        from modelreg.suites import suite_changes

        self._require_model(model_id)
        with self.store.locked(model_id) as tx:
            attached = tx.model_suites([model_id]).get(model_id)
            if attached is None:
                return _suite_output(
                    model_id, "detach", None, f"{model_id} had no suite attached; nothing changed"
                )
            _check_why(why, required="detaching a suite")
            changes = suite_changes(Suite.model_validate_json(attached.suite_json), None)
            tx.detach_suite(actor or config.actor(), why=why, detail={"changes": changes[0]})
        return _suite_output(
            model_id, "detach", None, f"{model_id} has no suite of its own now", changes
        )

    def suite_add_case(
        self, suite_path: Path, run_id: str, *, case_id: str | None = None
    ) -> SuiteCaseOutput:
        """Turn failing outputs of a stored run into regression cases appended to a suite
        file (``modelreg suite add-case SUITE --from-run RUN``)."""
        from modelreg.schemas.suite import SuiteResult
        from modelreg.suites import append_case, load_suite, regression_case

        load_suite(suite_path)  # refuse a malformed suite before reading the run
        with self.store.read() as reads:
            found = reads.run(run_id.strip())
            checks = reads.run_checks(found.run_id) if found is not None else []
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
        suite = None
        added = []
        for case in cases:
            new_case = regression_case(case, origin=origin)
            suite = append_case(suite_path, new_case)
            added.append(new_case.id)
        assert suite is not None
        return SuiteCaseOutput(
            suite=str(suite_path),
            run_id=found.run_id,
            added=added,
            sha256=suite.digest(),
            message=f"added {len(added)} regression case(s) to {suite_path}; its digest is "
            "new, so earlier runs under it stop counting",
        )
