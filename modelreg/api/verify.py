"""Verify: running the checks on a target and recording their results (local, uploaded)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from modelreg import config, rules
from modelreg.api.core import Core
from modelreg.api.locations import Locations
from modelreg.api.views import (
    _reason_out,
    deployability_out,
    record_out,
)
from modelreg.errors import (
    InvalidInput,
    NotDeployable,
)
from modelreg.fingerprint import (
    Fingerprint,
    runtime_fingerprint,
    runtime_installed,
    runtime_part,
)
from modelreg.judging import (
    load_suite_ref,
    runtime_of,
    suite_in_force,
    suite_label,
)
from modelreg.schemas.output import (
    VerifyOutput,
    VerifyStaleOutput,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.progress import ProgressCallback, VerifyProgress
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.store import Store
    from modelreg.registry.tables import ModelSuiteRow
    from modelreg.registry.writes import Writes
    from modelreg.schemas.suite import Suite, SuiteResult
    from modelreg.schemas.verification import CheckResult
    from modelreg.targets import Target
    from modelreg.validators.base import VerifyOptions
    from modelreg.validators.child import RuntimeChild


@dataclass(frozen=True)
class _VerifyPlan:
    options: VerifyOptions
    suite: Suite | None
    reference: Record | None
    private_key: Any
    # A suite given for this run that is not the one in force: recorded, never counted.
    exploratory: bool = False
    # Why it never counts (``runs.purpose``): one_off (the suite above), investigate, drill.
    purpose: str | None = None
    # The files are read where ``add`` recorded them (no ``path``): what the digest check
    # finds there is recorded as a check of that location.
    at_root: bool = False


@dataclass(frozen=True)
class _Baseline:
    """What a relative gate compares with: the baseline record's counting run's suite result,
    or why there is none (``first_release``: nothing was ever production there)."""

    result: SuiteResult | None
    record_id: str | None
    problem: str | None
    first_release: bool = False


def counting_suite_result(
    reads: Reads, record_id: str, target: str, label: str | None
) -> tuple[SuiteResult | None, str | None]:
    """``record_id``'s counting run's suite result on ``target``, on suite version ``label``
    (None: on any version); or (None, why not) — its counting run is missing, on another
    suite version, or kept no suite result (the why starts with the record id)."""
    from modelreg.schemas.suite import SuiteResult

    runs = reads.latest_runs([record_id], target)[record_id]
    verdict = reads.verdict(record_id, target)
    run = next((r for r in runs if r.run_id == verdict.run_id), None)
    if run is None:
        return None, f"{record_id} has no counting run on {target}"
    if label is not None and (run.terms is None or run.terms.suite != label):
        return None, (
            f"{record_id}'s counting run on {target} is not on suite {label} (verify it on "
            "this version first)"
        )
    for check in reads.run_checks(run.run_id):
        found = check.result.evidence.get("suite_result")
        if check.result.required and isinstance(found, dict):
            return SuiteResult.model_validate(found), None
    return None, f"{record_id}'s counting run kept no suite result"


class Verify(Core):
    """Verify: running the checks on a target and recording their results. Collaborator:
    ``locations`` (``verify --fetch`` takes the bytes from the recorded locations)."""

    def __init__(self, store: Store, url: str, *, locations: Locations) -> None:
        super().__init__(store, url)
        self._locations = locations

    def verify(
        self,
        ref: str,
        target: str = "cpu",
        *,
        path: Path | None = None,
        options: VerifyOptions | None = None,
        suite: str | Path | None = None,
        reference: str | None = None,
        sign_key: Path | None = None,
        actor: str | None = None,
        progress: ProgressCallback | None = None,
        fetch: bool = False,
        prestarted: RuntimeChild | None = None,
        investigate: bool = False,
        purpose: Literal["investigate", "drill"] | None = None,
    ) -> VerifyOutput:
        """Run the record's required checks on ``target``, store every result with its
        evidence and fingerprint, and say whether it is now deployable there.

        ``path``: where the files are on this host, if not where they were added.
        ``suite``: a golden suite file (or "default-chat") for this run only; else the suite
        attached to the model, else the target's, else the golden prompts / Paris check. A run
        counts only under the suite in force.
        ``reference``: a record of the same tokenizer to measure agreement against (greedy
        top-1 and mean KL over a fixed text), judged by the suite's agreement thresholds.
        ``sign_key`` (or ``$MODELREG_SIGNING_KEY``): sign the run as an in-toto statement.
        ``prestarted``: a llama.cpp runtime child started beforehand
        (``modelreg.validators.llama_child.prestart``), so that it starts while the registry
        is read; used, or discarded when nothing runs.
        ``progress``: called with a ``modelreg.progress.ProgressEvent`` as each check starts
        and ends (and per suite case where one is observable); None: silent.
        ``fetch``: take the files from the record's recorded locations (every sha256 checked
        as they arrive) into this host's cache, and verify that copy.

        Files that are not where they are looked for are not bad bytes: nothing runs, and the
        run is recorded as ``missing_bytes`` — never counted, no verdict changed (the record's
        location there is recorded as not holding them).

        A held or retired record is refused (``NotDeployable``) before anything runs: its
        evidence could not make it deployable, and a generation would only waste the time.
        ``investigate``: run anyway on a held record (or an active one) as an exploratory run
        — recorded with purpose "investigate", never counted, the record left as it is (held
        stays held): the on-call reproduces on the held build without releasing it. A retired
        record is still refused. ``purpose``: why a run that never counts is made, for the
        API's own callers ("drill": a rollback drill); ``investigate`` is purpose
        "investigate".
        """
        from modelreg.progress import VerifyProgress
        from modelreg.targets import for_host

        watcher = VerifyProgress(progress)
        try:
            # The target as this host sees it: whether it is one of its hosts (checks that
            # need its hardware run only there), and its memory when it declares none.
            the_target = for_host(self.target(target))
            with self.store.read() as reads:
                record = reads.record(ref)
                # Refused here, before any check or runtime child runs. (The locked write
                # below judges the state again: a hold that lands mid-run still makes it
                # undeployable.)
                state = reads.state(record.id)
                attached = reads.model_suites().get(record.model_id)
                signatures = reads.artifact_signatures(record.id)
            if investigate:
                purpose = "investigate"
            refusal = rules.verify_refusal(
                record.id,
                record.model_id,
                target,
                state,
                record.hold_reasons,
                never_counted=purpose is not None,
            )
            if refusal is not None:
                raise NotDeployable(record.id, target, [refusal])
            from modelreg.validators.base import locate_files

            if fetch and path is None:
                path = self._fetched_copy(record)
            files = locate_files(record, path)
            reference_record = self.get(reference) if reference is not None else None
            plan = self._verify_plan(
                record, the_target, options, suite, attached, reference_record, sign_key
            )
            plan = dataclasses.replace(plan, at_root=path is None)
            if purpose is not None:
                # Never counted, whatever the suite: it decides no verdict.
                plan = dataclasses.replace(plan, exploratory=True, purpose=purpose)
        except BaseException:
            if prestarted is not None:
                prestarted.discard()
            raise
        import time

        from modelreg import runmetrics

        started = time.perf_counter()
        verdict = "error"
        missing = sorted(name for name, where in files.items() if not where.is_file())
        if missing:
            if prestarted is not None:
                prestarted.discard()
            verdict = "missing_bytes"
            try:
                return self._missing_bytes(record, the_target, files, missing, path, plan, actor)
            finally:
                runmetrics.observe(
                    "modelreg_verify_duration_seconds",
                    time.perf_counter() - started,
                    target=target,
                    verdict=verdict,
                )
        try:
            done = self._verify(
                record, the_target, files, plan, signatures, actor, prestarted, watcher
            )
            verdict = "deployable" if done.deployability.deployable else "not_deployable"
            return done
        finally:
            runmetrics.observe(
                "modelreg_verify_duration_seconds",
                time.perf_counter() - started,
                target=target,
                verdict=verdict,
            )

    def _fetched_copy(self, record: Record) -> Path:
        """A verified copy of the record's files in this host's cache (fetched from its
        recorded locations when not there yet; the digest check reads every byte again)."""
        from modelreg import config

        cache = config.home() / "cache" / "records" / record.id
        wanted = {f.path for f in record.manifest.files}
        if not all((cache / name).is_file() for name in wanted):
            import shutil

            shutil.rmtree(cache, ignore_errors=True)
            cache.parent.mkdir(parents=True, exist_ok=True)
            self._locations.fetch(record.id, cache)
        return cache

    def _missing_bytes(
        self,
        record: Record,
        target: Target,
        files: dict[str, Path],
        missing: list[str],
        path: Path | None,
        plan: _VerifyPlan,
        actor: str | None,
    ) -> VerifyOutput:
        """A verify whose files are not here: recorded, never counted (``missing_bytes``)."""
        from modelreg import host
        from modelreg.clock import utcnow
        from modelreg.registry.rows import new_run_id
        from modelreg.schemas.verification import CheckResult, Outcome

        where = str(path) if path is not None else str(record.root)
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        now = utcnow()
        result = CheckResult(
            check="digest",
            required=True,
            outcome=Outcome.UNAVAILABLE,
            classification="missing_bytes",
            summary=f"not on this host ({host.hostname()}) at {where}: {shown} — nothing was "
            "verified and no verdict changed",
            evidence={"missing": missing, "looked_in": where},
            started_at=now,
            finished_at=now,
        )
        fingerprint = runtime_fingerprint(target, runtime_of(record), suite=suite_label(plan.suite))
        run_id = new_run_id()
        actor = actor or config.actor()
        with self.store.locked(record.model_id) as tx:
            tx.save_run(
                record,
                target.name,
                [result],
                host.hostname(),
                fingerprint,
                run_id=run_id,
                purpose="missing_bytes",
            )
            tx.event(
                "verify",
                actor,
                record.id,
                target.name,
                None,
                {
                    "run_id": run_id,
                    "passed": False,
                    "blocking": ["digest: unavailable (missing_bytes)"],
                    "checks": {"digest": "unavailable"},
                    "missing_bytes": missing,
                    "exploratory": True,
                },
            )
            if path is None:
                self._root_checked(tx, record, False, f"missing on this host: {shown}", actor)
            deployable = tx.verdict(record.id, target.name)
            state = tx.state(record.id)
            files_out = tx.files([record.id])[record.id]
        return VerifyOutput(
            record=record_out(record, files_out, state),
            target=target.name,
            run_id=run_id,
            passed=False,
            deployability=deployability_out(deployable),
            checks=[result],
            signed_by=None,
            exploratory=True,
            purpose="missing_bytes",
        )

    @staticmethod
    def _root_checked(tx: Writes, record: Record, ok: bool, detail: str, actor: str) -> None:
        """Record what a verify found at the record's own location on this host (the one
        ``add`` recorded), when that is a recorded location."""
        from modelreg import host
        from modelreg.locations import file_url

        url = file_url(record.root)
        if url in {loc.url for loc in tx.locations([record.id])[record.id]}:
            tx.record_location_check(record.id, url, ok, detail, host.hostname(), "verify", actor)

    def _verify_plan(
        self,
        record: Record,
        target: Target,
        options: VerifyOptions | None,
        suite: str | Path | None,
        attached: ModelSuiteRow | None,
        reference_record: Record | None,
        sign_key: Path | None,
    ) -> _VerifyPlan:
        """Everything a verify needs decided before any check runs (bad input: exit 2 now)."""
        import os

        from modelreg.manifests.neuron_fit import recommended_verify_timeout
        from modelreg.validators.base import VerifyOptions

        options = options or VerifyOptions()
        if options.context is not None and target.serving is not None:
            # What is verified is what serves: a target that declares its serving context is
            # checked at that context, never at another one asked for this run.
            raise InvalidInput(
                f"context {options.context}: target {target.name} declares what it serves "
                f"({target.serving.describe()}), and verify checks that",
                "leave the context out, or change serving in the target's definition",
            )
        if options.timeout_seconds is None:
            # A Neuron cold start is minutes (the seed's bundle: 112 s neff load, 491 s cold
            # start); the target kind's default is raised to cover the bundle's measured one.
            seconds, _why = recommended_verify_timeout(record.manifest, target)
            options = dataclasses.replace(options, timeout_seconds=seconds)
        # The suite this run evaluates is the one its fingerprint names: ``suite``, else one
        # given in ``options`` (library callers), else the suite in force.
        in_force = suite_in_force(attached, target)
        given = load_suite_ref(suite) if suite is not None else options.suite
        chosen: Suite | None = given if given is not None else in_force
        # A one-off: a suite given for this run that is not the one in force. It is recorded
        # and shown, and decides nothing (the README's promise for `verify --suite`).
        exploratory = given is not None and suite_label(given) != suite_label(in_force)
        options = dataclasses.replace(options, suite=chosen)
        if reference_record is not None and reference_record.id == record.id:
            raise InvalidInput("`reference` must name another record than the one verified")
        # $MODELREG_SIGNING_KEY: a key file's path or the PEM itself (kept as a string).
        key_path: Path | str | None = sign_key or (os.environ.get("MODELREG_SIGNING_KEY") or None)
        private_key = None
        if key_path is not None:
            from modelreg.signing import load_private_key

            private_key = load_private_key(key_path)
        return _VerifyPlan(
            options,
            chosen,
            reference_record,
            private_key,
            exploratory,
            "one_off" if exploratory else None,
        )

    def _verify(
        self,
        record: Record,
        target: Target,
        files: dict[str, Path],
        plan: _VerifyPlan,
        signatures: list[dict[str, Any]],
        actor: str | None,
        warm_llama_child: RuntimeChild | None = None,
        progress: VerifyProgress | None = None,
    ) -> VerifyOutput:
        from concurrent.futures import ThreadPoolExecutor

        from modelreg.manifests.hf import unrecorded_runtime_files
        from modelreg.validators.staging import stage
        from modelreg.validators.verify import (
            agreement_unmeasured,
            bind_to_staging,
            reference_check,
            run_checks,
        )

        unrecorded = []
        if record.format == "safetensors":
            directories = {p.parent for p in files.values()}
            recorded = set(files)
            unrecorded = sorted(
                name for d in directories for name in unrecorded_runtime_files(d, recorded)
            )
        # The checks see a private view of exactly the record's files: the bytes the digest
        # check hashes are the bytes the runtime loads, and nothing else is there to load.
        with stage(files) as staged, ThreadPoolExecutor(1, "fingerprint") as beside:
            # What the run's fingerprint needs that no check decides (package versions, the
            # llama.cpp build's library digests, the CPU flags; all memoized) is worked out
            # while the model loads. The fingerprint itself is made from the evidence after
            # every check is in (``_record_results``).
            beside.submit(
                runtime_fingerprint, target, runtime_of(record), suite=suite_label(plan.suite)
            )
            results = run_checks(
                record,
                target,
                {**files, **staged.files},
                plan.options,
                warm_llama_child,
                artifact_signatures=signatures,
                progress=progress,
            )
            if plan.reference is not None:
                results.append(reference_check(record, plan.reference, staged.files, plan))
            elif (unmeasured := agreement_unmeasured(plan.suite, target)) is not None:
                results.append(unmeasured)
            results = bind_to_staging(results, staged.changes(), unrecorded)
        return self._record_results(record, target, results, plan, actor)

    def _record_results(
        self,
        record: Record,
        target: Target,
        results: list[CheckResult],
        plan: _VerifyPlan,
        actor: str | None,
    ) -> VerifyOutput:
        """verify's write half: the run's fingerprint (the inference runtime's libraries from
        the evidence), its signature, the one-off rule, and the row and event — stored and
        judged in one locked transaction. (The rules' state-machine test drives verify
        through here with synthetic check results.)"""
        from modelreg import host
        from modelreg.fingerprint import is_inference_library, libraries_of
        from modelreg.registry.rows import new_run_id
        from modelreg.validators.verify import exercised_runtime, measured_memory

        # Declared ⇒ exercised: a pass of the bundled runtime says nothing of a declared other.
        results = exercised_runtime(results, target)
        # Memory on the larger of measured and estimated, at the context the target serves.
        results = measured_memory(results, target)
        # Pass-rate drops relative to the baseline record, before anything is signed.
        results = self._relative_to_baseline(record, target, results, plan.suite)

        # Every mapped object stays in the evidence; the fingerprint names the runtime's own.
        libraries = sorted(
            {
                lib
                for r in results
                for lib in r.evidence.get("mapped_libraries", [])
                if is_inference_library(lib)
            }
        )
        fingerprint = runtime_fingerprint(
            target,
            runtime_of(record),
            libraries=libraries,
            suite=suite_label(plan.suite),
        )
        verdict = rules.run_verdict(
            (r.check, r.required, r.outcome, r.classification) for r in results
        )
        run_id = new_run_id()
        hostname = host.hostname()
        envelope, signer = None, None
        if plan.private_key is not None:
            envelope, signer = self._sign_run(
                record, target.name, run_id, hostname, results, fingerprint, plan.private_key
            )
        actor = actor or config.actor()
        runtime = runtime_of(record)
        observed = runtime_part(fingerprint)
        with self.store.locked(record.model_id) as tx:
            tx.save_run(
                record,
                target.name,
                results,
                hostname,
                fingerprint,
                run_id=run_id,
                envelope=envelope,
                signer_key_id=signer,
                exploratory=plan.exploratory,
                purpose=plan.purpose,
            )
            if target.is_local and not plan.exploratory and runtime_installed(runtime, observed):
                # What this host of the target runs: evidence produced under another runtime
                # there is stale from now on, for every reader. (A run that never counts says
                # nothing: a one-off changes no verdict.)
                tx.record_runtime_report(
                    target.name, runtime, hostname, observed, "verify", actor, run_id
                )
            digest = next((r for r in results if r.check == "digest"), None)
            if plan.at_root and digest is not None and digest.outcome.value in ("pass", "fail"):
                self._root_checked(
                    tx,
                    record,
                    digest.outcome.value == "pass",
                    "every sha256" if digest.outcome.value == "pass" else digest.summary,
                    actor,
                )
            tx.event(
                "verify",
                actor,
                record.id,
                target.name,
                None,
                {
                    "run_id": run_id,
                    "passed": verdict.passed,
                    "blocking": [b.describe() for b in verdict.blocking],
                    "checks": {r.check: r.outcome.value for r in results},
                    "signed_by": signer,
                    "suite": suite_label(plan.suite),
                    "libraries": len(libraries_of(fingerprint)),
                    "exploratory": plan.exploratory,
                    "purpose": plan.purpose,
                },
            )
            state = tx.state(record.id)
            deployable = tx.verdict(record.id, target.name)
            files_out = tx.files([record.id])[record.id]
        return VerifyOutput(
            record=record_out(record, files_out, state),
            target=target.name,
            run_id=run_id,
            passed=verdict.passed,
            deployability=deployability_out(deployable),
            checks=list(results),
            signed_by=signer,
            exploratory=plan.exploratory,
            purpose=plan.purpose,
        )

    def _baseline_result(self, record: Record, target: Target, suite: Suite) -> _Baseline:
        """The baseline of ``suite``'s pass-rate drops: production's counting run's result on
        this suite version, or why there is none (nothing was ever production there: a first
        release, judged by the suite's absolute gates)."""
        label = suite_label(suite)
        with self.store.read() as reads:
            production = reads.production(record.model_id, target.name)
            if production is None:
                # Production is the newest promotion: none, and nothing ever was production
                # there — a first release, with no baseline by nature. (A baseline that
                # exists but cannot be read stays a problem below: unmeasured, never a pass.)
                why = f"nothing is production for {record.model_id} on {target.name}"
                return _Baseline(None, None, why, first_release=True)
            baseline_id = production.record_id
            if baseline_id == record.id:
                return _Baseline(None, baseline_id, None)  # its own baseline: no drop
            found, problem = counting_suite_result(reads, baseline_id, target.name, label)
        return _Baseline(found, baseline_id, problem and f"production {problem}")

    def _relative_to_baseline(
        self, record: Record, target: Target, results: list[CheckResult], suite: Suite | None
    ) -> list[CheckResult]:
        """``results`` with the suite's gates relative to its baseline judged into the suite
        result of each required check that has one (a pass that fails them becomes a fail)."""
        from modelreg.schemas.suite import SuiteResult
        from modelreg.schemas.verification import Outcome
        from modelreg.validators.judge import baseline_gates, with_gates

        if suite is None or suite.thresholds.max_pass_rate_drop_vs is None:
            return results
        wanted = [r for r in results if r.required and "suite_result" in r.evidence]
        if not wanted:
            return results
        baseline = self._baseline_result(record, target, suite)
        judged = []
        for r in results:
            if r not in wanted:
                judged.append(r)
                continue
            result = SuiteResult.model_validate(r.evidence["suite_result"])
            gates = baseline_gates(
                suite,
                result,
                baseline.result,
                baseline.record_id,
                None if baseline.first_release else baseline.problem,
                first_release=baseline.first_release,
            )
            result = with_gates(result, gates)
            update: dict[str, Any] = {
                "evidence": r.evidence
                | {"suite_result": result.model_dump(mode="json"), "baseline": baseline.record_id}
            }
            if r.outcome is Outcome.PASS and not result.passed:
                update |= {
                    "outcome": Outcome.FAIL,
                    "classification": "gate_failed",
                    "summary": f"{r.summary} — " + "; ".join(result.reasons),
                }
            judged.append(r.model_copy(update=update))
        return judged

    def _sign_run(
        self,
        record: Record,
        target: str,
        run_id: str,
        hostname: str,
        results: Sequence[CheckResult],
        fingerprint: Fingerprint,
        private_key: Any,
    ) -> tuple[dict[str, Any], str]:
        from datetime import UTC, datetime

        from modelreg.signing import key_id, run_statement, sign_statement

        with self.store.read() as reads:
            files = reads.files([record.id])[record.id]
        statement = run_statement(
            record_id=record.id,
            model_id=record.model_id,
            target=target,
            run_id=run_id,
            host=hostname,
            file_digests={f.path: f.sha256 for f in files},
            checks=[r.model_dump(mode="json") for r in results],
            fingerprint=fingerprint,
            signed_at=datetime.now(UTC).isoformat(),
        )
        return sign_statement(statement, private_key), key_id(private_key.public_key())

    def stale(self, target: str) -> list[Record]:
        """Records whose latest run on ``target`` passed under a runtime that has since
        changed."""
        self.target(target)
        with self.store.read() as reads:
            records = reads.records(verified_on=target)
            verdicts = reads.verdicts([(r.id, target) for r in records])
        return [r for r in records if verdicts[(r.id, target)].stale]

    def verify_stale(
        self,
        target: str,
        *,
        options: VerifyOptions | None = None,
        sign_key: Path | None = None,
        actor: str | None = None,
    ) -> VerifyStaleOutput:
        """Re-verify every record whose evidence on ``target`` is stale, where it was added."""
        runs, skipped = [], []
        for record in self.stale(target):
            # A held or retired record is refused before anything runs (``verify``): no
            # evidence could make it deployable. Said in the output, never silently dropped.
            try:
                runs.append(
                    self.verify(record.id, target, options=options, sign_key=sign_key, actor=actor)
                )
            except NotDeployable as exc:
                skipped += [_reason_out(r) for r in exc.reasons]
        return VerifyStaleOutput(target=target, runs=runs, skipped=skipped)
