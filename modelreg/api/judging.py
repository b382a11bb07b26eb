"""The judge: deployability of records on targets for one API call."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg import rules
from modelreg.errors import (
    ModelregError,
)
from modelreg.fingerprint import (
    Fingerprint,
    file_signature,
    fingerprint_inputs,
    runtime_fingerprint,
)
from modelreg.rules import (
    Deployability,
    RecordState,
    StoredRun,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.tables import ModelSuiteRow
    from modelreg.schemas.suite import Suite
    from modelreg.targets import Target


def load_suite_ref(ref: str | Path) -> Suite:
    """A golden suite by file path, or a built-in one by name ("default-chat")."""
    from modelreg.suites import default_suite, load_suite
    from modelreg.targets import BUILTIN_SUITES

    if str(ref) in BUILTIN_SUITES:
        return default_suite()
    return load_suite(Path(ref))


def suite_label(suite: Suite | None) -> str | None:
    """How a suite appears in fingerprints: its name and digest (None: no suite attached)."""
    return f"{suite.name} sha256:{suite.digest()[:16]}" if suite is not None else None


def suite_in_force(attached: ModelSuiteRow | None, target: Target) -> Suite | None:
    """The suite a verify of a model on ``target`` runs: the one attached to the model, else
    the target's, else None (the golden prompts / Paris check). Raises on an unreadable
    target suite (verify refuses to run)."""
    from modelreg.schemas.suite import Suite

    if attached is not None:
        return Suite.model_validate_json(attached.suite_json)
    if target.suite is None:
        return None
    return load_suite_ref(target.suite)


def trust_policy(target: Target) -> rules.TrustPolicy:
    """Which runs may count on ``target``: this registry's own (no verifier keys), or runs
    signed by one of its verifier keys; unreadable keys are a problem that counts nothing."""
    if not target.trust_verifier_keys:
        return rules.TRUST_LOCAL
    from modelreg.signing import trusted_keys

    try:
        return rules.TrustPolicy(
            verifier_keys=trusted_keys([Path(p) for p in target.trust_verifier_keys])
        )
    except ModelregError as exc:
        return rules.TrustPolicy(problem=exc.message)


class Assessment:
    """What deployability is judged against for one set of target definitions, worked out
    on first use and kept with the identity of the files it was worked out from: each target's
    current runtime fingerprints, trust policy and suite labels. A decision builds its own
    inside its transaction; reads share one per definition of the targets (``derived``), and
    every ``Judge`` over it re-checks the files an answer depends on before using it — a
    runtime upgrade, a new key or an edited suite file counts at once, also in a long-lived
    server."""

    def __init__(self, targets: dict[str, Target], *, kept: bool = False) -> None:
        self.targets = targets
        # Kept across calls (``derived``): what it worked out is reused only while the files
        # it came from are unchanged. A decision's own (not kept) is used once: nothing to check.
        self.kept = kept
        self.fingerprints: dict[Hashable, tuple[Hashable, Fingerprint]] = {}
        self.trust: dict[str, tuple[Hashable, rules.TrustPolicy]] = {}
        self.labels: dict[Hashable, tuple[Hashable, str | None]] = {}


def _key_files(target: Target) -> Hashable:
    return tuple(file_signature(p) for p in target.trust_verifier_keys)


def _suite_file(target: Target) -> Hashable:
    from modelreg.targets import BUILTIN_SUITES

    if target.suite is None or target.suite in BUILTIN_SUITES:
        return None
    return file_signature(target.suite)


class Judge:
    """Decides deployability for one API call over an ``Assessment``. Everything it reads
    from files is checked once per call (``signature``) and recorded in ``used``: what a
    cached verdict depends on, so that it is reused only while every one is unchanged."""

    def __init__(self, assessment: Assessment, model_suites: Mapping[str, ModelSuiteRow]) -> None:
        self.targets = assessment.targets
        self._assessment = assessment
        self._model_suites = model_suites
        self._signatures: dict[Hashable, Hashable] = {}
        self.used: set[Hashable] = set()

    def signature(self, dependency: Hashable) -> Hashable:
        """The identity now (once per call) of the files one dependency was worked out from:
        ("fingerprint", target, runtime, libraries), ("trust", target) or ("suite", target)."""
        if dependency not in self._signatures:
            assert isinstance(dependency, tuple)
            kind: str = dependency[0]
            target = self.targets[dependency[1]]
            rest = dependency[2:]
            if kind == "fingerprint":
                found: Hashable = fingerprint_inputs(target, rest[0], rest[1])
            elif kind == "trust":
                found = _key_files(target)
            else:
                found = _suite_file(target)
            self._signatures[dependency] = found
        return self._signatures[dependency]

    def unchanged(self, used: Iterable[tuple[Hashable, Hashable]]) -> bool:
        """Whether every (dependency, signature) an earlier answer recorded still holds."""
        return all(self.signature(d) == s for d, s in used)

    def record_of_use(self) -> frozenset[tuple[Hashable, Hashable]]:
        return frozenset((d, self.signature(d)) for d in self.used)

    def _memo(
        self, memo: dict[Any, tuple[Hashable, Any]], key: Hashable, dependency: Hashable, make: Any
    ) -> Any:
        if not self._assessment.kept:
            if key not in memo:
                memo[key] = (None, make())
            return memo[key][1]
        self.used.add(dependency)
        signature = self.signature(dependency)
        found = memo.get(key)
        if found is None or found[0] != signature:
            found = (signature, make())
            memo[key] = found
        return found[1]

    def suite_in_force(self, model_id: str, target: Target) -> Suite | None:
        """The suite a verify of this model on this target runs (``suite_in_force``)."""
        return suite_in_force(self._model_suites.get(model_id), target)

    def _suite_label(self, model_id: str, target: Target) -> str | None:
        """The label of the suite in force, parsed and digested once per suite."""
        attached = self._model_suites.get(model_id)

        def make() -> str | None:
            try:
                return suite_label(self.suite_in_force(model_id, target))
            except ModelregError as exc:
                # An unreadable suite matches no run's: every run is stale, never a pass.
                return f"unreadable: {exc.message}"

        key = (target.name, attached.suite_sha256 if attached else None)
        label: str | None = self._memo(self._assessment.labels, key, ("suite", target.name), make)
        return label

    def trust(self, target: Target) -> rules.TrustPolicy:
        policy: rules.TrustPolicy = self._memo(
            self._assessment.trust,
            target.name,
            ("trust", target.name),
            lambda: trust_policy(target),
        )
        return policy

    def current(self, target: Target, record: Record, run: StoredRun) -> Fingerprint:
        """The fingerprint ``run``'s evidence would carry if produced now on ``target``."""
        from modelreg.fingerprint import LIB_PREFIX, is_inference_library, libraries_of

        libraries = tuple(lib for lib in libraries_of(run.fingerprint) if is_inference_library(lib))
        suite = self._suite_label(record.model_id, target)
        runtime = _runtime_of(record)
        fingerprint: Fingerprint = self._memo(
            self._assessment.fingerprints,
            (target.name, runtime, libraries, suite),
            ("fingerprint", target.name, runtime, libraries),
            lambda: runtime_fingerprint(target, runtime, libraries=libraries, suite=suite),
        )
        if not target.is_local:
            # A remote host's libraries cannot be hashed from here: they are kept as evidence,
            # and staleness is judged on what can be recomputed.
            fingerprint = fingerprint | {
                k: v for k, v in run.fingerprint.items() if k.startswith(LIB_PREFIX)
            }
        return fingerprint

    def verdict(
        self,
        record: Record,
        target_name: str,
        state: RecordState,
        runs: Sequence[StoredRun],
        file_digests: dict[str, str] | None = None,
    ) -> Deployability:
        target = self.targets.get(target_name)
        if target is None:
            return rules.target_undefined(record.id, target_name)
        trust = self.trust(target)
        if trust.verifier_keys is not None and file_digests is None:
            file_digests = {f.path: f.sha256 or "" for f in record.manifest.files}
        return rules.judge(
            record.id,
            target.name,
            record.hold_reasons,
            state,
            runs,
            lambda run: self.current(target, record, run),
            trust,
            file_digests,
        )


def _runtime_of(record: Record) -> str:
    # Not ``.get(format, record.manifest…)``: that parses the manifest every time.
    known = {"gguf": "llama.cpp", "safetensors": "transformers", "neuron": "neuron"}
    return known.get(record.format) or record.manifest.runtime.runtime
