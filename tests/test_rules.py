"""The decision rules on their own: every reason code, the blocking outcomes, staleness, the
rollback candidate order, which run counts (``counting_run``) and the trust policy on signed
runs (``TrustPolicy``, ``signed_run_problem``). No database, no runtime: only modelreg.rules
(signed runs are DSSE envelopes made here with ``cryptography``)."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from modelreg import reasons, rules
from modelreg.reasons import ReasonCode
from modelreg.rules import (
    ACTIVE,
    CheckVerdict,
    PromotionStep,
    RecordState,
    RecordStateKind,
    StoredRun,
)
from modelreg.steps import Step

NOW = datetime(2026, 11, 29, tzinfo=UTC)
FP = {"llama-cpp-python": "0.3.36"}


def _run(*outcomes: str, fingerprint: dict[str, str] | None = None) -> list[StoredRun]:
    checks = tuple(
        CheckVerdict(f"check{i}", True, outcome, None, NOW, "run1", fingerprint or FP)
        for i, outcome in enumerate(outcomes)
    )
    return [StoredRun("run1", checks)] if checks else []


def _codes(verdict: rules.Deployability) -> list[ReasonCode]:
    return [r.code for r in verdict.reasons]


@pytest.mark.parametrize(
    ("outcome", "blocks"),
    [("pass", False), ("skipped", False), ("fail", True), ("unavailable", True)],
)
def test_which_outcomes_block(outcome: str, blocks: bool) -> None:
    assert rules.blocks(True, outcome) is blocks
    assert rules.blocks(False, outcome) is False  # an optional check never blocks


def test_a_passing_current_run_is_deployable() -> None:
    verdict = rules.judge("r_1", "cpu", [], ACTIVE, _run("pass", "skipped"), FP)
    assert verdict.deployable and verdict.reasons == ()
    assert verdict.run_id == "run1" and verdict.verified_at == NOW


@pytest.mark.parametrize(
    ("hold_reasons", "state", "run", "fingerprint", "code"),
    [
        (["license unknown"], ACTIVE, _run("pass"), FP, ReasonCode.FACT_UNKNOWN),
        ([], RecordState(RecordStateKind.HELD, "audit"), _run("pass"), FP, ReasonCode.HELD),
        ([], RecordState(RecordStateKind.RETIRED, "old"), _run("pass"), FP, ReasonCode.RETIRED),
        ([], ACTIVE, [], FP, ReasonCode.NEVER_VERIFIED),
        ([], ACTIVE, _run("pass", "fail"), FP, ReasonCode.CHECK_FAILED),
        ([], ACTIVE, _run("unavailable"), FP, ReasonCode.CHECK_UNAVAILABLE),
        ([], ACTIVE, _run("pass"), {"llama-cpp-python": "0.3.37"}, ReasonCode.STALE_RUNTIME),
    ],
)
def test_every_reason_code(
    hold_reasons: list[str],
    state: RecordState,
    run: list[StoredRun],
    fingerprint: dict[str, str],
    code: ReasonCode,
) -> None:
    verdict = rules.judge("r_1", "cpu", hold_reasons, state, run, fingerprint)
    assert not verdict.deployable
    assert _codes(verdict) == [code]
    reason = verdict.reasons[0]
    assert reason.message
    if code in (ReasonCode.NEVER_VERIFIED, ReasonCode.STALE_RUNTIME):
        assert reason.step == Step("verify", ref="r_1", target="cpu")
    if code is ReasonCode.HELD:
        assert reason.step == Step("release", ref="r_1", why=None)


def test_target_undefined_is_never_deployable() -> None:
    verdict = rules.target_undefined("r_1", "gone")
    assert not verdict.deployable and _codes(verdict) == [ReasonCode.TARGET_UNDEFINED]


def test_stale_names_what_changed_and_only_counts_for_a_passing_run() -> None:
    new = {"llama-cpp-python": "0.3.37"}
    stale = rules.judge("r_1", "cpu", [], ACTIVE, _run("pass"), new)
    assert stale.stale and not stale.held
    assert "llama-cpp-python 0.3.36 → 0.3.37" in stale.reasons[0].message
    failing = rules.judge("r_1", "cpu", [], ACTIVE, _run("fail"), new)
    assert _codes(failing) == [ReasonCode.CHECK_FAILED] and not failing.stale


def test_run_verdict_names_the_blocking_checks_and_never_a_skip() -> None:
    verdict = rules.run_verdict(
        [
            ("digest", True, "pass", None),
            ("embed-scale", True, "skipped", None),
            ("smoke", True, "fail", "degenerate"),
            ("optional", False, "fail", None),
        ]
    )
    assert not verdict.passed
    assert [b.describe() for b in verdict.blocking] == ["smoke: fail (degenerate)"]


def _steps(*spec: tuple[str, str | None, str]) -> list[PromotionStep]:
    return [PromotionStep(r, prev, action) for r, prev, action in spec]


def test_rollback_candidates_newest_first_without_current() -> None:
    history = _steps(("r1", None, "promote"), ("r2", "r1", "promote"), ("r3", "r2", "promote"))
    assert rules.rollback_candidates(history) == ["r2", "r1"]


def test_a_record_rolled_back_from_is_never_a_candidate_again() -> None:
    # promote r1, promote r2, roll back to r1: r2 must never come back by rollback.
    history = _steps(("r1", None, "promote"), ("r2", "r1", "promote"), ("r1", "r2", "rollback"))
    assert rules.rolled_back_from(history) == {"r2"}
    assert rules.rollback_candidates(history) == []
    # ...even after r3 is promoted over r1.
    history += _steps(("r3", "r1", "promote"))
    assert rules.rollback_candidates(history) == ["r1"]


def test_repromoted_record_is_listed_once() -> None:
    history = _steps(
        ("r1", None, "promote"),
        ("r2", "r1", "promote"),
        ("r1", "r2", "promote"),
        ("r3", "r1", "promote"),
    )
    assert rules.rollback_candidates(history) == ["r1", "r2"]
    assert rules.rollback_candidates([]) == []


def test_a_signed_run_without_a_readable_signed_time_blocks_every_signed_run() -> None:
    """Which signed run is newest cannot be told: nothing counts (never the older pass)."""
    from datetime import UTC, datetime

    from modelreg import rules

    check = rules.CheckVerdict("digest", True, "pass", None, datetime.now(UTC), "r1", {})
    signed = rules.StoredRun("r1", (check,), "uploaded", {"payload": "x"}, False, None)
    run, reasons = rules.counting_run(
        "r_1", "edge", [signed], rules.TrustPolicy(verifier_keys={}), None
    )
    assert run is None and "no readable signed time" in reasons[0].message


# -- every reason code ---------------------------------------------------------------------

TARGET_FP = {"llama-cpp-python": "0.3.36", "target memory": "8 GiB", "suite": "none"}


def _judge_with(runs: list[StoredRun], fingerprint: dict[str, str]) -> rules.Deployability:
    return rules.judge("r_1", "cpu", [], ACTIVE, runs, fingerprint)


def _run_with(fingerprint: dict[str, str]) -> list[StoredRun]:
    return _run("pass", fingerprint=fingerprint)


# One way to reach each code. A code added to ReasonCode without a case here fails
# test_every_reason_code_has_a_case.
REASON_CASES: dict[ReasonCode, Callable[[], rules.Deployability]] = {
    ReasonCode.FACT_UNKNOWN: lambda: rules.judge(
        "r_1", "cpu", ["license unknown"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.HELD: lambda: rules.judge(
        "r_1", "cpu", [], RecordState(RecordStateKind.HELD, "audit"), _run("pass"), FP
    ),
    ReasonCode.RETIRED: lambda: rules.judge(
        "r_1", "cpu", [], RecordState(RecordStateKind.RETIRED, "old"), _run("pass"), FP
    ),
    ReasonCode.TARGET_UNDEFINED: lambda: rules.target_undefined("r_1", "cpu"),
    ReasonCode.NEVER_VERIFIED: lambda: _judge_with([], FP),
    ReasonCode.CHECK_FAILED: lambda: _judge_with(_run("pass", "fail"), FP),
    ReasonCode.CHECK_UNAVAILABLE: lambda: _judge_with(_run("pass", "unavailable"), FP),
    ReasonCode.STALE_RUNTIME: lambda: _judge_with(
        _run_with(TARGET_FP), TARGET_FP | {"llama-cpp-python": "0.3.37"}
    ),
    ReasonCode.STALE_TARGET: lambda: _judge_with(
        _run_with(TARGET_FP), TARGET_FP | {"target memory": "16 GiB"}
    ),
    ReasonCode.STALE_SUITE: lambda: _judge_with(
        _run_with(TARGET_FP), TARGET_FP | {"suite": "sha256:abc"}
    ),
    ReasonCode.UNTRUSTED_EVIDENCE: lambda: _judge_with(
        [StoredRun("run1", _checks("run1"), origin="imported")], FP
    ),
    ReasonCode.PROVENANCE_UNKNOWN: lambda: rules.judge(
        "r_1", "cpu", ["provenance_unknown: base model unknown"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.IDENTITY_MISMATCH: lambda: rules.judge(
        "r_1", "cpu", ["identity_mismatch: 135M is not 26B"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.RECIPE_MISMATCH: lambda: rules.judge(
        "r_1", "cpu", ["recipe_mismatch: Q8_0 claimed, Q4_1 found"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.UNSAFE_TEMPLATE: lambda: rules.judge(
        "r_1", "cpu", ["unsafe_template: m.gguf: reaches '__globals__'"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.UNSAFE_PICKLE: lambda: rules.judge(
        "r_1", "cpu", ["unsafe_pickle: model.pt: imports posix.system"], ACTIVE, _run("pass"), FP
    ),
    ReasonCode.GATE_RELAXED_AFTER_FAILURE: lambda: _judge_with(_relaxed_pass(), FP),
    ReasonCode.LICENSE_DENIED: lambda: rules.judge(
        "r_1", "cpu", [], ACTIVE, _run("pass"), FP, license_denied="license gpl-3.0 is denied"
    ),
}


def _terms(passed: bool, rate: float = 1.0, **changes: object) -> rules.GateTerms:
    base: dict[str, object] = {
        "suite": "chat sha256:1",
        "target": "cpu",
        "passed": passed,
        "min_pass_rate": rate,
        "subsets": {"facts": 1.0},
        "limits": {"max_ttft_ms": 3000.0, "max_ttft_ms@cpu": 2000.0},
        "cases": {"paris": "p1", "json": "j1"},
    }
    return rules.GateTerms(**(base | changes))  # type: ignore[arg-type]


def _relaxed_pass(
    now: rules.GateTerms | None = None, accepted: frozenset[tuple[str, str]] = frozenset()
) -> list[StoredRun]:
    (run,) = _run("pass")
    history = rules.GateHistory((("failed-run", _terms(False)),), accepted)
    return [replace(run, terms=now or _terms(True, 0.5, suite="chat sha256:2"), history=history)]


@pytest.mark.parametrize("code", list(ReasonCode), ids=str)
def test_every_reason_code_has_a_case(code: ReasonCode) -> None:
    assert code in REASON_CASES, f"ReasonCode.{code.name} has no case in REASON_CASES"
    verdict = REASON_CASES[code]()
    assert not verdict.deployable
    assert _codes(verdict) == [code]
    assert verdict.reasons[0].message
    assert verdict.stale is (code in reasons.STALE_CODES)
    assert verdict.held is (code in reasons.HOLD_CODES)


def test_a_stale_target_and_runtime_together_is_a_stale_runtime() -> None:
    changed = TARGET_FP | {"llama-cpp-python": "0.3.37", "target memory": "16 GiB"}
    assert _codes(_judge_with(_run_with(TARGET_FP), changed)) == [ReasonCode.STALE_RUNTIME]
    unit = TARGET_FP | {"unit image": "b", "suite": "sha256:abc"}
    assert _codes(_judge_with(_run_with(TARGET_FP), unit)) == [ReasonCode.STALE_TARGET]


# -- counting_run: which run decides -------------------------------------------------------

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
RECORD, TARGET = "r_1", "edge"
FILES = {"model.gguf": "ab" * 32}
PAYLOAD_TYPE = "application/vnd.in-toto+json"


def _checks(
    run_id: str, finished: datetime = T0, outcomes: tuple[str, ...] = ("pass",)
) -> tuple[CheckVerdict, ...]:
    return tuple(
        CheckVerdict(f"check{i}", True, outcome, None, finished, run_id, FP)
        for i, outcome in enumerate(outcomes)
    )


def _unsigned(
    run_id: str, origin: str = "local", minutes: int = 0, exploratory: bool = False
) -> StoredRun:
    return StoredRun(
        run_id,
        _checks(run_id, T0 + timedelta(minutes=minutes)),
        origin=origin,
        exploratory=exploratory,
    )


@dataclass(frozen=True)
class Key:
    private: ec.EllipticCurvePrivateKey
    key_id: str

    @property
    def public(self) -> ec.EllipticCurvePublicKey:
        return self.private.public_key()


def _key() -> Key:
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return Key(private, hashlib.sha256(pem).hexdigest())


KEY, OTHER_KEY = _key(), _key()
TRUSTED = rules.TrustPolicy(verifier_keys={KEY.key_id: KEY.public})


def _statement(
    run_id: str,
    checks: tuple[CheckVerdict, ...],
    signed_at: datetime,
    predicate: dict[str, object] | None = None,
) -> dict[str, object]:
    """A verify run's in-toto statement, as ``verify --sign-key`` writes it."""
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": n, "digest": {"sha256": d}} for n, d in sorted(FILES.items())],
        "predicateType": "https://modelreg.dev/verification-run/v1",
        "predicate": {
            "record_id": RECORD,
            "target": TARGET,
            "run_id": run_id,
            "checks": [
                {
                    "check": c.check,
                    "required": c.required,
                    "outcome": c.outcome,
                    "classification": c.classification,
                }
                for c in checks
            ],
            "fingerprint": dict(sorted(FP.items())),
            "signed_at": signed_at.isoformat(),
        }
        | (predicate or {}),
    }


def _envelope(statement: object, key: Key) -> dict[str, object]:
    """A DSSE envelope (JSON form) over ``statement``, signed with ``key``."""
    payload = json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
    pae = f"DSSEv1 {len(PAYLOAD_TYPE)} {PAYLOAD_TYPE} {len(payload)} ".encode() + payload
    signature = key.private.sign(pae, ec.ECDSA(hashes.SHA256()))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key.key_id, "sig": base64.b64encode(signature).decode()}],
    }


def _signed(
    run_id: str,
    origin: str = "uploaded",
    minutes: int = 0,
    signed_minutes: int | None = None,
    key: Key = KEY,
    exploratory: bool = False,
    stored_outcomes: tuple[str, ...] | None = None,
    predicate: dict[str, object] | None = None,
) -> StoredRun:
    """A run signed ``signed_minutes`` after T0 (default: when its checks finished)."""
    finished = T0 + timedelta(minutes=minutes)
    signed_at = T0 + timedelta(minutes=minutes if signed_minutes is None else signed_minutes)
    checks = _checks(run_id, finished)
    envelope = _envelope(_statement(run_id, checks, signed_at, predicate), key)
    if stored_outcomes is not None:  # the database edited after signing
        checks = _checks(run_id, finished, stored_outcomes)
    return StoredRun(run_id, checks, origin, envelope, exploratory, signed_at)


def _count(
    runs: list[StoredRun], trust: rules.TrustPolicy = rules.TRUST_LOCAL
) -> tuple[str | None, list[reasons.Reason]]:
    run, reasons = rules.counting_run(RECORD, TARGET, runs, trust, FILES)
    assert (run is None) or not reasons, "a counting run comes with no reasons"
    return (run.run_id if run else None), reasons


def test_the_default_trust_policy_counts_local_runs() -> None:
    assert rules.TrustPolicy() == rules.TRUST_LOCAL
    assert rules.TRUST_LOCAL.verifier_keys is None and rules.TRUST_LOCAL.problem is None


def test_without_keys_the_newest_local_run_counts() -> None:
    runs = [_unsigned("old", minutes=0), _unsigned("new", minutes=5), _unsigned("mid", minutes=2)]
    assert _count(runs) == ("new", [])
    assert _count([_unsigned("only")]) == ("only", [])


def test_without_keys_no_run_means_no_reason() -> None:
    assert _count([]) == (None, [])


@pytest.mark.parametrize("origin", ["imported", "uploaded"])
@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "signed"])
def test_without_keys_imported_and_uploaded_runs_never_count(origin: str, signed: bool) -> None:
    """Without verifier keys only this registry's own verify counts: a run from a file or an
    upload is history, signed or not (nothing here could check the signature)."""
    run = _signed("theirs", origin) if signed else _unsigned("theirs", origin)
    counted, reasons = _count([run])
    assert counted is None
    assert [r.code for r in reasons] == [ReasonCode.UNTRUSTED_EVIDENCE]
    assert f"not counted ({origin}, unsigned)" in reasons[0].message
    assert reasons[0].step == Step("verify", ref=RECORD, target=TARGET)


@pytest.mark.parametrize("origin", ["imported", "uploaded"])
def test_without_keys_a_newer_import_never_displaces_the_local_run(origin: str) -> None:
    runs = [_unsigned("local", minutes=0), _unsigned("theirs", origin, minutes=60)]
    assert _count(runs) == ("local", [])
    runs = [_signed("theirs", origin, minutes=60), _unsigned("local", minutes=0)]
    assert _count(runs) == ("local", [])


@pytest.mark.parametrize("origin", ["imported", "uploaded"])
def test_a_passing_import_is_not_deployable_without_keys(origin: str) -> None:
    runs = [_unsigned("theirs", origin), _signed("signed", origin, minutes=1)]
    verdict = rules.judge(RECORD, TARGET, [], ACTIVE, runs, FP)
    assert not verdict.deployable and verdict.run_id is None
    assert _codes(verdict) == [ReasonCode.UNTRUSTED_EVIDENCE]  # never "never verified"


def test_exploratory_runs_never_decide() -> None:
    newer_one_off = _unsigned("one-off", minutes=10, exploratory=True)
    assert _count([_unsigned("in-force"), newer_one_off]) == ("in-force", [])
    assert _count([newer_one_off]) == (None, [])
    verdict = rules.judge(RECORD, TARGET, [], ACTIVE, [newer_one_off], FP)
    assert _codes(verdict) == [ReasonCode.NEVER_VERIFIED]
    # With keys: a newer signed one-off run, even a bad one, neither counts nor blocks.
    bad_one_off = _signed("bad", minutes=10, key=OTHER_KEY, exploratory=True)
    good_one_off = _signed("good", minutes=10, exploratory=True)
    assert _count([_signed("in-force"), bad_one_off], TRUSTED) == ("in-force", [])
    assert _count([good_one_off], TRUSTED)[0] is None


def test_an_exploratory_imported_run_is_not_a_reason_either() -> None:
    assert _count([_unsigned("one-off", "imported", exploratory=True)]) == (None, [])


@pytest.mark.parametrize(
    "trust",
    [TRUSTED, rules.TrustPolicy(verifier_keys={})],
    ids=["trusted-key", "empty-key-set"],
)
@pytest.mark.parametrize("origin", ["local", "imported", "uploaded"])
def test_with_keys_an_unsigned_run_never_counts(trust: rules.TrustPolicy, origin: str) -> None:
    counted, reasons = _count([_unsigned("unsigned", origin)], trust)
    assert counted is None
    assert [r.code for r in reasons] == [ReasonCode.UNTRUSTED_EVIDENCE]
    assert reasons[0].message == f"no run on {TARGET} is signed by a key {TARGET} trusts"
    assert reasons[0].step == Step("verify", ref=RECORD, target=TARGET, sign_key=None)


@pytest.mark.parametrize("origin", ["local", "imported", "uploaded"])
def test_with_keys_a_run_signed_by_a_trusted_key_counts(origin: str) -> None:
    assert _count([_signed("signed", origin)], TRUSTED) == ("signed", [])
    verdict = rules.judge(RECORD, TARGET, [], ACTIVE, [_signed("signed", origin)], FP, TRUSTED)
    assert verdict.deployable and verdict.run_id == "signed"


@pytest.mark.parametrize("origin", ["local", "imported", "uploaded"])
def test_with_keys_a_newer_unsigned_run_never_displaces_the_signed_one(origin: str) -> None:
    runs = [_signed("signed", minutes=0), _unsigned("unsigned", origin, minutes=60)]
    assert _count(runs, TRUSTED) == ("signed", [])
    # ...and an unsigned failing run does not make the record undeployable either.
    failing = StoredRun("failing", _checks("failing", T0 + timedelta(hours=1), ("fail",)), origin)
    verdict = rules.judge(RECORD, TARGET, [], ACTIVE, [_signed("signed"), failing], FP, TRUSTED)
    assert verdict.deployable and verdict.run_id == "signed"


def test_the_newest_signed_run_is_the_one_signed_last() -> None:
    """Not the one whose checks claim the latest finish: the signature covers signed_at."""
    signed_last = _signed("signed-last", minutes=0, signed_minutes=60)
    claims_latest = _signed("claims-latest", minutes=50, signed_minutes=51)
    assert _count([claims_latest, signed_last], TRUSTED) == ("signed-last", [])
    assert _count([signed_last, claims_latest], TRUSTED) == ("signed-last", [])


def test_a_bad_newest_signed_run_is_never_passed_over_for_an_older_good_one() -> None:
    older_good = _signed("older", minutes=0)
    for newest_bad in (
        _signed("newer", minutes=10, key=OTHER_KEY),  # signed by a key the target does not trust
        _signed("newer", minutes=10, stored_outcomes=("fail",)),  # database edited
        _signed("newer", minutes=10, predicate={"record_id": "r_other"}),  # another record's
    ):
        counted, reasons = _count([older_good, newest_bad], TRUSTED)
        assert counted is None
        assert [r.code for r in reasons] == [ReasonCode.UNTRUSTED_EVIDENCE]
        assert reasons[0].message.startswith(f"the latest signed run on {TARGET} does not count: ")


def test_unreadable_verifier_keys_count_nothing() -> None:
    broken = rules.TrustPolicy(problem="cannot read keys/ci.pub")
    for runs in ([_unsigned("local")], [_signed("signed")], []):
        counted, reasons = _count(runs, broken)
        assert counted is None
        assert [r.code for r in reasons] == [ReasonCode.UNTRUSTED_EVIDENCE]
        assert reasons[0].message == "cannot check signed evidence: cannot read keys/ci.pub"
    # A problem wins over keys that could be read.
    both = rules.TrustPolicy(verifier_keys={KEY.key_id: KEY.public}, problem="one key unreadable")
    assert _count([_signed("signed")], both)[0] is None


def test_a_signed_run_with_no_checks_counts_but_is_never_deployable() -> None:
    """The rules pick it (it is the newest signed run); judge says it was never verified."""
    statement = _statement("empty", (), T0, {"fingerprint": {}})  # no checks: no fingerprint
    empty = StoredRun("empty", (), "local", _envelope(statement, KEY), signed_at=T0)
    assert _count([empty], TRUSTED) == ("empty", [])
    verdict = rules.judge(RECORD, TARGET, [], ACTIVE, [empty], FP, TRUSTED)
    assert _codes(verdict) == [ReasonCode.NEVER_VERIFIED]


# -- signed_run_problem: the trust policy on one signed run --------------------------------


def _problem(run: StoredRun, files: dict[str, str] | None = FILES) -> str | None:
    return rules.signed_run_problem(run, RECORD, TARGET, TRUSTED, files)


def test_a_run_signed_by_a_trusted_key_over_this_record_has_no_problem() -> None:
    run = _signed("ok")
    assert _problem(run) is None
    assert _problem(run, None) is None  # no file digests given: the subject is not compared
    two_keys = rules.TrustPolicy({OTHER_KEY.key_id: OTHER_KEY.public, KEY.key_id: KEY.public})
    assert rules.signed_run_problem(run, RECORD, TARGET, two_keys, FILES) is None


@pytest.mark.parametrize(
    ("run", "files", "problem"),
    [
        (_signed("r", key=OTHER_KEY), FILES, "signed by a key that is not trusted here"),
        (_signed("r", predicate={"record_id": "r_2"}), FILES, "it was signed for record_id 'r_2'"),
        (_signed("r", predicate={"target": "cpu"}), FILES, "it was signed for target 'cpu'"),
        (_signed("r", predicate={"run_id": "x"}), FILES, "it was signed for run_id 'x', not 'r'"),
        (_signed("r", stored_outcomes=("fail",)), FILES, "the stored check outcomes are not"),
        (_signed("r", predicate={"fingerprint": {"x": "1"}}), FILES, "the stored fingerprint"),
        (_signed("r"), {"model.gguf": "cd" * 32}, "it was signed over other files"),
        (_signed("r", minutes=30, signed_minutes=0), FILES, "its checks claim to have finished"),
    ],
    ids=[
        "untrusted-key",
        "other-record",
        "other-target",
        "other-run",
        "edited-outcomes",
        "edited-fingerprint",
        "other-files",
        "finished-after-signing",
    ],
)
def test_signed_run_problems(run: StoredRun, files: dict[str, str], problem: str) -> None:
    found = _problem(run, files)
    assert found is not None and found.startswith(problem), found
    counted, reasons = rules.counting_run(RECORD, TARGET, [run], TRUSTED, files)
    assert counted is None and reasons[0].message.endswith(found)


def test_a_tampered_envelope_does_not_verify() -> None:
    run = _signed("r")
    assert run.envelope is not None
    forged = dict(run.envelope)
    statement = _statement("r", _checks("r"), T0)
    forged["payload"] = base64.b64encode(json.dumps(statement).encode() + b" ").decode()
    problem = _problem(StoredRun("r", run.checks, "uploaded", forged, signed_at=T0))
    assert problem is not None and "does not verify" in problem
    not_dsse = StoredRun("r", run.checks, "uploaded", {"payload": "x"}, signed_at=T0)
    assert _problem(not_dsse) == "not a DSSE envelope of an in-toto statement"


def test_the_stored_signed_time_must_be_the_signed_one() -> None:
    run = _signed("r")
    moved = StoredRun("r", run.checks, run.origin, run.envelope, signed_at=T0 + timedelta(hours=1))
    assert _problem(moved) == "the stored signed time is not the signed one"


def test_signed_run_problem_needs_keys_and_an_envelope() -> None:
    with pytest.raises(AssertionError):
        rules.signed_run_problem(_signed("r"), RECORD, TARGET, rules.TRUST_LOCAL, FILES)
    with pytest.raises(AssertionError):
        rules.signed_run_problem(_unsigned("r"), RECORD, TARGET, TRUSTED, FILES)


# -- gates relaxed after a failure -----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "what"),
    [
        ({"min_pass_rate": 0.5}, "min_pass_rate"),
        ({"min_pass_rate": None}, "min_pass_rate"),
        ({"subsets": {"facts": 0.5}}, "subset facts min_pass_rate"),
        ({"subsets": {}}, "subset facts min_pass_rate"),
        ({"limits": {"max_ttft_ms": 9000.0, "max_ttft_ms@cpu": 2000.0}}, "max_ttft_ms"),
        ({"limits": {"max_ttft_ms@cpu": 2000.0}}, "max_ttft_ms"),
        ({"limits": {"max_ttft_ms": 3000.0, "max_ttft_ms@cpu": 2500.0}}, "max_ttft_ms@cpu"),
        ({"cases": {"paris": "p1"}}, "case json"),
        ({"cases": {"paris": "p1", "json": "j2"}}, "case json"),
    ],
)
def test_each_weakening_is_named_with_before_and_after(
    changes: dict[str, object], what: str
) -> None:
    found = rules.relaxations(_terms(False), _terms(True, suite="chat sha256:2", **changes))
    assert [r.what for r in found] == [what]
    verdict = _judge_with(_relaxed_pass(_terms(True, suite="chat sha256:2", **changes)), FP)
    assert _codes(verdict) == [ReasonCode.GATE_RELAXED_AFTER_FAILURE]
    (reason,) = verdict.reasons
    assert reason.detail is not None and reason.detail["failed_runs"] == ["failed-run"]
    assert reason.step is not None and reason.step.args["accept_relaxed_gate"] is True


def test_tightening_adding_cases_or_another_target_relaxes_nothing() -> None:
    stricter = _terms(
        True,
        1.0,
        suite="chat sha256:2",
        limits={"max_ttft_ms": 1000.0, "max_ttft_ms@cpu": 2000.0, "min_decode_tokens_per_s": 5.0},
        cases={"paris": "p1", "json": "j1", "korean": "k1"},
    )
    assert rules.relaxations(_terms(False), stricter) == []
    assert _judge_with(_relaxed_pass(stricter), FP).deployable
    # A target's own gates are compared only on that target.
    elsewhere = _terms(True, suite="chat sha256:2", target="edge", limits={"max_ttft_ms": 3000.0})
    assert rules.relaxations(_terms(False), elsewhere) == []


def test_the_same_terms_failing_then_passing_is_no_relaxation() -> None:
    assert _judge_with(_relaxed_pass(_terms(True)), FP).deployable


def test_an_accepted_relaxation_counts_only_for_its_terms_and_target() -> None:
    now = _terms(True, 0.5, suite="chat sha256:2")
    assert _judge_with(_relaxed_pass(now, frozenset({("cpu", now.digest())})), FP).deployable
    for accepted in ({("edge", now.digest())}, {("cpu", _terms(True, 0.4).digest())}):
        verdict = _judge_with(_relaxed_pass(now, frozenset(accepted)), FP)
        assert _codes(verdict) == [ReasonCode.GATE_RELAXED_AFTER_FAILURE]


def test_gate_terms_round_trip_and_digest_ignores_the_verdict() -> None:
    terms = _terms(False)
    assert rules.GateTerms.from_json(terms.to_json()) == terms
    assert terms.digest() == replace(terms, passed=True, target="edge").digest()
    assert terms.digest() != replace(terms, min_pass_rate=0.9).digest()


def test_a_pass_that_judged_no_suite_after_a_failure_under_one_removed_every_gate() -> None:
    (run,) = _relaxed_pass()
    verdict = _judge_with([replace(run, terms=None)], FP)
    assert _codes(verdict) == [ReasonCode.GATE_RELAXED_AFTER_FAILURE]
    assert "min_pass_rate 1.0 → none" in verdict.reasons[0].message


_UNSAFE = "unsafe_template: chat_template line 3 reaches cycler.__init__.__globals__"


@pytest.mark.parametrize(
    ("state", "holds", "never_counted", "expected"),
    [
        (RecordState(), [], False, None),
        (RecordState(), ["fact unknown: total parameters"], False, None),  # verify may run
        (RecordState(RecordStateKind.RETIRED, "old"), [], True, ReasonCode.RETIRED),
        (RecordState(RecordStateKind.HELD, "INC-7"), [], False, ReasonCode.HELD),
        (RecordState(RecordStateKind.HELD, "INC-7"), [], True, None),  # an investigation
        (RecordState(), [_UNSAFE], True, ReasonCode.UNSAFE_TEMPLATE),
        (RecordState(RecordStateKind.HELD, "INC-7"), [_UNSAFE], True, ReasonCode.UNSAFE_TEMPLATE),
    ],
)
def test_verify_refuses_before_anything_runs_for_these_reasons_only(
    state: RecordState, holds: list[str], never_counted: bool, expected: ReasonCode | None
) -> None:
    """rules.verify_refusal: retired always; held unless the run never counts (investigate,
    drill); held for what its files would run, whatever the run is for."""
    refusal = rules.verify_refusal(
        "r_1", "acme/chat", "cpu", state, holds, never_counted=never_counted
    )
    assert (refusal.code if refusal else None) == expected
    if expected is ReasonCode.HELD:
        assert refusal is not None and refusal.step == Step(
            "verify",
            "to reproduce it without releasing it (a run that never counts)",
            ref="r_1",
            target="cpu",
            investigate=True,
        )
    if expected is ReasonCode.UNSAFE_TEMPLATE:
        assert refusal is not None and refusal.message.startswith(_UNSAFE)
