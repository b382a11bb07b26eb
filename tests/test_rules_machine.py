"""A model-based test of the rules (``../shared/design/invariants.md``): a Hypothesis state
machine over the public Python API, on SQLite, with synthetic check results and no runtime.

Each history interleaves adds, verify passes / failures / unavailable checks, one-off suite
runs, suite attach / detach, target redefinition, runtime changes that matter (a rebuilt
``libggml-cpu.so``) and that do not (markupsafe's ``_speedups.so``), promote, hold, release,
retire, rollback plan / apply / ``--to``, unsigned imported runs, a record's only copy
vanishing and coming back, suite versions that lower the floor after a failure and a
releaser's acceptance of them, promotions with an approval record, community quants
without a base revision, and webhooks added and removed (their outbox). After every step
the invariants are checked against what the API says. verify's checks are synthetic;
everything after them — fingerprint, the one-off rule, the locked write, every decision — is
verify's own code (``Registry._record_results``).

``make test`` runs the ``ci`` profile (bounded), ``make check`` the smaller ``check`` one;
``HYPOTHESIS_PROFILE=long`` runs longer.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from sqlalchemy import text

import modelreg
from modelreg import host
from modelreg.api.views import deployability_out
from modelreg.errors import InvalidInput, NoRollbackCandidate, NotDeployable
from modelreg.fingerprint import inference_view, runtime_fingerprint
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.webhooks import EVENTS
from tests.helpers import add_synthetic, key_pair, stored, suite_evidence, synthetic_bytes

settings.register_profile(
    "ci",
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "check",  # make check: the one-minute tier
    max_examples=10,
    stateful_step_count=25,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "debug",
    max_examples=20,
    stateful_step_count=25,
    deadline=None,
    report_multiple_bugs=False,
    phases=[Phase.generate],
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "long",
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
SEEN: Counter[str] = Counter()  # what the histories reached (printed with -s)

MODEL = "rules/machine"
TARGET = "lab"
CHECKS = ("digest", "host-compat", "gguf-cpu-smoke")
SUITE = """schema_version: 1
name: {name}
thresholds: {{min_pass_rate: {rate}}}
cases:
  - id: capital
    prompt: What is the capital of France?
    expect: {{mode: contains, value: {answer}}}
"""


def _probe(probe: str, served: int | None) -> dict[str, Any]:
    """A served-context probe as the llama.cpp child reports it: ``full`` filled the served
    context, ``timeout`` stopped at its bound halfway, ``short`` says ok but covered half of
    it (a truncated prompt), ``none`` left no probe."""
    if probe == "none" or served is None:
        return {}
    evaluated = served if probe == "full" else served // 2
    return {
        "served_context_probe": {
            "status": "timeout" if probe == "timeout" else "ok",
            "tokens_requested": served,
            "tokens_evaluated": evaluated,
            "prompt_tokens_per_s": 150.0,
            "deadline_s": 120.0,
            "resources": {"peak_rss_bytes": 300 << 20},
        }
    }


def _suite_result(suite: Path, passed: bool) -> dict[str, Any]:
    """A suite result as the smoke check stores it: ``suite``'s one case answered right (or
    not), judged by its thresholds."""
    from modelreg.suites import load_suite

    loaded = load_suite(suite)
    case = loaded.cases[0]
    return suite_evidence(loaded, {case.id: case.expect.value or ""} if passed else {})


def _results(
    outcome: str,
    libraries: list[str],
    probe: str = "full",
    served: int | None = None,
    suite: Path | None = None,
) -> list[CheckResult]:
    now = datetime.now(UTC)
    results = []
    for i, check in enumerate(CHECKS):
        # The smoke check carries what the runtime child mapped, as the real one does, and
        # the served-context probe when the target declares what it serves; the last check
        # the suite result of the suite it ran (the run's outcome).
        evidence: dict[str, Any] = (
            {"mapped_libraries": libraries} | _probe(probe, served)
            if check == "gguf-cpu-smoke"
            else {}
        )
        if suite is not None and i == len(CHECKS) - 1:
            evidence |= _suite_result(suite, outcome == "pass")
        results.append(
            CheckResult(
                check=check,
                required=True,
                outcome=Outcome(outcome if i == len(CHECKS) - 1 else "pass"),
                summary=f"synthetic {outcome}",
                evidence=evidence,
                started_at=now,
                finished_at=now,
            )
        )
    return results


PG_URL = os.environ.get("MODELREG_TEST_POSTGRES_URL")


class RegistryMachine(RuleBasedStateMachine):
    records = Bundle("records")
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="modelreg-machine-"))
        self.old_home = os.environ.get("MODELREG_HOME")
        os.environ["MODELREG_HOME"] = str(self.dir / "home")
        self.schema: str | None = None
        self.registry = modelreg.open(self._url())
        self.registry.allow_webhook_hosts(["127.0.0.1"])  # the machine's hooks are on loopback
        # The fast path's answers are compared with a derivation from scratch: a registry over
        # the same database that keeps nothing between calls.
        self.fresh = modelreg.open(self.registry.url)
        self.fresh.derived.enabled = False
        self.memory = 16
        self.trusted = False
        self.declared: str | None = None  # a runtime: declaration of the target
        self.serving: int | None = None  # the context the target declares it serves
        self.gates: int | None = None  # a speed floor (tok/s) the target declares
        self.private, self.public = key_pair(self.dir, "ci")
        self._define_target()
        self.ggml = self.dir / "lib" / "libggml-cpu.so"
        self.speedups = self.dir / "lib" / "_speedups.cpython-311-x86_64-linux-gnu.so"
        self.ggml.parent.mkdir()
        self.ggml.write_bytes(b"ggml build 1")
        self.speedups.write_bytes(b"markupsafe")
        self.attached = self.dir / "attached.yaml"
        self.attached.write_text(SUITE.format(name="attached", answer="Paris", rate=1.0))
        self.one_off = self.dir / "one-off.yaml"
        self.one_off.write_text(SUITE.format(name="exploration", answer="Lyon", rate=1.0))
        # The model's attached suite's pass rate (None: none attached); per record, the rates
        # of the suites its counted runs failed, the rate its newest counted run ran under,
        # and the rates a releaser accepted after a relaxation.
        self.suite_rate: float | None = None
        self.failed_rates: dict[str, list[float]] = {}
        self.last_rate: dict[str, float | None] = {}
        self.accepted: set[tuple[str, float]] = set()
        self.community: set[str] = set()  # quantized records without a base revision
        self.next_id = 0
        self.added: list[str] = []
        # Webhook id -> (its events, the newest event id before it was added, the newest
        # before it was removed or None): what the outbox must hold for it.
        self.hooks: dict[int, tuple[frozenset[str], int, int | None]] = {}
        self._add_hook(frozenset(EVENTS))

    def _url(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.dir / 'registry.db'}"
        import uuid

        from sqlalchemy import create_engine, text

        assert PG_URL is not None
        self.schema = f"m_{uuid.uuid4().hex[:16]}"
        admin = create_engine(PG_URL)
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {self.schema}"))
        admin.dispose()
        separator = "&" if "?" in PG_URL else "?"
        return f"{PG_URL}{separator}options=-csearch_path%3D{self.schema}"

    def teardown(self) -> None:
        self.registry.store.engine.dispose()
        self.fresh.store.engine.dispose()
        if self.schema is not None:
            from sqlalchemy import create_engine, text

            assert PG_URL is not None
            admin = create_engine(PG_URL)
            with admin.begin() as connection:
                connection.execute(text(f"DROP SCHEMA {self.schema} CASCADE"))
            admin.dispose()
        shutil.rmtree(self.dir, ignore_errors=True)
        for record_id in self.added:
            shutil.rmtree(synthetic_bytes() / record_id, ignore_errors=True)
        if self.old_home is None:
            os.environ.pop("MODELREG_HOME", None)
        else:
            os.environ["MODELREG_HOME"] = self.old_home

    # -- helpers -----------------------------------------------------------------------------

    def _define_target(self) -> None:
        spec = self.dir / "targets.yaml"
        trust = f"    trust: {{verifier_keys: ['{self.public}']}}\n" if self.trusted else ""
        if self.declared == "image":
            trust += f"    image: registry.example.com/llm@sha256:{'a' * 64}\n"
        elif self.declared is not None:
            trust += f"    runtime: {{llama.cpp: '{self.declared}'}}\n"
        if self.serving is not None:
            trust += f"    serving: {{context: {self.serving}}}\n"
        if self.gates is not None:
            trust += f"    gates: {{min_decode_tokens_per_s: {self.gates}}}\n"
        spec.write_text(
            f"targets:\n  {TARGET}:\n    kind: cpu\n    hosts: ['{host.hostname()}']\n"
            f"    memory_gib: {self.memory}\n" + trust
        )
        self.registry.define_targets(spec, actor="machine")

    def verdicts(self) -> dict[str, str]:
        return {
            r: self.registry.deployability(r, TARGET).summary
            for r in self.added
            if stored(self.registry).verified_targets(r)
        }

    def deployable(self) -> dict[str, bool]:
        return {r: self.registry.deployability(r, TARGET).deployable for r in self.added}

    def production(self) -> str | None:
        entries = self.registry.status(MODEL, TARGET).entries if self.added else []
        return entries[0].record.record_id if entries else None

    def verify(
        self, record_id: str, outcome: str, suite: Path | None = None, probe: str = "full"
    ) -> Any:
        record = self.registry.get(record_id)
        target = self.registry.target(TARGET)
        attached = stored(self.registry).model_suites().get(MODEL)
        plan = self.registry._verify_plan(record, target, None, suite, attached, None, None)
        ran = suite or (self.attached if self.suite_rate is not None else None)
        libraries = [str(self.ggml), str(self.speedups)]
        results = _results(outcome, libraries, probe, self.serving, ran)
        out = self.registry._record_results(record, target, results, plan, "machine")
        if not out.exploratory:
            self.last_rate[record_id] = self.suite_rate
            if outcome != "pass" and self.suite_rate is not None:
                self.failed_rates.setdefault(record_id, []).append(self.suite_rate)
        return out

    # -- steps -------------------------------------------------------------------------------

    @initialize(target=records)
    def a_release_in_production(self) -> Any:
        """Every history starts where incidents start: a verified record in production."""
        record = self.add()
        self.verify(record, "pass")
        self.registry.promote(record, TARGET, why="first release", actor="machine")
        return record

    @precondition(lambda self: len(self.added) < 5)
    @rule(target=records)
    def add(self) -> Any:
        self.next_id += 1
        record_id = add_synthetic(self.registry, self.next_id, MODEL)
        self.added.append(record_id)
        return record_id

    @precondition(lambda self: len(self.added) < 5)
    @rule(target=records)
    def add_community_quant(self) -> Any:
        """A Q4_1 file whose base model is unknown, its manifest stating no hold: held
        (``provenance_unknown``) from its facts, whatever the manifest says — and so never
        deployable, whatever its runs (``deployable_has_a_counting_run``)."""
        self.next_id += 1
        quantization = {"tensor_types": {"Q4_1": {"tensors": 1, "params": 1000, "bytes": 600}}}
        record_id = add_synthetic(
            self.registry, self.next_id, MODEL, quantization=quantization, hold_reasons=[]
        )
        self.added.append(record_id)
        self.community.add(record_id)
        verdict = self.registry.deployability(record_id, TARGET)
        assert "provenance_unknown" in [r.code for r in verdict.reasons]
        return record_id

    @rule(
        record=records,
        outcome=st.sampled_from(["pass", "pass", "fail", "unavailable"]),
        probe=st.sampled_from(["full", "full", "timeout", "short", "none"]),
    )
    def verify_run(self, record: str, outcome: str, probe: str) -> None:
        out = self.verify(record, outcome, probe=probe)
        assert not out.exploratory
        if outcome != "pass":
            assert not out.deployability.deployable
        if self.serving is not None and probe != "full":
            # Invariant 7 (serving): a served context nobody measured is unknown, never a pass.
            assert not out.deployability.deployable
            event("served context unmeasured")

    @rule(record=records, outcome=st.sampled_from(["pass", "fail"]))
    def one_off_run(self, record: str, outcome: str) -> None:
        """Invariant 5: a one-off run changes no verdict and no gate."""
        before, production = self.verdicts(), self.production()
        gate = self._gates()
        out = self.verify(record, outcome, suite=self.one_off)
        assert out.exploratory
        after = self.verdicts()
        assert {r: after[r] for r in before} == before
        assert self.production() == production and self._gates() == gate

    @precondition(lambda self: bool(self.added))
    @rule(rate=st.sampled_from([1.0, 0.5]))
    def attach_suite(self, rate: float) -> None:
        """A new version of the model's suite: the same case, a stricter or looser rate."""
        self.attached.write_text(SUITE.format(name="attached", answer="Paris", rate=rate))
        if self.suite_rate is not None and self.suite_rate != rate:
            with pytest.raises(InvalidInput, match="needs a reason"):
                self.registry.attach_suite(MODEL, self.attached, actor="machine")
        out = self.registry.attach_suite(MODEL, self.attached, why="machine", actor="machine")
        if self.suite_rate is not None and rate < self.suite_rate:
            assert out.weakens == [f"min_pass_rate {self.suite_rate} → {rate}"]
        else:
            assert out.weakens == []
        self.suite_rate = rate

    @rule(record=records, accept=st.booleans())
    def relax_after_failure(self, record: str, accept: bool) -> None:
        """The rationalisation the guide warns of, in one step: the record fails the strict
        version, the floor is lowered, the record passes (and a releaser may sign it)."""
        self.attach_suite(1.0)
        self.verify(record, "fail")
        self.attach_suite(0.5)
        self.verify(record, "pass")
        if accept:
            self.accept_relaxed_gate(record)

    @precondition(lambda self: bool(self.added))
    @rule()
    def detach_suite(self) -> None:
        self.registry.detach_suite(MODEL, why="machine", actor="machine")
        self.suite_rate = None

    @rule(
        memory=st.sampled_from([16, 32]),
        trusted=st.booleans(),
        declared=st.sampled_from([None, None, "bundled", "ik_llama.cpp b3900", "image"]),
        serving=st.sampled_from([None, None, 2048, 4096]),
        gates=st.sampled_from([None, None, 2, 20]),
    )
    def redefine_target(
        self,
        memory: int,
        trusted: bool,
        declared: str | None,
        serving: int | None,
        gates: int | None,
    ) -> None:
        from modelreg.fingerprint import package_version

        if declared == "bundled":
            declared = f"llama-cpp-python {package_version('llama-cpp-python')}"
        self.memory, self.trusted, self.declared = memory, trusted, declared
        self.serving, self.gates = serving, gates
        self._define_target()

    @rule(
        record=records,
        outcome=st.sampled_from(["pass", "fail"]),
        age=st.integers(1, 600),
        dishonest=st.sampled_from([None, "finished after signing", "signed in the future"]),
        probe=st.sampled_from(["full", "full", "none"]),
    )
    def upload_signed_run(
        self, record: str, outcome: str, age: int, dishonest: str | None, probe: str
    ) -> None:
        """A run signed on the target host, uploaded: signed ``age`` minutes ago (an older
        signed pass may arrive after a newer failure). Dishonest times are refused and change
        nothing; an honest run is ordered by its signed time, never by its claimed times."""
        from datetime import timedelta

        from modelreg.registry.store import new_run_id
        from modelreg.signing import load_private_key, run_statement, sign_statement

        now = datetime.now(UTC)
        signed_at = now - timedelta(minutes=age)
        finished = signed_at - timedelta(seconds=1)
        if dishonest == "signed in the future":
            signed_at = now + timedelta(days=1)
        from modelreg.validators.verify import measured_memory

        target = self.registry.target(TARGET)
        # As verify wrote them on the target host: host-compat judged on what was measured
        # there (``none``: a verifier that skipped the served-context probe).
        results = _results(outcome, [], probe, self.serving)
        if probe != "none":
            results = measured_memory(results, target)
        # host-compat passes in every synthetic run: without the probe it claims a pass it
        # never measured, so the upload is refused whatever the smoke check said.
        skipped_probe = probe == "none" and self.serving is not None
        fingerprint = runtime_fingerprint(
            target, "llama.cpp", libraries=[str(self.ggml)], suite=self.attached_label()
        )
        files = stored(self.registry).files([record])[record]
        statement = run_statement(
            record_id=record,
            model_id=MODEL,
            target=TARGET,
            run_id=new_run_id(),
            host="lab-host",
            file_digests={f.path: f.sha256 for f in files},
            checks=[r.model_dump(mode="json") for r in results],
            fingerprint=fingerprint,
            signed_at=signed_at.isoformat(),
        )
        envelope = sign_statement(statement, load_private_key(self.private))
        claimed = now + timedelta(hours=1) if dishonest == "finished after signing" else finished
        results = [r.model_copy(update={"finished_at": claimed}) for r in results]
        before = self.verdicts()
        try:
            self.registry.upload_run(
                record,
                TARGET,
                results,
                host="lab-host",
                fingerprint=fingerprint,
                envelope=envelope,
                actor="machine",
            )
        except InvalidInput:
            # Refused: dishonest times, or a pass that never measured what the target serves.
            assert dishonest is not None or skipped_probe
            assert self.verdicts() == before
            return
        assert dishonest is None, "a run with dishonest times was accepted"
        assert not skipped_probe, "host-compat passed unmeasured and the run was accepted"

    @rule()
    def rebuild_ggml(self) -> None:
        """Invariant 6, the cause side: a rebuilt inference library expires what ran on it."""
        before = {r: self.registry.deployability(r, TARGET) for r in self.added}
        self.ggml.write_bytes(self.ggml.read_bytes() + b"+")
        for record_id, verdict in before.items():
            if verdict.deployable:
                now = self.registry.deployability(record_id, TARGET)
                assert not now.deployable and now.stale, now.summary

    @rule()
    def rotate_trusted_key(self) -> None:
        """The trusted key file gets another key (a rotation, same path): what it verified no
        longer counts, and what is derived from it must be worked out again."""
        self.private, self.public = key_pair(self.dir, "ci")
        SEEN["key rotated"] += 1

    @rule(side=st.booleans())
    def edit_local_targets(self, side: bool) -> None:
        """The local targets file (beside the shared definitions) gains or loses a target."""
        local = self.dir / "home" / "targets.yaml"
        local.parent.mkdir(parents=True, exist_ok=True)
        if side:
            local.write_text(f"targets:\n  side:\n    kind: cpu\n    memory_gib: {self.memory}\n")
        else:
            local.unlink(missing_ok=True)

    @rule()
    def touch_unrelated_extension(self) -> None:
        """Invariant 6, the other side: an unrelated extension module expires nothing."""
        before = self.verdicts()
        self.speedups.write_bytes(self.speedups.read_bytes() + b"+")
        assert self.verdicts() == before

    @rule(record=records, approval=st.booleans())
    def promote(self, record: str, approval: bool) -> None:
        """(With an approval record sometimes: the fast path must show the one production
        was promoted with — compared in ``fast_path_is_a_fresh_derivation``.)"""
        from datetime import date, timedelta

        verdict = self.registry.deployability(record, TARGET)
        given: dict[str, Any] = (
            {
                "owner": f"owner-{self.next_id}",
                "limitations": ["synthetic"],
                "retest_by": date.today() + timedelta(days=self.next_id),
            }
            if approval
            else {}
        )
        try:
            self.registry.promote(record, TARGET, why="machine", actor="machine", **given)
        except InvalidInput:
            # The production record again with another approval: refused, nothing changed.
            assert approval and self.production() == record
        except NotDeployable:
            assert not verdict.deployable
        else:
            # Invariant 2: a promote never makes a held or retired record production.
            assert verdict.deployable
            assert self.production() == record
            assert stored(self.registry).state(record).state.value == "active"

    @rule(record=records)
    def accept_relaxed_gate(self, record: str) -> None:
        """A releaser signs a relaxation: it counts for those terms only, and only when a
        relaxation is all that stands in the way (otherwise nothing is written)."""
        verdict = self.registry.deployability(record, TARGET)
        relaxed = [r for r in verdict.reasons if r.code == "gate_relaxed_after_failure"]
        try:
            self.registry.promote(
                record, TARGET, accept_relaxed_gate=True, why="signed off", actor="machine"
            )
        except (NotDeployable, InvalidInput):
            assert not relaxed or len(relaxed) < len(verdict.reasons) or not verdict.deployable
            if relaxed and len(relaxed) < len(verdict.reasons):
                after = self.registry.deployability(record, TARGET)
                assert [r.code for r in after.reasons] == [r.code for r in verdict.reasons]
            return
        assert verdict.deployable or relaxed
        if relaxed:
            self.accepted.add((record, self.last_rate[record]))  # type: ignore[arg-type]
            SEEN["relaxation accepted"] += 1
        assert self.production() == record

    @rule(record=records)
    def hold(self, record: str) -> None:
        production = self.production()
        try:
            self.registry.hold(record, "machine", actor="machine")
        except InvalidInput:
            assert stored(self.registry).state(record).state.value == "retired"
        assert self.production() == production  # a hold never moves the pointer

    @rule(record=records)
    def release(self, record: str) -> None:
        try:
            self.registry.release(record, "machine", actor="machine")
        except InvalidInput:
            assert stored(self.registry).state(record).state.value != "held"

    @rule(record=records)
    def retire(self, record: str) -> None:
        try:
            self.registry.retire(record, "machine", actor="machine")
        except InvalidInput:
            assert stored(self.registry).state(record).state.value == "retired"

    @rule(twice=st.booleans())
    def rollback(self, twice: bool) -> None:
        """Invariant 1: the plan's decision is what the apply does; applying again changes
        nothing while production is the outcome and deployable."""
        self._plan_then_apply(None, twice)

    @rule(record=records)
    def rollback_to(self, record: str) -> None:
        self._plan_then_apply(record, False)

    @rule(record=records)
    def import_unsigned_run(self, record: str) -> None:
        """Invariant 5 again: a run that does not count changes nothing and never reads as
        failing."""
        before = self.deployable()
        the_record = self.registry.get(record)
        fingerprint = runtime_fingerprint(self.registry.target(TARGET), "llama.cpp")
        with self.registry.store.locked(MODEL) as tx:
            tx.save_run(
                the_record,
                TARGET,
                _results("fail", []),
                "elsewhere",
                fingerprint,
                origin="imported",
                origin_detail="imported by the machine",
            )
        # (The wording may go from "never verified" to "not counted"; the answer may not.)
        assert self.deployable() == before
        verdict = self.registry.deployability(record, TARGET)
        runs = stored(self.registry).latest_runs([record], TARGET)[record]
        if not self.trusted and all(r.origin != "local" for r in runs):
            assert "not counted (imported, unsigned)" in verdict.summary

    @rule(record=records)
    def lose_copy(self, record: str) -> None:
        shutil.rmtree(synthetic_bytes() / record, ignore_errors=True)

    @rule(record=records)
    def restore_copy(self, record: str) -> None:
        manifest = self.registry.get(record).manifest
        directory = synthetic_bytes() / record
        directory.mkdir(parents=True, exist_ok=True)
        for f in manifest.files:
            assert f.bytes is not None
            (directory / f.path).write_bytes(b"\0" * f.bytes)

    def _plan_then_apply(self, to: str | None, twice: bool) -> None:
        if not self.added:
            return
        bad_to = False
        try:
            plan = self.registry.rollback_plan(MODEL, TARGET, to=to)
            if plan.decision == "no_candidate":
                assert plan.candidate is None and plan.message.startswith("no rollback")
                plan = None
        except InvalidInput:
            plan, bad_to = None, True
        production = self.production()
        try:
            applied = self.registry.rollback(MODEL, TARGET, why="machine", to=to, actor="machine")
        except NoRollbackCandidate:
            assert plan is None and not bad_to, "the plan named a rollback the apply refused"
            assert self.production() == production
            return
        except InvalidInput:
            assert bad_to and self.production() == production
            return
        assert plan is not None, "the apply rolled back where the plan found no candidate"
        assert applied.decision == plan.decision
        if plan.decision == "rollback":
            assert plan.candidate is not None and applied.production is not None
            assert applied.production.record.record_id == plan.candidate.record.record_id
            assert self.production() == plan.candidate.record.record_id
            # Invariant 2: a rollback never makes a held or retired record production.
            assert applied.production.record.state.state == "active"
            assert plan.production is not None
            assert stored(self.registry).state(plan.production.record.record_id).state.value in (
                "held",
                "retired",
            )
        else:
            assert self.production() == production
        if twice and to is None:
            again = self.registry.rollback(MODEL, TARGET, why="machine", actor="machine")
            assert again.decision == "nothing_to_do" and again.applied is None
            assert self.production() == (applied.production or plan.production).record.record_id

    def _gates(self) -> dict[str, bool]:
        production = self.production()
        if production is None:
            return {}
        files = stored(self.registry).files([production])[production]
        return {f.sha256: self.registry.gate(MODEL, TARGET, f.sha256).passed for f in files}

    # -- invariants ---------------------------------------------------------------------------

    def _newest_event_id(self) -> int:
        with self.registry.store.engine.connect() as connection:
            return int(connection.execute(text("SELECT coalesce(max(id), 0) FROM events")).scalar())

    def _add_hook(self, kinds: frozenset[str]) -> None:
        before = self._newest_event_id()
        hook = self.registry.add_webhook("http://127.0.0.1:9/machine", sorted(kinds)).webhook
        self.hooks[hook.id] = (kinds, before, None)

    @rule(kinds=st.sets(st.sampled_from(EVENTS), min_size=1), remove=st.booleans())
    def change_webhooks(self, kinds: set[str], remove: bool) -> None:
        """A webhook subscribed to some kinds, and (maybe) the oldest live one removed."""
        self._add_hook(frozenset(kinds))
        live = [i for i, (_, _, removed) in self.hooks.items() if removed is None]
        if remove and len(live) > 1:
            before = self._newest_event_id()
            assert self.registry.remove_webhook(live[0], why="machine").changed
            kinds_of, added, _ = self.hooks[live[0]]
            self.hooks[live[0]] = (kinds_of, added, before)

    @invariant()
    def every_event_is_in_the_outbox_of_each_hook_live_then(self) -> None:
        """Invariant (the fleet): each committed event of a kind a webhook is sent has exactly
        one delivery to each webhook live when it committed, and no delivery exists without its
        event (a rolled-back step leaves none)."""
        with self.registry.store.engine.connect() as connection:
            events = connection.execute(text("SELECT id, kind FROM events")).all()
            deliveries = Counter(
                (e, w)
                for e, w in connection.execute(
                    text("SELECT event_id, webhook_id FROM webhook_deliveries")
                ).all()
            )
        expected = Counter(
            (event_id, hook_id)
            for event_id, kind in events
            for hook_id, (kinds, added, removed) in self.hooks.items()
            if kind in kinds and event_id > added and (removed is None or event_id <= removed)
        )
        assert deliveries == expected

    @invariant()
    def a_community_quant_without_provenance_is_never_deployable(self) -> None:
        for record in self.community:
            assert not self.registry.deployability(record, TARGET).deployable
        assert self.production() not in self.community  # never promoted, never rolled back to

    @invariant()
    def a_relaxed_gate_counts_only_once_accepted(self) -> None:
        """Invariant 8 (release discipline): a record that failed a suite version and passed a
        looser one is deployable only once a releaser accepted that version's terms."""
        for record in self.added:
            rate = self.last_rate.get(record)
            failed = [f for f in self.failed_rates.get(record, []) if rate is not None and f > rate]
            if not failed:
                continue
            verdict = self.registry.deployability(record, TARGET)
            assert rate is not None
            if (record, rate) not in self.accepted:
                assert not verdict.deployable, f"{record} passed {rate} after failing {failed}"
                if verdict.reasons and all(
                    r.code == "gate_relaxed_after_failure" for r in verdict.reasons
                ):
                    SEEN["relaxed gate held"] += 1

    @invariant()
    def gate_is_status(self) -> None:
        """Invariant 3: the gate passes for X iff status says production is deployable, X is
        one of its files, and a recorded location has them."""
        if not self.added:
            return
        status = self.registry.status(MODEL, TARGET)
        for record_id in self.added[:2]:
            sha = stored(self.registry).files([record_id])[record_id][0].sha256
            gate = self.registry.gate(MODEL, TARGET, sha)
            expected = bool(
                status.entries
                and status.entries[0].record.record_id == record_id
                and status.entries[0].deployability.deployable
                and status.entries[0].fetch_from is not None
            )
            assert gate.passed == expected, (gate, status.entries)

    @invariant()
    def deployable_has_a_counting_run(self) -> None:
        """Invariant 4: every "deployable" rests on a local, non-exploratory run that passed
        every required check under the current fingerprint (runtime, target, suite)."""
        target = self.registry.target(TARGET)
        for record_id in self.added:
            verdict = self.registry.deployability(record_id, TARGET)
            if not verdict.deployable:
                continue
            assert verdict.run_id is not None
            run = stored(self.registry).run(verdict.run_id)
            assert run is not None and not run.exploratory
            if self.trusted:
                # The newest signed run by signed time decides, and only it.
                assert run.envelope_json is not None and run.signed_at is not None
                signed = [
                    r.signed_at
                    for r in stored(self.registry).latest_runs([record_id], TARGET)[record_id]
                    if r.envelope is not None and r.signed_at is not None
                ]
                assert max(signed) == run.signed_at.astimezone(UTC)
                event("deployable on a signed run")
                SEEN["signed"] += 1
            else:
                assert run.origin == "local"
                # Invariant 7: a declared runtime the bundled one is not was never exercised.
                assert self.declared is None or self.declared.startswith("llama-cpp-python")
                event("deployable on a local run")
                SEEN["local"] += 1
            checks = stored(self.registry).run_checks(verdict.run_id)
            assert all(c.result.outcome in (Outcome.PASS, Outcome.SKIPPED) for c in checks)
            if self.serving is not None:
                # Invariant 7 (serving): memory was measured at the context served now, all
                # of it.
                (compat,) = [c for c in checks if c.result.check == "host-compat"]
                probe = compat.result.evidence.get("served_context_probe") or {}
                assert probe.get("status") == "ok", compat.result.evidence
                assert probe["tokens_requested"] == self.serving
                assert probe["tokens_evaluated"] >= self.serving * 0.95
                event("deployable at a measured served context")
            in_force = self.attached_label()
            current = runtime_fingerprint(
                target,
                "llama.cpp",
                libraries=[str(self.ggml)],
                suite=in_force,
            )
            assert inference_view(checks[0].fingerprint) == inference_view(current)

    def attached_label(self) -> str | None:
        from modelreg.api import suite_label

        row = stored(self.registry).model_suites().get(MODEL)
        if row is None:
            return None
        from modelreg.schemas.suite import Suite

        return suite_label(Suite.model_validate_json(row.suite_json))

    @invariant()
    def nothing_uncounted_reads_failing(self) -> None:
        """Imported runs that do not count read "not counted", never "failing"."""
        if not self.added:
            return
        for entry in self.registry.status(MODEL, TARGET).entries:
            codes = {r.code for r in entry.deployability.reasons}
            if codes == {"untrusted_evidence"}:
                assert entry.deployability.now == "uncounted"

    @invariant()
    def browsing_shows_the_verdicts_the_rules_give(self) -> None:
        """The records page and search (``api.browse``) are another read of the verdicts: each
        record's verdict on the target there is ``deployability``'s, production is where
        status says, a verdict filter picks exactly the records with that verdict, and a
        file's sha256 finds its record."""
        if not self.added:
            return
        from modelreg.api.browse import VERDICTS

        page = self.registry.browse(model=MODEL, target=TARGET, limit=1000)
        production = self.production()
        for item in page.records:
            record_id = item.record.record_id
            shown = {d.target: d for d in item.deployability}[TARGET]
            expected = deployability_out(self.registry.deployability(record_id, TARGET))
            assert (shown.deployable, shown.now, [r.code for r in shown.reasons]) == (
                expected.deployable,
                expected.now,
                [r.code for r in expected.reasons],
            ), record_id
            assert (TARGET in item.production_on) == (record_id == production)
        for now in VERDICTS:
            picked = self.registry.browse(model=MODEL, target=TARGET, now=now, limit=1000)
            assert {i.record.record_id for i in picked.records} == {
                i.record.record_id
                for i in page.records
                if {d.target: d for d in i.deployability}[TARGET].now == now
            }
        for record_id in self.added[:2]:
            sha = stored(self.registry).files([record_id])[record_id][0].sha256
            assert record_id in {m.record.record_id for m in self.registry.search(sha).matches}

    @invariant()
    def fast_path_is_a_fresh_derivation(self) -> None:
        """What reads answer from this process's derivations (``api.derived``) is what a
        derivation from scratch answers: status (one model on one target, one model, every
        model; objects and the served JSON), the matrix and every gate."""
        from modelreg.textsafe import for_json

        for model, target in ((MODEL, TARGET), (MODEL, None), (None, None)):
            if model is not None and not self.added:
                continue
            fresh = self.fresh.status(model, target).model_dump_json()
            assert self.registry.status(model, target).model_dump_json() == fresh
            assert self.registry.status_json(model, target) == for_json(fresh)
        fresh_matrix = self.fresh.matrix().model_dump_json()
        assert self.registry.matrix().model_dump_json() == fresh_matrix
        for record_id in self.added:
            for f in stored(self.registry).files([record_id])[record_id]:
                gate = self.registry.gate(MODEL, TARGET, f.sha256)
                fresh_gate = self.fresh.gate(MODEL, TARGET, f.sha256)
                assert gate == fresh_gate
                # The server's event-loop answer, from what is derived (None: read in full).
                peeked = self.registry.store.peek([MODEL])
                derived = self.registry.derived_read(MODEL, TARGET, f.sha256, peeked)
                if derived is not None:
                    code = 200 if fresh_gate.passed else 409
                    assert derived == (code, for_json(fresh_gate.model_dump_json()))
                    SEEN["derived gate compared"] += 1
        if self.added:
            derived = self.registry.derived_read(
                MODEL, TARGET, None, self.registry.store.peek([MODEL])
            )
            fresh = for_json(self.fresh.status(MODEL, TARGET).model_dump_json())
            assert derived is None or derived == (200, fresh)
        SEEN["fast path compared"] += 1


class PostgresMachine(RegistryMachine):
    backend = "postgresql"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_rules_state_machine(backend: str) -> None:
    if backend == "postgresql" and not PG_URL:
        pytest.skip("PostgreSQL: set MODELREG_TEST_POSTGRES_URL (make test starts a server)")
    machine = RegistryMachine if backend == "sqlite" else PostgresMachine
    machine.TestCase.settings = settings.get_profile(PROFILE)
    machine.TestCase().runTest()
    print(f"deployable states checked: {dict(SEEN)}")
