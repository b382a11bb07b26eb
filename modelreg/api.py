"""The public Python API: what the CLI and the HTTP server call, and what a notebook imports.

    import modelreg

    registry = modelreg.open()               # $MODELREG_DATABASE_URL, else the local SQLite
    added = registry.add(["model.gguf"], model_id="org/name", source="pypi://pkg==1.0")
    report = registry.verify(added.record.record_id, "cpu")
    if report.deployability.deployable:
        registry.promote(added.record.record_id, "cpu", why="release 1")
    print(registry.status("org/name").entries)

Every decision goes through the rules module (``modelreg.rules``) with the target's current
runtime fingerprint, and every decision that writes (promote, rollback, hold, release, retire,
verify) re-checks state and deployability inside one transaction that holds the model's lock:
nothing public can skip a gate. Reporting methods return the pydantic output models of
``modelreg.schemas.output`` — the same objects ``--json`` prints and the HTTP API serves.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from modelreg import config, rules
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    IntegrityError,
    InvalidInput,
    ModelNotFound,
    ModelregError,
    NoRollbackCandidate,
    NotDeployable,
    NotFound,
    RecordNotFound,
    TargetNotFound,
    Unauthorized,
)
from modelreg.fingerprint import Fingerprint, runtime_fingerprint
from modelreg.rules import (
    Deployability,
    Reason,
    RecordState,
    RecordStateKind,
    StoredRun,
)
from modelreg.schemas.output import (
    AddOutput,
    AttestOutput,
    BadValueOut,
    CardFinding,
    CardRenderOutput,
    CardValidateOutput,
    DbCheckOutput,
    DeployabilityOut,
    DeployedOut,
    DiffOutput,
    DiffSection,
    EventOut,
    ExportOutput,
    FetchedFileOut,
    FetchOutput,
    FetchProblem,
    FileOut,
    FitOutput,
    GateOutput,
    HistoryOutput,
    ImportedRunOut,
    ImportedRunsOutput,
    ImportOutput,
    InspectOutput,
    ListItem,
    ListOutput,
    LocationOut,
    LocationsOutput,
    MatrixCell,
    MatrixOutput,
    PromoteOutput,
    PromotionOut,
    ReasonOut,
    RecordOut,
    RejectedCandidate,
    RollbackOutput,
    RunOut,
    ShowOutput,
    StateChangeOutput,
    StateOut,
    StatusEntry,
    StatusOutput,
    SuiteCaseOutput,
    SuiteOutput,
    TargetOut,
    TargetsChangeOutput,
    TargetsOutput,
    TokenCreateOutput,
    TokenOut,
    TokenRevokeOutput,
    TokensOutput,
    UploadRunOutput,
    VerifyOutput,
    VerifyStaleOutput,
)
from modelreg.schemas.verification import generations

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.manifests.build import BuiltArtifact
    from modelreg.progress import ProgressCallback, VerifyProgress
    from modelreg.registry.store import (
        ForeignRun,
        Locked,
        Promotion,
        Record,
        Snapshot,
        Store,
        StoredFile,
        StoredLocation,
        StoredTarget,
        StoredToken,
        Verification,
    )
    from modelreg.schemas.manifest import HostRun, Manifest
    from modelreg.schemas.suite import Suite
    from modelreg.schemas.verification import CheckResult
    from modelreg.targets import Target
    from modelreg.validators.base import VerifyOptions
    from modelreg.validators.child import RuntimeChild

_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")
_MAX_UPLOADED_CHECKS = 100
_RECORD_ID_RE = re.compile(r"r_[0-9a-f]{4,}")


def open(url: str | None = None, *, targets_file: Path | None = None) -> Registry:
    """Open the registry at ``url`` (a SQLAlchemy URL), else ``$MODELREG_DATABASE_URL``, else
    the SQLite file under ``$MODELREG_HOME``.

    SQLite is created or upgraded on first use; a PostgreSQL registry is created when empty and
    must be upgraded on purpose (``Registry.upgrade`` / ``modelreg db upgrade``) when older.
    Raises ``RegistryUnavailable`` (exit 4) when the server cannot be reached.
    """
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import create_registry_engine, prepare
    from modelreg.registry.store import Store

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        prepare(engine, resolved)
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return Registry(Store(engine), resolved, targets_file)


def upgrade(url: str | None = None) -> tuple[str | None, str]:
    """Bring the registry's schema to this modelreg's (under the schema lock); returns the
    revisions before and after."""
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import SCHEMA_HEAD, create_registry_engine, current_revision, migrate

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        before = current_revision(engine)
        migrate(engine)
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return before, SCHEMA_HEAD


def _database_error(exc: Any, url: str) -> Exception:
    from modelreg.registry.db import redact, unavailable

    found = unavailable(exc, url)
    if found is not None:
        return found
    from modelreg.urls import redact_text

    reason = redact_text(str(exc.orig or exc).strip().splitlines()[0])
    return InvalidInput(
        f"cannot open the registry at {redact(url)}: {reason}",
        "check --db or MODELREG_DATABASE_URL",
    )


def inspect(
    paths: Sequence[str | Path],
    *,
    model_id: str | None = None,
    source: str | None = None,
    license_id: str | None = None,
    prompts: Sequence[str] = (),
    expect: str = "Paris",
    recipe: Path | None = None,
    effective_params: int | None = None,
    effective_source: str | None = None,
    base_model: str | None = None,
    total_params: int | None = None,
    active_params: int | None = None,
    params_source: str | None = None,
    compile_host: HostRun | None = None,
    deploy_host: HostRun | None = None,
    trust_cache: bool = False,
    progress: Any = None,
) -> BuiltArtifact:
    """Read, digest and describe an artifact — the manifest ``add`` would record — without
    touching a database.

    ``total_params`` / ``active_params`` with ``params_source`` declare counts the artifact
    cannot establish itself (provenance ``declared:<source>``); ``compile_host`` /
    ``deploy_host`` declare a Neuron bundle's measured host peaks when it states none.
    """
    from modelreg.manifests.build import build_manifest
    from modelreg.manifests.recipe import load_recipe
    from modelreg.schemas.manifest import Count, GoldenPrompt

    declared = None
    if (effective_params is None) != (effective_source is None):
        raise InvalidInput("--effective-params and --effective-source go together")
    if effective_params is not None:
        if effective_params <= 0:
            raise InvalidInput(f"--effective-params {effective_params} must be positive")
        declared = Count(value=effective_params, provenance=f"declared:{effective_source}")
    return build_manifest(
        paths,
        model_id=model_id,
        source=source,
        license_id=license_id,
        golden_prompts=[GoldenPrompt(prompt=p, expect=expect) for p in prompts],
        recipe=load_recipe(recipe) if recipe else None,
        effective=declared,
        trust_cache=trust_cache,
        base_model=base_model,
        total_params=total_params,
        active_params=active_params,
        params_source=params_source,
        compile_host=compile_host,
        deploy_host=deploy_host,
        progress=progress,
        on_hashing=getattr(progress, "start", None),
    )


# -- conversions to the output contract --------------------------------------------------


def _reason_out(r: Reason) -> ReasonOut:
    return ReasonOut(code=r.code.value, message=r.message, hint=r.hint)


def deployability_out(d: Deployability) -> DeployabilityOut:
    return DeployabilityOut(
        record_id=d.record_id,
        target=d.target,
        deployable=d.deployable,
        stale=d.stale,
        held=d.held,
        reasons=[_reason_out(r) for r in d.reasons],
        run_id=d.run_id,
        verified_at=d.verified_at,
    )


def promotion_out(p: Promotion) -> PromotionOut:
    return PromotionOut(
        model_id=p.model_id,
        target=p.target,
        record_id=p.record_id,
        previous_record_id=p.previous_record_id,
        action="rollback" if p.action == "rollback" else "promote",
        at=p.at,
        actor=p.actor,
        why=p.why,
    )


def _state_out(s: RecordState) -> StateOut:
    return StateOut(state=s.state.value, reason=s.reason, at=s.at, actor=s.actor)


def record_out(record: Record, files: Sequence[StoredFile], state: RecordState) -> RecordOut:
    return RecordOut(
        record_id=record.id,
        model_id=record.model_id,
        format=record.format,
        source=record.source,
        license=record.license,
        location=str(record.root),
        files=[FileOut(path=f.path, bytes=f.bytes, sha256=f.sha256) for f in files],
        state=_state_out(state),
        hold_reasons=list(record.hold_reasons),
        created_at=record.created_at,
        created_by=record.created_by,
    )


def event_summary(kind: str, detail: Any) -> str:
    """An event in words, from its structured detail (the verify summary by the same rule
    that decides deployability: a skipped check never reads as a failure). Events imported
    from a file are not trusted to be well formed: a detail that cannot be read says so."""
    try:
        return _event_summary(kind, detail) if isinstance(detail, dict) else ""
    except (AttributeError, KeyError, TypeError, ValueError):
        return "(detail not readable)"


def _event_summary(kind: str, detail: dict[str, Any]) -> str:
    if kind == "verify":
        blocking = detail.get("blocking")
        if blocking is None:  # events written before the rules module: recompute
            checks = detail.get("checks", {})
            verdict = rules.run_verdict((c, True, o, None) for c, o in checks.items())
            blocking = [b.describe() for b in verdict.blocking]
        said = "passed" if not blocking else "failed: " + ", ".join(blocking)
        if detail.get("exploratory"):
            return f"one-off run of {detail.get('suite')} {said} (not counted: changes no verdict)"
        return said
    previous = detail.get("previous_record_id")
    if kind in ("promote", "rollback"):
        return f"was {previous}" if previous else "first production record"
    if kind == "add" and detail.get("hold_reasons"):
        return f"on hold: {'; '.join(detail['hold_reasons'])}"
    if kind == "locate":
        return "can be fetched from " + ", ".join(detail.get("added", []))
    if kind == "upload-run":
        checks = ", ".join(f"{c}={o}" for c, o in sorted(detail.get("checks", {}).items()))
        signer = detail.get("signed_by")
        trust = (
            f"signed by trusted key {signer}"
            if signer
            else "signed, not checked: the target trusts no verifier keys"
            if detail.get("signed")
            else "unsigned: never counted"
        )
        return f"uploaded run from {detail.get('host')} ({checks}): {trust}"
    if kind == "hold" and detail.get("rolled_back_to"):
        return f"rolled back from (to {detail['rolled_back_to']} on {detail.get('target')})"
    return ""


def targets(targets_file: Path | None = None) -> TargetsOutput:
    """Every target known without a registry: this host (cpu), the Inferentia2 profiles and
    the local targets file (``Registry.targets`` adds the registry's shared ones)."""
    from modelreg.targets import all_targets

    return targets_output(all_targets(targets_file))


def targets_output(found: dict[str, Target]) -> TargetsOutput:
    """Targets as the output contract shows them, with their origin (builtin, registry,
    local:PATH)."""
    return TargetsOutput(
        targets=[
            TargetOut(
                name=t.name,
                kind=t.kind,
                description=t.description,
                memory_bytes=t.memory_bytes,
                neuron_cores=t.neuron_cores,
                hbm_bytes=t.hbm_bytes,
                is_local=t.is_local,
                origin=t.origin,
                cpu_flags=sorted(t.cpu_flags) if t.cpu_flags is not None else None,
                runtime=dict(t.runtime),
                unit=deployed_unit(t),
            )
            for t in found.values()
        ]
    )


@dataclass(frozen=True)
class _Plan:
    """A rollback decision (``rules.decide_rollback``), with the records and readiness it was
    decided from — worked out over one consistent view of the model."""

    history: list[Promotion]
    decision: rules.RollbackDecision
    current: Record | None
    current_ready: rules.Readiness | None
    candidate: Record | None
    candidate_ready: rules.Readiness | None


class _Reads:
    """The reads a rollback plan needs, in one snapshot outside a lock (the interface of
    ``Locked``)."""

    def __init__(self, view: Snapshot, model_id: str) -> None:
        self.view = view
        self.model_id = model_id

    def state(self, record_id: str) -> RecordState:
        return self.view.state(record_id)

    def latest_runs(self, record_id: str, target: str) -> list[StoredRun]:
        return self.view.latest_runs([record_id], target)[record_id]

    def promotions(self, target: str) -> list[Promotion]:
        return self.view.promotions(self.model_id, target)

    def records(self, record_ids: Iterable[str]) -> dict[str, Record]:
        return self.view.records_by_id(record_ids)

    def files(self, record_ids: Sequence[str]) -> dict[str, list[StoredFile]]:
        return self.view.files(record_ids)

    def locations(self, record_ids: Sequence[str]) -> dict[str, list[StoredLocation]]:
        return self.view.locations(record_ids)


@dataclass(frozen=True)
class _VerifyPlan:
    options: VerifyOptions
    suite: Suite | None
    reference: Record | None
    private_key: Any
    # A suite given for this run that is not the one in force: recorded, never counted.
    exploratory: bool = False


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


class _Judge:
    """Decides deployability for one API call: the targets as defined now, their current
    fingerprints, trust policies and suites in force — each worked out once per call and
    never cached across calls (a runtime upgrade or a new key must count at once, also in a
    long-lived server)."""

    def __init__(self, registry: Registry, view: Snapshot | Locked | None = None) -> None:
        # Everything read from the database is read here, up front. Given a view it reads
        # through it: a snapshot (one transaction for a whole status call) or the locked
        # transaction a decision writes in — so a suite attached or a key tightened before the
        # lock was taken is seen by the promote, rollback or verify that takes it.
        if view is None:
            self.targets = registry.all_targets()
            self._model_suites = registry.store.model_suites()
        else:
            self.targets = registry._targets_with(view.target_specs())
            self._model_suites = view.model_suites()
        self._fingerprints: dict[tuple[str, str, tuple[str, ...], str | None], Fingerprint] = {}
        self._trust: dict[str, rules.TrustPolicy] = {}
        self._suite_labels: dict[tuple[str, str], str | None] = {}

    def suite_in_force(self, model_id: str, target: Target) -> Suite | None:
        """The suite a verify of this model on this target runs: the model's, else the
        target's, else None (the golden prompts / Paris check). Raises on an unreadable
        target suite (verify refuses to run)."""
        from modelreg.schemas.suite import Suite

        row = self._model_suites.get(model_id)
        if row is not None:
            return Suite.model_validate_json(row.suite_json)
        if target.suite is None:
            return None
        return load_suite_ref(target.suite)

    def _suite_label(self, model_id: str, target: Target) -> str | None:
        """The label of the suite in force, parsed and digested once per (model, target)."""
        key = (model_id, target.name)
        if key not in self._suite_labels:
            try:
                label = suite_label(self.suite_in_force(model_id, target))
            except ModelregError as exc:
                # An unreadable suite matches no run's: every run is stale, never a pass.
                label = f"unreadable: {exc.message}"
            self._suite_labels[key] = label
        return self._suite_labels[key]

    def trust(self, target: Target) -> rules.TrustPolicy:
        if target.name not in self._trust:
            policy = rules.TRUST_LOCAL
            if target.trust_verifier_keys:
                from modelreg.signing import trusted_keys

                try:
                    policy = rules.TrustPolicy(
                        verifier_keys=trusted_keys([Path(p) for p in target.trust_verifier_keys])
                    )
                except ModelregError as exc:
                    policy = rules.TrustPolicy(problem=exc.message)
            self._trust[target.name] = policy
        return self._trust[target.name]

    def current(self, target: Target, record: Record, run: StoredRun) -> Fingerprint:
        """The fingerprint ``run``'s evidence would carry if produced now on ``target``."""
        from modelreg.fingerprint import LIB_PREFIX, is_inference_library, libraries_of

        libraries = tuple(lib for lib in libraries_of(run.fingerprint) if is_inference_library(lib))
        suite = self._suite_label(record.model_id, target)
        key = (target.name, _runtime_of(record), libraries, suite)
        if key not in self._fingerprints:
            self._fingerprints[key] = runtime_fingerprint(
                target, key[1], libraries=libraries, suite=suite
            )
        fingerprint = self._fingerprints[key]
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


class Registry:
    """The registry, as a library: every operation the CLI and the HTTP server offer."""

    def __init__(self, store: Store, url: str, targets_file: Path | None = None) -> None:
        self.store = store
        self.url = url
        self.targets_file = targets_file

    # -- targets -------------------------------------------------------------------------

    def all_targets(self) -> dict[str, Target]:
        """Every target, merged in one place: built in, shared through the registry
        (``targets add``), and the local targets file as an overlay labelled ``local:PATH``."""
        return self._targets_with(self.store.target_specs())

    def _targets_with(self, shared: Sequence[StoredTarget]) -> dict[str, Target]:
        from modelreg.targets import all_targets

        return all_targets(self.targets_file, {t.name: t.spec for t in shared})

    def target(self, name: str) -> Target:
        """A target by name (built in, shared, or local); resolved once per call."""
        from modelreg.limits import TARGET_NAME_MAX, check_length

        check_length("target", name, TARGET_NAME_MAX)
        found = self.all_targets()
        if name not in found:
            raise TargetNotFound(name, sorted(found))
        return found[name]

    def targets(self) -> TargetsOutput:
        """Every target: built in, shared through the registry, and local."""
        return targets_output(self.all_targets())

    # -- records -------------------------------------------------------------------------

    def get(self, ref: str) -> Record:
        """A record by id or unique id prefix."""
        return self.store.get(ref)

    def models(self) -> list[str]:
        """Every model id with at least one record, sorted."""
        return self.store.model_ids()

    def _record_out(self, record: Record, reads: Store | Snapshot | None = None) -> RecordOut:
        """The record with its files and state, read through ``reads`` (default: the store)."""
        source = reads or self.store
        return record_out(record, source.files([record.id])[record.id], source.state(record.id))

    def _require_model(self, model_id: str) -> None:
        from modelreg.limits import MODEL_ID_MAX, check_length

        check_length("model id", model_id, MODEL_ID_MAX)
        if self.store.has_model(model_id):
            return
        if _RECORD_ID_RE.fullmatch(model_id.strip()):
            try:
                record = self.store.get(model_id)
            except RecordNotFound:
                record = None
            if record is not None:
                raise InvalidInput(
                    f"{model_id!r} is a record id, not a model id",
                    f"give its model: {record.model_id}",
                )
        raise ModelNotFound(model_id, self.store.model_ids())

    def inspect(self, paths: Sequence[str | Path], **options: Any) -> InspectOutput:
        """The manifest ``add`` would record (see ``modelreg.inspect``)."""
        built = inspect(paths, **options)
        return InspectOutput(
            record_id=built.manifest.record_id, manifest=built.manifest.model_dump(mode="json")
        )

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        signature: Path | None = None,
        actor: str | None = None,
        locations: Sequence[str] = (),
        **options: Any,
    ) -> AddOutput:
        """Record an artifact (idempotent: the same facts are the same record). Options are
        those of ``modelreg.inspect``.

        ``signature``: a bundle made with ``model_signing sign key``; its per-file digests
        must be the record's (checked before anything is written) and it is kept with the
        record, to be verified against a target's trusted keys. ``locations``: URLs its bytes
        can also be fetched from; this host's ``file://`` path (or, for ``hf://`` adds, the
        pinned revision) is recorded with them."""
        from modelreg.locations import file_url, parse_location
        from modelreg.registry.boundary import text_problem
        from modelreg.signing import read_artifact_signature
        from modelreg.textsafe import for_terminal
        from modelreg.validators.signature import covered

        for path in paths:  # a record's paths are text: refuse before hashing
            if text_problem(str(path)) is not None:
                raise InvalidInput(
                    f"{for_terminal(str(path))}: the file name is not valid UTF-8",
                    "rename it (a record's file names are text in every output)",
                )
        given = [parse_location(url).url for url in locations]  # refuse before hashing
        artifact_signature = read_artifact_signature(signature) if signature else None
        built = inspect(paths, **options)
        if artifact_signature is not None:
            record_digests = {f.path: f.sha256 or "" for f in built.manifest.files}
            problems = covered(record_digests, artifact_signature.digests)
            if problems:
                raise IntegrityError(
                    f"{signature}: the signature is over other files than this artifact: "
                    + "; ".join(problems),
                    "sign the files being added (model_signing sign key PATH)",
                )
        actor = actor or config.actor()
        record, created = self.store.add(built.manifest, built.root, actor, built.resolution)
        if artifact_signature is not None:
            self.store.add_artifact_signature(
                record, artifact_signature.bundle, artifact_signature.key_hint, actor
            )
        here = (
            record.manifest.source
            if built.resolution is not None and record.manifest.source
            else file_url(built.root)
        )
        self.store.add_locations(record, [here, *given], actor)
        return AddOutput(
            created=created,
            record=self._record_out(record),
            manifest=record.manifest.model_dump(mode="json"),
            locations=[loc.url for loc in self.store.locations([record.id])[record.id]],
        )

    def add_manifest(
        self,
        manifest: dict[str, Any],
        *,
        record_id: str | None = None,
        locations: Sequence[str] = (),
        actor: str | None = None,
    ) -> AddOutput:
        """Record a manifest produced elsewhere (``modelreg inspect --json`` on the build
        host), with the locations its bytes can be fetched from. The manifest is validated
        like an import; ``record_id``, when given, must be the id its facts give (a manifest
        edited after inspect is refused). The record's add path is the first ``file://``
        location's path, else ``.``: ``verify`` then needs ``--path``."""
        from modelreg.locations import parse_location
        from modelreg.schemas.manifest import load_manifest

        parsed = load_manifest(manifest, origin="manifest")
        if record_id is not None and record_id != parsed.record_id:
            raise InvalidInput(
                f"record_id {record_id[:40]!r} is not the id of this manifest's facts "
                f"({parsed.record_id})",
                "send the output of modelreg inspect --json unchanged",
            )
        urls = [parse_location(url) for url in locations]
        root = next((Path(u.path) for u in urls if u.scheme == "file"), Path("."))
        actor = actor or config.actor()
        record, created = self.store.add(parsed, root, actor, {"from": "manifest"})
        if urls:
            self.store.add_locations(record, [u.url for u in urls], actor)
        return AddOutput(
            created=created,
            record=self._record_out(record),
            manifest=record.manifest.model_dump(mode="json"),
            locations=[loc.url for loc in self.store.locations([record.id])[record.id]],
        )

    # -- deployability -------------------------------------------------------------------

    def deployability(self, ref: str, target: str) -> Deployability:
        """Is the record deployable on ``target`` right now (with structured reasons)?"""
        record = self.store.get(ref)
        runs = self.store.latest_runs([record.id], target)[record.id]
        return _Judge(self).verdict(record, target, self.store.state(record.id), runs)

    def _verdicts(
        self, records: Sequence[Record], target_name: str
    ) -> tuple[dict[str, Deployability], dict[str, RecordState]]:
        """Deployability of many records on one target, in a few queries."""
        ids = [r.id for r in records]
        runs = self.store.latest_runs(ids, target_name)
        states = self.store.states(ids)
        judge = _Judge(self)
        verdicts = {
            r.id: judge.verdict(r, target_name, states.get(r.id, rules.ACTIVE), runs[r.id])
            for r in records
        }
        return verdicts, states

    def show(self, ref: str) -> ShowOutput:
        """One record: manifest, state, where it is production, deployability on every target
        it was verified on, and every run with its evidence."""
        record = self.store.get(ref)
        state = self.store.state(record.id)
        files = self.store.files([record.id])[record.id]
        verifications = self.store.verifications(record.id)
        judge = _Judge(self)
        verified_on = sorted({v.target for v in verifications})
        deployability = []
        for name in verified_on:
            runs = self.store.latest_runs([record.id], name)[record.id]
            deployability.append(deployability_out(judge.verdict(record, name, state, runs)))
        production = [
            promotion_out(p)
            for p in self.store.productions(record.model_id)
            if p.record_id == record.id
        ]
        named = {p.target for p in production} | set(verified_on)
        units = {t: deployed_unit(judge.targets[t]) for t in sorted(named) if t in judge.targets}
        return ShowOutput(
            record=record_out(record, files, state),
            manifest=record.manifest.model_dump(mode="json"),
            production=production,
            deployability=deployability,
            runs=_runs_out(
                verifications,
                self.store.foreign_runs(record.id),
                self.store.exploratory_runs(record.id),
            ),
            units={t: unit for t, unit in units.items() if unit},
        )

    def records(
        self,
        model: str | None = None,
        *,
        deployable_on: str | None = None,
        state: str | None = None,
    ) -> ListOutput:
        """Records, oldest first; ``deployable_on``: only those deployable on that target now
        or whose only problem is stale evidence (listed with the reason)."""
        if model is not None:
            self._require_model(model)
        if state is not None and state not in {s.value for s in RecordStateKind}:
            raise InvalidInput(f"--state {state!r} must be one of: active, held, retired")
        if deployable_on is not None:
            self.target(deployable_on)
            records = self.store.records_verified_on(deployable_on, model)
        else:
            records = self.store.records(model)
        files = self.store.files([r.id for r in records])
        if deployable_on is not None:
            verdicts, states = self._verdicts(records, deployable_on)
        else:
            verdicts, states = {}, self.store.states([r.id for r in records])
        items = []
        for record in records:
            record_state = states.get(record.id, rules.ACTIVE)
            if state is not None and record_state.state.value != state:
                continue
            verdict = verdicts.get(record.id)
            if verdict is not None and not (verdict.deployable or _only_stale(verdict)):
                continue
            items.append(
                ListItem(
                    record=record_out(record, files[record.id], record_state),
                    total_parameters=_total_parameters(record),
                    bits_per_weight=_bits_per_weight(record),
                    deployability=deployability_out(verdict) if verdict else None,
                )
            )
        return ListOutput(target=deployable_on, records=items)

    # -- verify --------------------------------------------------------------------------

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
        warm_llama_child: RuntimeChild | None = None,
        progress: ProgressCallback | None = None,
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
        ``warm_llama_child``: a llama.cpp child started early (see the CLI); used or killed.
        ``progress``: called with a ``modelreg.progress.ProgressEvent`` as each check starts
        and ends (and per suite case where one is observable); None: silent.

        A held or retired record is refused (``NotDeployable``) before anything runs: its
        evidence could not make it deployable, and a generation would only waste the time.
        """
        from modelreg.progress import VerifyProgress

        watcher = VerifyProgress(progress)
        try:
            record = self.store.get(ref)
            the_target = self.target(target)
            # Refused here, before any check or runtime child runs. (The locked write below
            # judges the state again: a hold that lands mid-run still makes it undeployable.)
            state = self.store.state(record.id)
            lifecycle = rules.state_reason(record.id, state)
            if lifecycle is not None:
                hint = (
                    f"release it first: {lifecycle.hint}"
                    if lifecycle.hint
                    else "a retired record stays retired; verify a newer one: modelreg list "
                    f"--model {record.model_id}"
                )
                message = f"{lifecycle.message} (verify runs nothing for a {state.state} record)"
                raise NotDeployable(record.id, target, [Reason(lifecycle.code, message, hint)])
            from modelreg.validators.base import locate_files

            files = locate_files(record, path)
            plan = self._verify_plan(record, the_target, options, suite, reference, sign_key)
        except BaseException:
            if warm_llama_child is not None:
                warm_llama_child.discard()
            raise
        return self._verify(record, the_target, files, plan, actor, warm_llama_child, watcher)

    def _verify_plan(
        self,
        record: Record,
        target: Target,
        options: VerifyOptions | None,
        suite: str | Path | None,
        reference: str | None,
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
        in_force = _Judge(self).suite_in_force(record.model_id, target)
        given = load_suite_ref(suite) if suite is not None else options.suite
        chosen: Suite | None = given if given is not None else in_force
        # A one-off: a suite given for this run that is not the one in force. It is recorded
        # and shown, and decides nothing (the README's promise for `verify --suite`).
        exploratory = given is not None and suite_label(given) != suite_label(in_force)
        options = dataclasses.replace(options, suite=chosen)
        reference_record = None
        if reference is not None:
            reference_record = self.store.get(reference)
            if reference_record.id == record.id:
                raise InvalidInput("--reference must name another record than the one verified")
        # $MODELREG_SIGNING_KEY: a key file's path or the PEM itself (kept as a string).
        key_path: Path | str | None = sign_key or (os.environ.get("MODELREG_SIGNING_KEY") or None)
        private_key = None
        if key_path is not None:
            from modelreg.signing import load_private_key

            private_key = load_private_key(key_path)
        return _VerifyPlan(options, chosen, reference_record, private_key, exploratory)

    def _verify(
        self,
        record: Record,
        target: Target,
        files: dict[str, Path],
        plan: _VerifyPlan,
        actor: str | None,
        warm_llama_child: RuntimeChild | None = None,
        progress: VerifyProgress | None = None,
    ) -> VerifyOutput:
        from concurrent.futures import ThreadPoolExecutor

        from modelreg.validators.staging import stage, unrecorded_runtime_files
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
        signatures = self.store.artifact_signatures(record.id)
        # The checks see a private view of exactly the record's files: the bytes the digest
        # check hashes are the bytes the runtime loads, and nothing else is there to load.
        with stage(files) as staged, ThreadPoolExecutor(1, "fingerprint") as beside:
            # What the run's fingerprint needs that no check decides (package versions, the
            # llama.cpp build's library digests, the CPU flags; all memoized) is worked out
            # while the model loads. The fingerprint itself is made from the evidence after
            # every check is in (``_record_results``).
            beside.submit(
                runtime_fingerprint, target, _runtime_of(record), suite=suite_label(plan.suite)
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
            elif (unmeasured := agreement_unmeasured(plan.suite)) is not None:
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
        from modelreg.registry.store import new_run_id
        from modelreg.validators.verify import exercised_runtime, measured_memory

        # Declared ⇒ exercised: a pass of the bundled runtime says nothing of a declared other.
        results = exercised_runtime(results, target)
        # Memory on the larger of measured and estimated, at the context the target serves.
        results = measured_memory(results, target)

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
            _runtime_of(record),
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
        with self.store.locked(record.model_id) as tx:
            judge = _Judge(self, tx)
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
                },
            )
            state = tx.state(record.id)
            deployable = judge.verdict(
                record, target.name, state, tx.latest_runs(record.id, target.name)
            )
        files_out = self.store.files([record.id])[record.id]
        return VerifyOutput(
            record=record_out(record, files_out, state),
            target=target.name,
            run_id=run_id,
            passed=verdict.passed,
            deployability=deployability_out(deployable),
            checks=list(results),
            signed_by=signer,
            exploratory=plan.exploratory,
        )

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

        files = self.store.files([record.id])[record.id]
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
        records = self.store.records_verified_on(target)
        verdicts, _ = self._verdicts(records, target)
        return [r for r in records if verdicts[r.id].stale]

    def verify_stale(
        self,
        target: str,
        *,
        options: VerifyOptions | None = None,
        sign_key: Path | None = None,
        actor: str | None = None,
    ) -> VerifyStaleOutput:
        """Re-verify every record whose evidence on ``target`` is stale, where it was added."""
        from modelreg.validators.base import locate_files

        the_target = self.target(target)
        runs = [
            self._verify(
                record,
                the_target,
                locate_files(record, None),
                self._verify_plan(record, the_target, options, None, None, sign_key),
                actor,
            )
            for record in self.stale(target)
        ]
        return VerifyStaleOutput(target=target, runs=runs)

    # -- promote / rollback --------------------------------------------------------------

    def promote(
        self, ref: str, target: str, *, why: str | None = None, actor: str | None = None
    ) -> PromoteOutput:
        """Make the record production for its model on ``target``. Refused (``NotDeployable``)
        unless it is deployable there now — decided inside the transaction that moves the
        pointer, with the target's current runtime fingerprint."""
        _check_why(why)
        record = self.store.get(ref)
        self.target(target)
        with self.store.locked(record.model_id) as tx:
            judge = _Judge(self, tx)
            verdict = judge.verdict(
                record, target, tx.state(record.id), tx.latest_runs(record.id, target)
            )
            if not verdict.deployable:
                raise NotDeployable(record.id, target, verdict.reasons)
            current = tx.production(target)
            if current is not None and current.record_id == record.id:
                return PromoteOutput(
                    changed=False,
                    message=f"{record.id} is already production for {record.model_id} on "
                    f"{target} (since {current.at:%Y-%m-%d %H:%M} UTC); nothing changed",
                    promotion=promotion_out(current),
                )
            warning = None
            if current is not None:
                previous = tx.records([current.record_id])[current.record_id]
                warning = rules.attribution_warning(previous.manifest, record.manifest)
            promotion = tx.set_production(record, target, "promote", actor or config.actor(), why)
        return PromoteOutput(
            changed=True,
            message=f"{record.id} is now production for {record.model_id} on {target} "
            f"(was {promotion.previous_record_id or 'none'})",
            promotion=promotion_out(promotion),
            warning=warning,
        )

    def _readiness(
        self, view: Locked | _Reads, judge: _Judge, record: Record, target: str
    ) -> rules.Readiness:
        """Can ``record`` take production on ``target`` now: deployable there, and its bytes
        fetchable from a recorded location (checked by size; fetch checks every sha256)."""
        from modelreg.locations import fetchable_copy

        verdict = judge.verdict(
            record, target, view.state(record.id), view.latest_runs(record.id, target)
        )
        files = view.files([record.id])[record.id]
        urls = [loc.url for loc in view.locations([record.id])[record.id]]
        fetch_from, why = fetchable_copy([(f.path, f.bytes) for f in files], urls)
        return rules.Readiness(verdict, fetch_from, why)

    def _plan(
        self, view: Locked | _Reads, target: Target, judge: _Judge, to: str | None = None
    ) -> _Plan:
        """The rollback decision from one read (a snapshot for the plan, the locked
        transaction for the apply): the same function, so the apply does what the plan said."""
        history = view.promotions(target.name)
        steps = [p.step() for p in history]
        records = view.records({p.record_id for p in history} | ({to} if to else set()))
        ready: dict[str, rules.Readiness] = {}

        def readiness(record_id: str) -> rules.Readiness:
            if record_id not in ready:
                ready[record_id] = self._readiness(view, judge, records[record_id], target.name)
            return ready[record_id]

        decision = rules.decide_rollback(steps, readiness, view.state, to=to)
        current = records[history[-1].record_id] if history else None
        candidate = records[decision.candidate] if decision.candidate else None
        return _Plan(
            history,
            decision,
            current,
            readiness(current.id) if current else None,
            candidate,
            readiness(candidate.id) if candidate else None,
        )

    def _check_to(self, view: Locked | _Reads, model_id: str, target: str, to: str) -> str:
        """``rollback --to`` (a record id, resolved before the read): a record of this model,
        not retired, not production already, and production here before (bad input
        otherwise: exit 2, nothing changed)."""
        record = view.records([to])[to]
        if record.model_id != model_id:
            raise InvalidInput(
                f"--to {to}: a record of {record.model_id}, not of {model_id}",
                f"modelreg list --model {model_id}",
            )
        if view.state(to).state is RecordStateKind.RETIRED:
            raise InvalidInput(f"--to {to}: retired; a retired record never takes production")
        history = view.promotions(target)
        if history and history[-1].record_id == to and history[-1].action != "rollback":
            # (Production put there by a rollback: the same --to again is a no-op, decided by
            # the rules like any repeat.)
            raise InvalidInput(f"--to {to}: already production for {model_id} on {target}")
        if to not in {p.record_id for p in history}:
            raise InvalidInput(
                f"--to {to}: never production for {model_id} on {target}",
                f"to make it production: modelreg promote {to} --target {target}",
            )
        return to

    def _deployed(
        self,
        reads: Store | Snapshot,
        judge: _Judge,
        record: Record,
        verdict: Deployability,
        fetch: tuple[str | None, str | None] = (None, None),
    ) -> DeployedOut:
        """A record as a rollback shows it, read through ``reads`` (one snapshot for a plan)."""
        from modelreg.fingerprint import summary

        the_target = judge.targets.get(verdict.target)
        # The run that decides the verdict (none: no run counts there), never merely the newest.
        run = reads.run_checks(verdict.run_id) if verdict.run_id else []
        answered = [str(g.get("output")) for v in run for g in generations(v.result.evidence)]
        runtime = dict(run[0].fingerprint) if run else {}
        unchanged = (
            None
            if not run
            else not any(r.code is rules.ReasonCode.STALE_RUNTIME for r in verdict.reasons)
        )
        return DeployedOut(
            record=self._record_out(record, reads),
            deployability=deployability_out(verdict),
            verified_on_host=run[0].host if run else None,
            runtime=runtime,
            runtime_summary=summary(runtime, unchanged),
            answered=answered,
            unit=deployed_unit(the_target) if the_target is not None else {},
            locations=[loc.url for loc in reads.locations([record.id])[record.id]],
            fetch_from=fetch[0],
            unfetchable=fetch[1] if fetch[0] is None else None,
        )

    def _rollback_output(
        self, model_id: str, target: str, plan: _Plan, message: str, applied: Promotion | None
    ) -> RollbackOutput:
        """What a plan or an apply shows, read in one snapshot (after an apply: its outcome)."""
        decision = plan.decision
        production = candidate = rolled_back_from = None
        with self.store.snapshot() as view:
            judge = _Judge(self, view)
            reads = _Reads(view, model_id)

            def shown(record: Record, ready: rules.Readiness | None) -> DeployedOut:
                if ready is None or applied is not None:
                    ready = self._readiness(reads, judge, record, target)  # after the move
                fetch = (ready.fetch_from, ready.unfetchable)
                return self._deployed(view, judge, record, ready.verdict, fetch)

            if applied is not None and plan.candidate is not None and plan.current is not None:
                production = shown(plan.candidate, None)
                rolled_back_from = shown(plan.current, None)
            else:
                if plan.current is not None:
                    production = shown(plan.current, plan.current_ready)
                if plan.candidate is not None:
                    candidate = shown(plan.candidate, plan.candidate_ready)
        last = plan.history[-1] if plan.history else None
        return RollbackOutput(
            model_id=model_id,
            target=target,
            decision=decision.action.value,
            production=production,
            candidate=candidate,
            rolled_back_from=rolled_back_from,
            applied=promotion_out(applied) if applied else None,
            # Read in the same snapshot as what is shown (not a session of its own).
            held=rolled_back_from.record.record_id
            if rolled_back_from is not None and rolled_back_from.record.state.state == "held"
            else None,
            already_rolled_back=promotion_out(last)
            if last is not None and decision.action is rules.RollbackAction.NOTHING_TO_DO
            else None,
            rejected=[
                RejectedCandidate(record_id=r, why=w, hint=h) for r, w, h in decision.rejected
            ],
            message=message,
        )

    def _no_candidate(self, model_id: str, target: str, plan: _Plan) -> NoRollbackCandidate:
        decision = plan.decision
        if plan.current is None:
            return NoRollbackCandidate(
                model_id,
                target,
                "nothing was ever production there",
                f"promote a verified record: modelreg promote RECORD --target {target}",
            )
        current = f"production is {plan.current.id}"
        if decision.why:  # a refusal of its own (--to), not "no earlier record can"
            hint = next((h for _, _, h in decision.rejected if h), None)
            return NoRollbackCandidate(model_id, target, f"{current}; {decision.why}", hint)
        if not decision.rejected:
            return NoRollbackCandidate(
                model_id,
                target,
                f"{current}, and nothing was production there before it",
                "a candidate is a record that was production on this target earlier and is "
                "deployable now",
            )
        rejected = "; ".join(f"{r} ({why})" for r, why, _ in decision.rejected)
        hint = next((h for _, _, h in decision.rejected if h), None)
        return NoRollbackCandidate(
            model_id,
            target,
            f"{current}; earlier production records cannot take production now: {rejected}",
            f"to make one a candidate: {hint}" if hint else None,
        )

    def rollback_plan(self, model_id: str, target: str, *, to: str | None = None) -> RollbackOutput:
        """What ``rollback`` would do now (``rules.decide_rollback``): the candidate — the
        newest record that was production on ``target`` before the current one, is deployable
        now, has a fetchable copy and was never rolled back from — or ``to``; or nothing to do
        when production was put there by a rollback and is deployable. Raises
        ``NoRollbackCandidate`` when there is none."""
        self._require_model(model_id)
        the_target = self.target(target)
        to = self.store.get(to).id if to is not None else None
        with self.store.snapshot() as view:
            judge = _Judge(self, view)
            reads = _Reads(view, model_id)
            if to is not None:
                self._check_to(reads, model_id, target, to)
            plan = self._plan(reads, the_target, judge, to)
        if plan.decision.action is rules.RollbackAction.NO_CANDIDATE:
            raise self._no_candidate(model_id, target, plan)
        return self._rollback_output(
            model_id, target, plan, _plan_message(model_id, target, plan), None
        )

    def rollback(
        self,
        model_id: str,
        target: str,
        *,
        why: str,
        to: str | None = None,
        actor: str | None = None,
    ) -> RollbackOutput:
        """Apply the rollback decision in one locked transaction — the same decision
        ``rollback_plan`` shows, read and decided inside the lock: the candidate becomes
        production and the record rolled back from is put on hold (``release`` makes it
        usable again). When production already is a rollback's outcome and deployable,
        nothing changes (the output says so): the same command twice is safe."""
        _check_why(why, required="a rollback")
        self._require_model(model_id)
        the_target = self.target(target)
        actor = actor or config.actor()
        to = self.store.get(to).id if to is not None else None  # resolved before the lock
        applied = None
        with self.store.locked(model_id) as tx:
            judge = _Judge(self, tx)
            if to is not None:
                self._check_to(tx, model_id, target, to)
            plan = self._plan(tx, the_target, judge, to)
            action = plan.decision.action
            if action is rules.RollbackAction.NO_CANDIDATE:
                raise self._no_candidate(model_id, target, plan)
            if action is rules.RollbackAction.ROLLBACK:
                assert plan.candidate is not None and plan.current is not None
                applied = tx.set_production(plan.candidate, target, "rollback", actor, why)
                if tx.state(plan.current.id).state is RecordStateKind.ACTIVE:
                    tx.set_state(
                        plan.current,
                        RecordStateKind.HELD,
                        f"rolled back from on {target} (to {plan.candidate.id}): {why}",
                        actor,
                        {"rolled_back_to": plan.candidate.id, "target": target},
                    )
        if applied is None:
            message = _plan_message(model_id, target, plan)
        else:
            assert plan.candidate is not None and plan.current is not None
            message = (
                f"rolled back: {plan.candidate.id} is production for {model_id} on {target}; "
                f"{plan.current.id} is on hold (release it with: modelreg release "
                f"{plan.current.id})"
            )
        return self._rollback_output(model_id, target, plan, message, applied)

    # -- states --------------------------------------------------------------------------

    def _change_state(
        self,
        ref: str,
        new: RecordStateKind,
        why: str | None,
        actor: str | None,
        detail: dict[str, Any] | None = None,
    ) -> StateChangeOutput:
        record = self.store.get(ref)
        action = {
            RecordStateKind.HELD: "hold",
            RecordStateKind.ACTIVE: "release",
            RecordStateKind.RETIRED: "retire",
        }[new]
        _check_why(why, required=action if new is not RecordStateKind.ACTIVE else None)
        with self.store.locked(record.model_id) as tx:
            current = tx.state(record.id)
            if current.state is RecordStateKind.RETIRED:
                raise InvalidInput(
                    f"record {record.id} is retired; retired records stay retired",
                    "add the artifact again under a new record if it must come back",
                )
            if new is RecordStateKind.ACTIVE and current.state is not RecordStateKind.HELD:
                raise InvalidInput(f"record {record.id} is not on hold (state: active)")
            tx.set_state(record, new, why, actor or config.actor(), detail)
            production_on = sorted(p.target for p in tx.productions() if p.record_id == record.id)
        message = {
            "hold": f"{record.id} is on hold: {why}",
            "release": f"{record.id} released",
            "retire": f"{record.id} retired: {why}",
        }[action]
        if production_on and new is not RecordStateKind.ACTIVE:
            message += (
                f". WARNING: {record.id} is production for {record.model_id} on "
                f"{', '.join(production_on)} and is no longer deployable there — production is "
                f"still {record.id}; roll back with: modelreg rollback {record.model_id} "
                f"--target {production_on[0]} --apply --why '...'"
            )
        if new is RecordStateKind.ACTIVE and record.hold_reasons:
            message += ". Still on hold for facts it does not know: " + "; ".join(
                record.hold_reasons
            )
        return StateChangeOutput(
            record=self._record_out(record),
            action=action,
            changed=True,
            production_on=production_on,
            message=message,
        )

    def hold(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Put a record on hold: not deployable, not promotable, until released."""
        return self._change_state(ref, RecordStateKind.HELD, why, actor)

    def release(
        self, ref: str, why: str | None = None, *, actor: str | None = None
    ) -> StateChangeOutput:
        """Release a held record (facts missing from its manifest keep it on hold regardless)."""
        return self._change_state(ref, RecordStateKind.ACTIVE, why, actor)

    def retire(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Retire a record: kept with its evidence, never deployable or a rollback candidate."""
        return self._change_state(ref, RecordStateKind.RETIRED, why, actor)

    # -- status --------------------------------------------------------------------------

    def status(self, model_id: str | None = None, target: str | None = None) -> StatusOutput:
        """What runs where: for every (model, target) with a production record, that record,
        its files, and whether it is deployable there now (stale / held / failing)."""
        # One read transaction for all of it: one connection, one consistent view. Errors
        # are raised after it ends (the "did you mean" of an unknown model reads on its own).
        productions: list[Promotion] = []
        with self.store.snapshot() as view:
            judge = _Judge(self, view)  # reads through the snapshot: no second session
            if target is None or target in judge.targets:
                productions = view.productions(model_id, target)
            # A model with production records exists: ask only when it has none.
            known_model = model_id is None or bool(productions) or view.has_model(model_id)
            if productions:
                records = view.records_by_id(
                    (p.record_id for p in productions), with_manifests=False
                )
                ids = sorted(records)
                files = view.files(ids)
                states = view.states(ids)
                runs = view.latest_runs_on(ids, sorted({p.target for p in productions}))
                locations = view.locations(ids)
        if model_id is not None and not known_model:
            self._require_model(model_id)
        if target is not None and target not in judge.targets:
            raise TargetNotFound(target, sorted(judge.targets))
        from modelreg.locations import fetchable_copy

        entries = []
        fetchable: dict[str, tuple[str | None, str | None]] = {}
        for p in productions:
            record = records[p.record_id]
            state = states.get(record.id, rules.ACTIVE)
            verdict = judge.verdict(
                record,
                p.target,
                state,
                runs.get((record.id, p.target), []),
                {f.path: f.sha256 for f in files[record.id]},
            )
            urls = [loc.url for loc in locations[record.id]]
            if record.id not in fetchable:
                fetchable[record.id] = fetchable_copy(
                    [(f.path, f.bytes) for f in files[record.id]], urls
                )
            fetch_from, unfetchable = fetchable[record.id]
            entries.append(
                StatusEntry(
                    model_id=p.model_id,
                    target=p.target,
                    record=record_out(record, files[record.id], state),
                    deployability=deployability_out(verdict),
                    promotion=promotion_out(p),
                    unit=deployed_unit(judge.targets[p.target])
                    if p.target in judge.targets
                    else {},
                    locations=urls,
                    fetch_from=fetch_from,
                    unfetchable=unfetchable,
                )
            )
        return StatusOutput(entries=entries)

    def matrix(
        self, *, contains: str | None = None, offset: int = 0, limit: int = 100
    ) -> MatrixOutput:
        """What runs where as a models × targets matrix, a page of models at a time
        (``contains``: a case-insensitive substring of the model id): each production record
        and whether it may run there now, by the same rules as ``status``."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidInput(f"offset {offset} / limit {limit}: give offset ≥ 0, limit 1-1000")
        with self.store.snapshot() as view:
            judge = _Judge(self, view)
            models, total = view.model_page(contains, offset, limit)
            productions = view.productions_of(models)
            records = view.records_by_id((p.record_id for p in productions), with_manifests=False)
            ids = sorted(records)
            states = view.states(ids)
            files = view.files(ids)
            runs = view.latest_runs_on(ids, sorted({p.target for p in productions}))
        cells = []
        for p in productions:
            record = records[p.record_id]
            verdict = deployability_out(
                judge.verdict(
                    record,
                    p.target,
                    states.get(record.id, rules.ACTIVE),
                    runs.get((record.id, p.target), []),
                    {f.path: f.sha256 for f in files[record.id]},
                )
            )
            cells.append(
                MatrixCell(
                    model_id=p.model_id,
                    target=p.target,
                    record_id=record.id,
                    now=verdict.now,
                    reasons=verdict.reasons,
                    since=p.at,
                    actor=p.actor,
                    action="rollback" if p.action == "rollback" else "promote",
                    why=p.why,
                )
            )
        return MatrixOutput(
            targets=targets_output(judge.targets).targets,
            models=models,
            total_models=total,
            offset=offset,
            limit=limit,
            cells=cells,
        )

    def gate(self, model_id: str, target: str, sha256: str) -> GateOutput:
        """The deploy gate: passes only when ``sha256`` is a file of the current production
        record of ``model_id`` on ``target`` and that record is deployable there now."""
        gated = self.gated_status(model_id, target, sha256)
        assert gated.gate is not None
        return gated.gate

    def gated_status(self, model_id: str, target: str, sha256: str) -> StatusOutput:
        """``status`` of the model on the target with the deploy gate's answer (``.gate``)
        decided from that same read: what is printed is what was judged."""
        if not _SHA256_RE.fullmatch(sha256.strip()):
            raise InvalidInput(
                f"--expect-sha256 {sha256[:80]!r} is not a sha256", "give 64 hex characters"
            )
        status = self.status(model_id, target)
        status.gate = _gate_of(status, model_id, target, sha256.strip().lower())
        return status

    # -- history, diff, fit --------------------------------------------------------------

    def history(self, model_id: str) -> HistoryOutput:
        """Adds, verifications, promotions, rollbacks, holds of a model, in commit order."""
        self._require_model(model_id)
        return HistoryOutput(
            model_id=model_id,
            events=[
                EventOut(
                    id=e.id,
                    at=e.at,
                    actor=e.actor,
                    kind=e.kind,
                    record_id=e.record_id,
                    target=e.target,
                    why=e.why,
                    summary=event_summary(e.kind, e.detail),
                    detail=e.detail,
                )
                for e in self.store.events(model_id)
            ],
        )

    def manifest_of(self, ref: str) -> tuple[str, Manifest]:
        """(name, manifest) of a record id/prefix, or of a manifest ``.json`` file."""
        path = Path(ref)
        if path.suffix == ".json" and path.is_file():
            from modelreg.schemas.manifest import read_manifest_file

            return str(path), read_manifest_file(path)
        record = self.store.get(ref)
        return record.id, record.manifest

    def diff(self, a: str, b: str) -> DiffOutput:
        """What changed from A to B (records or manifest files)."""
        return diff(*self.manifest_of(a), *self.manifest_of(b))

    def fit(self, ref: str, target: str, **options: Any) -> FitOutput:
        """Will the record (or manifest file) fit ``target``'s memory? (``compile_host=True``:
        can ``target`` compile this Neuron bundle?) For a record verified there, the runtime's
        measured peak RSS is shown beside the estimate."""
        name, manifest = self.manifest_of(ref)
        report = fit(name, manifest, self.target(target), **options)
        if name.startswith("r_") and not options.get("compile_host"):
            measured = self._measured_peak(name, target)
            if measured is not None:
                from modelreg.manifests.fit_report import measured_line

                report.lines.append(measured_line(*measured))
        return report

    def _measured_peak(self, record_id: str, target: str) -> tuple[int, str] | None:
        """The peak RSS the runtime child of the record's latest run on ``target`` measured."""
        for verification in reversed(self.store.latest_run(record_id, target)):
            resources = verification.result.evidence.get("resources")
            if isinstance(resources, dict) and isinstance(resources.get("peak_rss_bytes"), int):
                return resources["peak_rss_bytes"], verification.run_id
        return None

    # -- cards ---------------------------------------------------------------------------

    def verified_on(self, record: Record) -> list[Any]:
        """Where the record's latest run passed, when, on which host, under which runtime."""
        from modelreg.manifests.card import VerifiedOn

        judge = _Judge(self)
        state = self.store.state(record.id)
        verified = []
        for target in self.store.verified_targets(record.id):
            # The run that counts there (an unsigned upload never vouches for a card).
            runs = self.store.latest_runs([record.id], target)[record.id]
            decided = judge.verdict(record, target, state, runs)
            run = self.store.run_checks(decided.run_id) if decided.run_id else []
            result = rules.run_verdict(
                (v.result.check, v.result.required, v.result.outcome, v.result.classification)
                for v in run
            )
            if run and result.passed:
                at = max(v.result.finished_at for v in run)
                verified.append(VerifiedOn(target, at, run[0].host, run[0].fingerprint))
        return verified

    def card_render(self, ref: str, output: Path | None = None) -> CardRenderOutput:
        """The card section a publisher needs, from the record's facts."""
        from modelreg.manifests.card import render_card

        record = self.store.get(ref)
        text = render_card(record.manifest, record.id, self.verified_on(record))
        if output is not None:
            _write_private(output, text)
        return CardRenderOutput(
            record_id=record.id, path=str(output) if output else None, text=text
        )

    def card_validate(
        self,
        path: Path,
        ref: str | None = None,
        *,
        hold: bool = False,
        actor: str | None = None,
    ) -> CardValidateOutput:
        """Check a card's claims (against a record when given). No side effect unless
        ``hold``: then a card that leaves required facts unstated puts the record on hold."""
        from modelreg.validators.card import validate_card

        if hold and ref is None:
            raise InvalidInput("--hold needs --record RECORD")
        record = self.store.get(ref) if ref is not None else None
        report = validate_card(path, record.manifest if record else None)
        held = None
        if (
            hold
            and record is not None
            and report.hold_reason is not None
            and self.store.state(record.id).state is RecordStateKind.ACTIVE
        ):
            self.hold(record.id, report.hold_reason, actor=actor)
            held = report.hold_reason
        return _card_output(path, report, record.id if record else None, held)

    # -- signed evidence and suites ------------------------------------------------------

    def attest(self, ref: str, target: str) -> AttestOutput:
        """The latest signed run of the record on ``target``: its DSSE envelope and in-toto
        statement, whether the signature verifies with a key the target trusts, whether it
        vouches for the stored run, and whether the stored evidence still hashes to the
        digests it signs."""
        from modelreg.signing import SignatureInvalid, evidence_sha256, verify_run_envelope

        record = self.store.get(ref)
        the_target = self.target(target)
        runs = self.store.latest_runs([record.id], target)[record.id]
        signed = [r for r in runs if r.envelope is not None]
        if not signed:
            raise InvalidInput(
                f"record {record.id} has no signed run on {target}",
                f"sign one with: modelreg verify {record.id} --target {target} --sign-key KEY",
            )
        run = signed[0]
        envelope = dict(run.envelope or {})
        trust = _Judge(self).trust(the_target)
        statement: dict[str, Any] = {}
        signer = None
        problem = None
        try:
            payload = json.loads(base64.b64decode(str(envelope.get("payload", ""))))
            statement = payload if isinstance(payload, dict) else {}
        except (ValueError, TypeError):
            problem = "the envelope's payload is not a JSON statement"
        if trust.problem is not None:
            problem = trust.problem
        elif trust.verifier_keys is None:
            problem = f"target {target} trusts no verifier keys: the signature was not checked"
        else:
            try:
                statement, signer = verify_run_envelope(envelope, dict(trust.verifier_keys))
                problem = signed_run_problem_for(record, target, run, statement)
            except SignatureInvalid as exc:
                problem = exc.message
        stored = [v for v in self.store.verifications(record.id, target) if v.run_id == run.run_id]
        signed_checks = (statement.get("predicate") or {}).get("checks") or []
        evidence_matches = [evidence_sha256(v.result.evidence) for v in stored] == [
            c.get("evidence_sha256") for c in signed_checks if isinstance(c, dict)
        ]
        return AttestOutput(
            record_id=record.id,
            target=target,
            run_id=run.run_id,
            signed_by=signer,
            verified=signer is not None and problem is None,
            problem=problem,
            evidence_matches=evidence_matches,
            statement=statement,
            envelope=envelope,
        )

    def attach_suite(
        self, model_id: str, suite_ref: str | Path, *, actor: str | None = None
    ) -> SuiteOutput:
        """Attach a golden suite to a model: every verify of its records runs it, and runs
        under any other suite stop counting ("stale: suite changed")."""
        self._require_model(model_id)
        suite = load_suite_ref(suite_ref)
        with self.store.locked(model_id) as tx:
            tx.attach_suite(suite.model_dump_json(), suite.digest(), actor or config.actor())
        return _suite_output(model_id, "attach", suite, f"{model_id} now runs suite {suite.name}")

    def detach_suite(self, model_id: str, *, actor: str | None = None) -> SuiteOutput:
        """Detach the model's suite (its target's suite, or the golden prompts, apply again)."""
        self._require_model(model_id)
        with self.store.locked(model_id) as tx:
            detached = tx.detach_suite(actor or config.actor())
        message = (
            f"{model_id} has no suite of its own now"
            if detached
            else f"{model_id} had no suite attached; nothing changed"
        )
        return _suite_output(model_id, "detach", None, message)

    def suite_add_case(
        self, suite_path: Path, run_id: str, *, case_id: str | None = None
    ) -> SuiteCaseOutput:
        """Turn failing outputs of a stored run into regression cases appended to a suite
        file (``modelreg suite add-case SUITE --from-run RUN``)."""
        from modelreg.schemas.suite import SuiteResult
        from modelreg.suites import append_case, load_suite, regression_case

        load_suite(suite_path)  # refuse a malformed suite before reading the run
        found = self.store.run(run_id.strip())
        if found is None:
            raise InvalidInput(
                f"run {run_id!r} not found", "run ids are in: modelreg show RECORD --json"
            )
        results = [
            v
            for v in self.store.verifications(found.record_id, found.target)
            if v.run_id == found.run_id and "suite_result" in v.result.evidence
        ]
        if not results:
            raise InvalidInput(f"run {run_id} ran no suite (no generation check)")
        result = SuiteResult.model_validate(results[0].result.evidence["suite_result"])
        cases = [c for c in result.cases if (c.case_id == case_id if case_id else not c.passed)]
        if not cases:
            raise InvalidInput(
                f"run {run_id} has no {'case ' + repr(case_id) if case_id else 'failing case'}",
                "name a case with --case ID",
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

    # -- transfer ------------------------------------------------------------------------

    def export(self, output: Path | None = None, stream: Any = None) -> ExportOutput:
        """Write the whole registry as JSON lines to ``output`` (or ``stream``)."""
        from modelreg.registry.transfer import export_registry

        return export_registry(self.store, output, stream)

    def import_(
        self, path: Path, *, actor: str | None = None, with_targets: bool = False
    ) -> ImportOutput:
        """Load an export into this registry, all or nothing. Its shared target definitions
        decide which keys a target trusts, so they are imported only with ``with_targets``
        (checked as ``targets add`` checks a file; a name already defined differently is
        refused)."""
        from modelreg.registry.transfer import import_registry

        return import_registry(self.store, path, actor or config.actor(), with_targets=with_targets)

    # -- shared targets ------------------------------------------------------------------

    def define_targets(self, path: Path, *, actor: str | None = None) -> TargetsChangeOutput:
        """Share the targets of a YAML file (the targets.yaml format) through the registry:
        everyone using it sees the same definitions. A definition replaces the stored one of
        that name; each change is an event."""
        from modelreg.targets import (
            TARGET_NAME_RE,
            builtin_names,
            read_target_specs,
            spec_as_json,
        )

        if not path.is_file():
            raise InvalidInput(f"{path}: no such file", "give a targets YAML file")
        specs = read_target_specs(path)
        if not specs:
            raise InvalidInput(f"{path}: defines no targets", "see: modelreg targets --help")
        for name in specs:
            if not TARGET_NAME_RE.fullmatch(name):
                raise InvalidInput(
                    f"{path}: target name {name[:120]!r} must be 1-100 letters, digits, '.', "
                    "'_' or '-'"
                )
            if name in builtin_names():
                raise InvalidInput(f"{path}: target {name!r} is built in and cannot be redefined")
        changes = self.store.define_targets(
            {name: spec_as_json(spec) for name, spec in specs.items()},
            actor or config.actor(),
            str(path),
        )
        changed = [n for n, c in changes.items() if c != "unchanged"]
        message = (
            f"shared through the registry: {', '.join(f'{n} ({changes[n]})' for n in changed)}"
            if changed
            else "nothing changed: the registry already has these definitions"
        )
        return TargetsChangeOutput(changes=changes, message=message, targets=self.targets().targets)

    def remove_target(
        self, name: str, *, why: str | None = None, actor: str | None = None
    ) -> TargetsChangeOutput:
        """Remove a shared target definition. Evidence gathered on it is kept; records
        production there read "target no longer defined" until it is defined again."""
        from modelreg.targets import builtin_names, read_target_specs

        _check_why(why)
        if name in builtin_names():
            raise InvalidInput(f"target {name!r} is built in and cannot be removed")
        # The stored names, not every target resolved: a definition that no longer builds
        # (a newer field, a bad path) can still be removed.
        shared = {t.name for t in self.store.target_specs()}
        local = self.targets_file or config.targets_file()
        if name not in shared and name in read_target_specs(local):
            raise InvalidInput(
                f"target {name!r} is not shared through the registry: it is defined in {local}",
                "edit that file to remove it",
            )
        if not self.store.remove_target(name, actor or config.actor(), why):
            raise TargetNotFound(name, sorted(shared))
        production = [p.model_id for p in self.store.productions(None, name)]
        message = f"removed shared target {name}"
        if production:
            message += (
                f". WARNING: production records on {name} ({', '.join(production)}) are no "
                f"longer deployable there until {name} is defined again"
            )
        return TargetsChangeOutput(
            changes={name: "removed"}, message=message, targets=self.targets().targets
        )

    # -- locations -----------------------------------------------------------------------

    def locations(self, ref: str) -> LocationsOutput:
        """Where a record's bytes can be fetched."""
        return self._locations_output(self.store.get(ref), [])

    def _locations_output(self, record: Record, added: list[str]) -> LocationsOutput:
        from modelreg.locations import FETCHABLE, parse_location

        shown = []
        for loc in self.store.locations([record.id])[record.id]:
            scheme = parse_location(loc.url).scheme
            shown.append(
                LocationOut(
                    url=loc.url,
                    scheme=scheme,
                    fetchable=scheme in FETCHABLE,
                    added_at=loc.added_at,
                    added_by=loc.added_by,
                )
            )
        return LocationsOutput(
            record_id=record.id,
            model_id=record.model_id,
            added_from=str(record.root),
            locations=shown,
            added=added,
        )

    def locate(
        self, ref: str, add: Sequence[str] = (), *, actor: str | None = None
    ) -> LocationsOutput:
        """Add locations to a record (validated: malformed URLs and URLs carrying
        credentials are refused) and list them all. Adding a known one changes nothing."""
        from modelreg.locations import parse_location

        urls = [parse_location(url).url for url in add]
        record = self.store.get(ref)
        added = self.store.add_locations(record, urls, actor or config.actor()) if urls else []
        return self._locations_output(record, added)

    def fetch(self, ref: str, to: Path) -> FetchOutput:
        """Copy a record's files into the new directory ``to`` from its locations (file
        locations on this host, the local Hugging Face cache), checking every sha256: a
        mismatch is refused and nothing is left at ``to`` unless every file matched."""
        from modelreg.locations import WantedFile, fetch_files

        record = self.store.get(ref)
        files = self.store.files([record.id])[record.id]
        urls = [loc.url for loc in self.store.locations([record.id])[record.id]]
        fetched, skipped = fetch_files(
            [WantedFile(f.path, f.bytes, f.sha256) for f in files], urls, to
        )
        return FetchOutput(
            record_id=record.id,
            to=str(to.expanduser().absolute()),
            files=[
                FetchedFileOut(path=f.path, bytes=f.bytes, sha256=f.sha256, source=f.source)
                for f in fetched
            ],
            skipped=[FetchProblem(url=s.url, reason=s.reason) for s in skipped],
        )

    # -- API tokens ----------------------------------------------------------------------

    def db_check(self, *, quarantine: bool = False, actor: str | None = None) -> DbCheckOutput:
        """Name every stored value that cannot be read back (a lone surrogate, JSON nested too
        deep: rows from before the storage boundary); ``quarantine`` makes each readable."""
        bad = self.store.check(quarantine=quarantine, actor=actor or config.actor())
        out = [BadValueOut(table=b.table, key=b.key, column=b.column, why=b.why) for b in bad]
        if not bad:
            message = "every stored value can be read back"
        elif quarantine:
            message = f"{len(bad)} value(s) quarantined: made readable, each with an event"
        else:
            message = (
                f"{len(bad)} stored value(s) cannot be read back as stored; make them readable "
                "with: modelreg db check --quarantine"
            )
        return DbCheckOutput(bad=out, quarantined=quarantine and bool(bad), message=message)

    def create_token(self, name: str, role: str, *, actor: str | None = None) -> TokenCreateOutput:
        """A new bearer token for ``modelreg serve``. The secret is in this output only; the
        registry keeps its sha256."""
        from modelreg.tokens import new_secret, parse_role, parse_token_name, secret_digest

        parse_token_name(name)
        the_role = parse_role(role)
        secret = new_secret()
        stored = self.store.create_token(
            name, the_role.value, secret_digest(secret), actor or config.actor()
        )
        return TokenCreateOutput(token=_token_out(stored), secret=secret)

    def tokens(self) -> TokensOutput:
        """Every token, revoked ones included (never their secrets)."""
        return TokensOutput(tokens=[_token_out(t) for t in self.store.tokens()])

    def revoke_token(self, name: str, *, actor: str | None = None) -> TokenRevokeOutput:
        """Revoke a token at once: the server refuses it from its next request."""
        before = {t.name: t for t in self.store.tokens()}.get(name)
        stored = self.store.revoke_token(name, actor or config.actor())
        if stored is None or before is None:
            raise NotFound(f"token {name!r} not found", "list them with: modelreg token list")
        return TokenRevokeOutput(token=_token_out(stored), changed=before.revoked_at is None)

    def authenticate(self, secret: str) -> StoredToken:
        """The token a bearer secret belongs to; ``Unauthorized`` when it is unknown or
        revoked."""
        from modelreg.tokens import secret_digest

        token = self.store.token_by_secret(secret_digest(secret))
        if token is None:
            raise Unauthorized("unknown token", "create one with: modelreg token create NAME")
        if token.revoked_at is not None:
            raise Unauthorized(
                f"token {token.name!r} was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC",
                "ask for a new one: modelreg token create NAME --role ROLE",
            )
        return token

    # -- uploaded runs -------------------------------------------------------------------

    def upload_run(
        self,
        ref: str,
        target: str,
        checks: Sequence[CheckResult],
        *,
        host: str,
        fingerprint: dict[str, str],
        envelope: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> UploadRunOutput:
        """Keep a verification run produced elsewhere (``verify --sign-key`` on a target host,
        sent over HTTP). It is stored as *uploaded* evidence and counts by the same rule as
        any other run: only when the target trusts verifier keys and ``envelope`` — the run's
        DSSE-signed statement (``attest --json``) — verifies with one of them and covers
        exactly these checks, this fingerprint and this record's files.

        Refused (nothing stored): an envelope whose statement is not this run's (record,
        target, outcomes, fingerprint, files, host, summaries, evidence); on a target that
        trusts verifier keys, an envelope no trusted key signed. Unsigned uploads are kept as
        history, never a pass."""
        from datetime import UTC, datetime

        from sqlalchemy.exc import IntegrityError as RowConflict

        from modelreg.registry.store import new_run_id
        from modelreg.signing import (
            SKEW,
            SignatureInvalid,
            run_details_problem,
            run_envelope_statement,
            run_statement_problem,
            signed_time_problem,
            verify_envelope,
        )

        record = self.store.get(ref)
        the_target = self.target(target)
        _check_uploaded(checks)
        from modelreg.validators.verify import uploaded_served_problem

        served = uploaded_served_problem(checks, the_target)
        if served is not None:
            raise InvalidInput(
                f"the run's host-compat passed on {target} without what it serves measured: "
                f"{served}",
                "verify on the target's host with this modelreg (it measures the served context)",
            )
        now = datetime.now(UTC)
        future = [c.finished_at for c in checks if c.finished_at.astimezone(UTC) > now + SKEW]
        if future:
            latest = max(future).astimezone(UTC)
            raise InvalidInput(
                f"the run claims a check finished at {latest:%Y-%m-%d %H:%M:%S} UTC, in the "
                "future: refused",
                "upload runs as verify wrote them",
            )
        run_id = new_run_id()
        trust = _Judge(self).trust(the_target)  # decides what is refused; judged again below
        signer = None
        if envelope is not None:
            try:
                statement = run_envelope_statement(envelope)
            except SignatureInvalid as exc:
                raise InvalidInput(f"the run's envelope: {exc.message}") from None
            run_id = statement["predicate"]["run_id"]
            uploaded = rules.StoredRun(
                run_id,
                tuple(
                    rules.CheckVerdict(
                        c.check,
                        c.required,
                        c.outcome.value,
                        c.classification,
                        c.finished_at,
                        run_id,
                        fingerprint,
                    )
                    for c in checks
                ),
                "uploaded",
                envelope,
            )
            files = {f.path: f.sha256 for f in self.store.files([record.id])[record.id]}
            problem = (
                run_statement_problem(statement, record.id, target, uploaded, files)
                or run_details_problem(statement, host, [(c.summary, c.evidence) for c in checks])
                or signed_time_problem(statement, [c.finished_at for c in checks], now)
            )
            if problem is not None:
                raise InvalidInput(f"the run's envelope is not this run's: {problem}")
            if trust.verifier_keys:
                try:
                    signer = verify_envelope(envelope, dict(trust.verifier_keys))[1]
                except SignatureInvalid as exc:
                    raise InvalidInput(
                        f"the run's signature: {exc.message}",
                        f"{target} counts runs signed by its verifier keys only",
                    ) from None
        existing = self.store.run(run_id)
        if existing is not None:
            raise InvalidInput(
                f"run {run_id} is already stored", f"modelreg show {existing.record_id}"
            )
        actor = actor or config.actor()
        try:
            with self.store.locked(record.model_id) as tx:
                tx.save_run(
                    record,
                    target,
                    checks,
                    host,
                    fingerprint,
                    run_id=run_id,
                    origin="uploaded",
                    origin_detail=f"uploaded by {actor}",
                    envelope=envelope,
                    signer_key_id=signer,
                )
                tx.event(
                    "upload-run",
                    actor,
                    record.id,
                    target,
                    None,
                    {
                        "run_id": run_id,
                        "host": host,
                        "checks": {c.check: c.outcome.value for c in checks},
                        "signed": envelope is not None,
                        "signed_by": signer,
                    },
                )
                state = tx.state(record.id)
                verdict = _Judge(self, tx).verdict(
                    record, target, state, tx.latest_runs(record.id, target)
                )
        except RowConflict:
            # The same signed run sent twice at once: one is stored, the other refused.
            raise InvalidInput(f"run {run_id} is already stored") from None
        (run,) = [r for r in self.store.foreign_runs(record.id) if r.run_id == run_id]
        counted = verdict.run_id == run_id
        if counted:
            message = f"run {run_id} (signed by trusted key {signer}) decides {record.id} there"
        elif not trust.verifier_keys:
            message = (
                f"run {run_id} kept for {record.id} as history: {target} trusts no verifier "
                "keys, so only runs of this registry's own verify count there (add "
                "trust.verifier_keys to its definition to count signed uploads)"
            )
        elif envelope is None:
            message = (
                f"run {run_id} kept for {record.id} as unsigned history: it does not count "
                f"towards deployability (sign it on the target host: modelreg verify "
                f"{record.id} --target {target} --sign-key KEY.pem)"
            )
        else:
            message = f"run {run_id} kept; it does not decide {record.id} there: " + (
                verdict.summary if not verdict.deployable else "a newer run does"
            )
        return UploadRunOutput(
            record_id=record.id,
            run=_imported_out(run, counted),
            deployability=deployability_out(verdict),
            message=message,
        )

    def imported_runs(self, ref: str) -> ImportedRunsOutput:
        """The record's runs this registry's verify did not produce (imported from a file or
        uploaded), newest first, each with whether it is the run that decides deployability
        on its target now."""
        record = self.store.get(ref)
        runs = self.store.foreign_runs(record.id)
        deciding = {
            t: self.deployability(record.id, t).run_id for t in sorted({r.target for r in runs})
        }
        return ImportedRunsOutput(
            record_id=record.id,
            runs=[_imported_out(r, deciding.get(r.target) == r.run_id) for r in runs],
        )


# -- module-level helpers (no database) ---------------------------------------------------


def _gate_of(status: StatusOutput, model_id: str, target: str, sha256: str) -> GateOutput:
    """The deploy gate's answer from the status of one (model, target)."""

    def fail(message: str, hint: str | None, record_id: str | None) -> GateOutput:
        reason = ReasonOut(code="gate", message=message, hint=hint)
        return GateOutput(
            model_id=model_id,
            target=target,
            sha256=sha256,
            passed=False,
            record_id=record_id,
            reasons=[reason],
        )

    if not status.entries:
        return fail(
            f"nothing is production for {model_id} on {target}",
            f"promote a record: modelreg promote RECORD --target {target}",
            None,
        )
    (entry,) = status.entries
    record = entry.record
    if sha256 not in {f.sha256 for f in record.files}:
        return fail(
            f"sha256 {sha256} is not a file of {record.record_id}, the production record "
            f"for {model_id} on {target} (its files: "
            + ", ".join(f"{f.path} {f.sha256}" for f in record.files)
            + ")",
            "deploy the production record's files, or promote the record you mean to deploy",
            record.record_id,
        )
    verdict = entry.deployability
    if verdict.deployable and entry.fetch_from is None:
        return fail(
            f"{record.record_id} is deployable on {target} but no recorded location has its "
            f"files ({entry.unfetchable}): nothing could fetch what the gate passes",
            f"add one: modelreg locate {record.record_id} --add file://HOST/DIR",
            record.record_id,
        )
    return GateOutput(
        model_id=model_id,
        target=target,
        sha256=sha256,
        passed=verdict.deployable,
        record_id=record.record_id,
        reasons=verdict.reasons,
    )


def _check_why(why: str | None, *, required: str | None = None) -> None:
    """A reason given by a person: bounded like every free text; ``required`` names the action
    that cannot go without one."""
    from modelreg.limits import WHY_MAX, check_length

    if required is not None and (not why or not why.strip()):
        raise InvalidInput(f"{required} needs a reason", "give --why '...'")
    if why is not None:
        check_length("--why", why, WHY_MAX)


def _check_uploaded(checks: Sequence[CheckResult]) -> None:
    """An uploaded run's checks: 1-100, each once, with evidence the pages can show."""
    if not checks:
        raise InvalidInput("a run needs at least one check result")
    if len(checks) > _MAX_UPLOADED_CHECKS:
        raise InvalidInput(f"a run has at most {_MAX_UPLOADED_CHECKS} check results")
    names = [c.check for c in checks]
    if len(set(names)) != len(names):
        raise InvalidInput("each check appears once in a run")
    for c in checks:
        generations = c.evidence.get("generations", [])
        if not isinstance(generations, list) or not all(isinstance(g, dict) for g in generations):
            raise InvalidInput(f"check {c.check}: evidence.generations must be a list of objects")


def _token_out(t: StoredToken) -> TokenOut:
    return TokenOut(
        name=t.name,
        role=t.role,
        created_at=t.created_at,
        created_by=t.created_by,
        revoked_at=t.revoked_at,
        revoked_by=t.revoked_by,
    )


def _origin(origin: str) -> Literal["imported", "uploaded"]:
    return "uploaded" if origin == "uploaded" else "imported"


def _imported_out(run: ForeignRun, counted: bool) -> ImportedRunOut:
    first = run.checks[0] if run.checks else None
    return ImportedRunOut(
        run_id=run.run_id,
        target=run.target,
        origin=_origin(run.origin),
        origin_detail=run.origin_detail,
        host=first.host if first else "",
        fingerprint=first.fingerprint if first else {},
        checks=[c.result for c in run.checks],
        signed=run.signed,
        signed_by=run.signer_key_id,
        counted=counted,
        at=run.created_at,
    )


def _runtime_of(record: Record) -> str:
    # Not ``.get(format, record.manifest…)``: that parses the manifest every time.
    known = {"gguf": "llama.cpp", "safetensors": "transformers", "neuron": "neuron"}
    return known.get(record.format) or record.manifest.runtime.runtime


def _only_stale(verdict: Deployability) -> bool:
    return bool(verdict.reasons) and all(r.code in rules.STALE_CODES for r in verdict.reasons)


def _total_parameters(record: Record) -> int | None:
    return record.manifest.parameters.total.value


def _bits_per_weight(record: Record) -> float | None:
    quant = record.manifest.quantization
    return quant.bits_per_weight if quant else None


def _runs_out(
    verifications: Sequence[Verification],
    foreign: Sequence[ForeignRun] = (),
    exploratory: Iterable[str] = (),
) -> list[RunOut]:
    one_off = set(exploratory)
    origins = {r.run_id: r for r in foreign}
    runs: dict[str, RunOut] = {}
    for v in verifications:
        run = runs.get(v.run_id)
        if run is None:
            elsewhere = origins.get(v.run_id)
            run = runs[v.run_id] = RunOut(
                run_id=v.run_id,
                target=v.target,
                host=v.host,
                fingerprint=v.fingerprint,
                checks=[],
                origin=_origin(elsewhere.origin) if elsewhere else "local",
                origin_detail=elsewhere.origin_detail if elsewhere else None,
                exploratory=v.run_id in one_off,
            )
        run.checks.append(v.result)
    return list(runs.values())


def _plan_message(model_id: str, target: str, plan: _Plan) -> str:
    """The plan in one sentence (what an apply of it does)."""
    if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
        return _already_rolled_back(model_id, target, plan.history[-1])
    assert plan.candidate is not None and plan.current is not None
    return (
        f"rollback would make {plan.candidate.id} production for {model_id} on {target} "
        f"instead of {plan.current.id}, and hold {plan.current.id}"
    )


def _already_rolled_back(model_id: str, target: str, last: Promotion) -> str:
    return (
        f"already rolled back: {last.record_id} is production for {model_id} on {target} since "
        f"{last.at:%Y-%m-%d %H:%M} UTC (rolled back from {last.previous_record_id} by "
        f"{last.actor}: {last.why}) and deployable; nothing changed. To go further back: "
        f"modelreg rollback {model_id} --target {target} --to RECORD --apply --why '...'"
    )


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a private temporary file and a rename."""
    import os
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory", "give a file name")
    if not directory.is_dir():
        raise InvalidInput(f"{directory}: no such directory", "create it first")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def signed_run_problem_for(
    record: Record, target: str, run: StoredRun, statement: dict[str, Any]
) -> str | None:
    from modelreg.signing import run_statement_problem

    digests = {f.path: f.sha256 or "" for f in record.manifest.files}
    return run_statement_problem(statement, record.id, target, run, digests)


def _suite_output(
    model_id: str | None, action: str, suite: Suite | None, message: str
) -> SuiteOutput:
    return SuiteOutput(
        model_id=model_id,
        action="attach" if action == "attach" else "detach" if action == "detach" else "check",
        name=suite.name if suite else None,
        sha256=suite.digest() if suite else None,
        cases=len(suite.cases) if suite else 0,
        subsets=sorted({c.subset for c in suite.cases}) if suite else [],
        message=message,
    )


def check_suite(path: Path) -> SuiteOutput:
    """Validate a suite file (no database): its name, digest, cases and subsets."""
    suite = load_suite_ref(path)
    return _suite_output(None, "check", suite, f"{path}: {len(suite.cases)} cases, valid")


def _card_output(
    path: Path, report: Any, record_id: str | None, held: str | None
) -> CardValidateOutput:
    return CardValidateOutput(
        card=str(path),
        record_id=record_id,
        clean=not report.errors,
        missing=report.missing,
        held=held,
        findings=[
            CardFinding(
                severity=f.severity,
                field=f.field,
                message=f.message,
                expected=f.expected,
                found=f.found,
            )
            for f in report.findings
        ],
    )


def validate_card_file(path: Path) -> CardValidateOutput:
    """Check a model card on its own (no record, no database)."""
    from modelreg.validators.card import validate_card

    return _card_output(path, validate_card(path), None, None)


def diff(name_a: str, a: Manifest, name_b: str, b: Manifest) -> DiffOutput:
    """What changed from manifest A to manifest B, section by section."""
    from modelreg.manifests.diff import diff_manifests

    result = diff_manifests(a, b)
    return DiffOutput(
        a=name_a,
        b=name_b,
        same_model=result.same_model,
        metadata_only=result.metadata_only,
        changed=result.changed,
        changed_dimensions=result.changed_dimensions,
        attribution_warning=result.attribution_warning,
        notes=result.notes,
        sections={s.name: DiffSection(changed=s.changed, a=s.a, b=s.b) for s in result.sections},
    )


def fit(
    name: str, manifest: Manifest, target: Target, *, compile_host: bool = False, **options: Any
) -> FitOutput:
    """Weights + KV cache + overhead against ``target``'s memory (Neuron bundles: every
    parameter group resident per NeuronCore under the tp degree, and host RAM apart; each
    recorded layout variant too). ``compile_host``: can ``target`` compile the bundle?"""
    from modelreg.manifests.fit_report import compile_host_report, fit_report

    if compile_host:
        if manifest.neuron is None:
            raise InvalidInput(f"{name} is not a Neuron bundle: --compile-host applies to bundles")
        return compile_host_report(name, manifest, target, options.get("headroom", 0.10))
    return fit_report(name, manifest, target, **options)
