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

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg import config, rules
from modelreg.errors import (
    InvalidInput,
    ModelNotFound,
    NoRollbackCandidate,
    NotDeployable,
    NotFound,
    RecordNotFound,
    TargetNotFound,
    Unauthorized,
)
from modelreg.fingerprint import Fingerprint, runtime_fingerprint
from modelreg.registry.store import (
    ImportedRun,
    Locked,
    Promotion,
    Record,
    Store,
    StoredFile,
    StoredTarget,
    StoredToken,
    Verification,
)
from modelreg.rules import (
    CheckVerdict,
    Deployability,
    Reason,
    RecordState,
    RecordStateKind,
)
from modelreg.schemas.output import (
    AddOutput,
    CardFinding,
    CardRenderOutput,
    CardValidateOutput,
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

if TYPE_CHECKING:
    from modelreg.manifests.build import BuiltArtifact
    from modelreg.schemas.manifest import Manifest
    from modelreg.schemas.verification import CheckResult
    from modelreg.targets import Target
    from modelreg.validators.base import VerifyOptions
    from modelreg.validators.child import RuntimeChild

_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")
_TARGET_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
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
    reason = str(exc.orig or exc).strip().splitlines()[0]
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
    trust_cache: bool = False,
    progress: Any = None,
) -> BuiltArtifact:
    """Read, digest and describe an artifact — the manifest ``add`` would record — without
    touching a database."""
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


def event_summary(kind: str, detail: dict[str, Any]) -> str:
    """An event in words, from its structured detail (the verify summary by the same rule
    that decides deployability: a skipped check never reads as a failure)."""
    if kind == "verify":
        blocking = detail.get("blocking")
        if blocking is None:  # events written before the rules module: recompute
            checks = detail.get("checks", {})
            verdict = rules.run_verdict((c, True, o, None) for c, o in checks.items())
            blocking = [b.describe() for b in verdict.blocking]
        return "passed" if not blocking else "failed: " + ", ".join(blocking)
    previous = detail.get("previous_record_id")
    if kind in ("promote", "rollback"):
        return f"was {previous}" if previous else "first production record"
    if kind == "add" and detail.get("hold_reasons"):
        return f"on hold: {'; '.join(detail['hold_reasons'])}"
    if kind == "locate":
        return "can be fetched from " + ", ".join(detail.get("added", []))
    if kind == "upload-run":
        checks = ", ".join(f"{c}={o}" for c, o in sorted(detail.get("checks", {}).items()))
        return f"imported run from {detail.get('host')} ({checks}): untrusted, not counted"
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
            )
            for t in found.values()
        ]
    )


@dataclass(frozen=True)
class _Plan:
    """A rollback decision, worked out over one consistent view of the model."""

    history: list[Promotion]
    current: Record | None
    current_verdict: Deployability | None
    candidate: Record | None
    candidate_verdict: Deployability | None
    rejected: list[tuple[str, str, str | None]]  # record id, why, hint


class _Reads:
    """The reads a rollback plan needs, outside a lock (the same interface as ``Locked``)."""

    def __init__(self, store: Store, model_id: str) -> None:
        self.store = store
        self.model_id = model_id

    def state(self, record_id: str) -> RecordState:
        return self.store.state(record_id)

    def latest_run(self, record_id: str, target: str) -> list[CheckVerdict]:
        return self.store.latest_runs([record_id], target)[record_id]

    def promotions(self, target: str) -> list[Promotion]:
        return self.store.promotions(self.model_id, target)

    def records(self, record_ids: Iterable[str]) -> dict[str, Record]:
        return self.store.records_by_id(record_ids)


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
        found = self.all_targets()
        if name not in found:
            raise TargetNotFound(name, sorted(found))
        return found[name]

    def targets(self) -> TargetsOutput:
        """Every target: built in, shared through the registry, and local."""
        return targets_output(self.all_targets())

    @staticmethod
    def _fingerprints() -> Callable[[Target, str], Fingerprint]:
        """A per-call memo of the targets' current runtime fingerprints (never cached across
        calls: a runtime upgrade must expire evidence at once, also in a long-lived server)."""
        cache: dict[tuple[str, str], Fingerprint] = {}

        def of(target: Target, runtime: str) -> Fingerprint:
            key = (target.name, runtime)
            if key not in cache:
                cache[key] = runtime_fingerprint(target, runtime)
            return cache[key]

        return of

    # -- records -------------------------------------------------------------------------

    def get(self, ref: str) -> Record:
        """A record by id or unique id prefix."""
        return self.store.get(ref)

    def models(self) -> list[str]:
        """Every model id with at least one record, sorted."""
        return self.store.model_ids()

    def _record_out(self, record: Record) -> RecordOut:
        files = self.store.files([record.id])[record.id]
        return record_out(record, files, self.store.state(record.id))

    def _require_model(self, model_id: str) -> None:
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
        actor: str | None = None,
        locations: Sequence[str] = (),
        **options: Any,
    ) -> AddOutput:
        """Record an artifact (idempotent: the same facts are the same record). Options are
        those of ``modelreg.inspect``. ``locations``: URLs its bytes can also be fetched from;
        this host's ``file://`` path (or, for ``hf://`` adds, the pinned revision) is recorded
        with them."""
        from modelreg.locations import file_url, parse_location

        given = [parse_location(url).url for url in locations]  # refuse before hashing
        built = inspect(paths, **options)
        actor = actor or config.actor()
        record, created = self.store.add(built.manifest, built.root, actor, built.resolution)
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

    def _judge(
        self,
        record: Record,
        target: Target | None,
        target_name: str,
        state: RecordState,
        run: Sequence[CheckVerdict],
        fingerprints: Callable[[Target, str], Fingerprint],
    ) -> Deployability:
        if target is None:
            return rules.target_undefined(record.id, target_name)
        fingerprint = fingerprints(target, _runtime_of(record))
        return rules.judge(record.id, target.name, record.hold_reasons, state, run, fingerprint)

    def deployability(self, ref: str, target: str) -> Deployability:
        """Is the record deployable on ``target`` right now (with structured reasons)?"""
        record = self.store.get(ref)
        found = self.all_targets().get(target)
        run = self.store.latest_runs([record.id], target)[record.id]
        return self._judge(
            record, found, target, self.store.state(record.id), run, self._fingerprints()
        )

    def _verdicts(
        self, records: Sequence[Record], target_name: str
    ) -> tuple[dict[str, Deployability], dict[str, RecordState]]:
        """Deployability of many records on one target, in a few queries."""
        found = self.all_targets().get(target_name)
        ids = [r.id for r in records]
        runs = self.store.latest_runs(ids, target_name)
        states = self.store.states(ids)
        fingerprints = self._fingerprints()
        verdicts = {
            r.id: self._judge(
                r, found, target_name, states.get(r.id, rules.ACTIVE), runs[r.id], fingerprints
            )
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
        targets = self.all_targets()
        fingerprints = self._fingerprints()
        verified_on = sorted({v.target for v in verifications})
        deployability = []
        for name in verified_on:
            run = self.store.latest_runs([record.id], name)[record.id]
            verdict = self._judge(record, targets.get(name), name, state, run, fingerprints)
            deployability.append(deployability_out(verdict))
        production = [
            promotion_out(p)
            for p in self.store.productions(record.model_id)
            if p.record_id == record.id
        ]
        return ShowOutput(
            record=record_out(record, files, state),
            manifest=record.manifest.model_dump(mode="json"),
            production=production,
            deployability=deployability,
            runs=_runs_out(verifications),
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
        actor: str | None = None,
        warm_llama_child: RuntimeChild | None = None,
    ) -> VerifyOutput:
        """Run the record's required checks on ``target``, store every result with its
        evidence and runtime fingerprint, and say whether it is now deployable there.

        ``path``: where the files are on this host, if not where they were added.
        ``warm_llama_child``: a llama.cpp child started early (see the CLI); used or killed.
        """
        try:
            record = self.store.get(ref)
            the_target = self.target(target)
            from modelreg.validators.base import locate_files

            files = locate_files(record, path)
        except BaseException:
            if warm_llama_child is not None:
                warm_llama_child.discard()
            raise
        return self._verify(record, the_target, files, options, actor, warm_llama_child)

    def _verify(
        self,
        record: Record,
        target: Target,
        files: dict[str, Path],
        options: VerifyOptions | None,
        actor: str | None,
        warm_llama_child: RuntimeChild | None = None,
    ) -> VerifyOutput:
        from modelreg import host
        from modelreg.validators.verify import run_checks

        results = run_checks(record, target, files, options, warm_llama_child)
        fingerprint = runtime_fingerprint(target, _runtime_of(record))
        verdict = rules.run_verdict(
            (r.check, r.required, r.outcome, r.classification) for r in results
        )
        actor = actor or config.actor()
        with self.store.locked(record.model_id) as tx:
            run_id = tx.save_run(record, target.name, results, host.hostname(), fingerprint)
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
                },
            )
            state = tx.state(record.id)
            deployable = rules.judge(
                record.id,
                target.name,
                record.hold_reasons,
                state,
                tx.latest_run(record.id, target.name),
                fingerprint,
            )
        files_out = self.store.files([record.id])[record.id]
        return VerifyOutput(
            record=record_out(record, files_out, state),
            target=target.name,
            run_id=run_id,
            passed=verdict.passed,
            deployability=deployability_out(deployable),
            checks=list(results),
        )

    def stale(self, target: str) -> list[Record]:
        """Records whose latest run on ``target`` passed under a runtime that has since
        changed."""
        self.target(target)
        records = self.store.records_verified_on(target)
        verdicts, _ = self._verdicts(records, target)
        return [r for r in records if verdicts[r.id].stale]

    def verify_stale(
        self, target: str, *, options: VerifyOptions | None = None, actor: str | None = None
    ) -> VerifyStaleOutput:
        """Re-verify every record whose evidence on ``target`` is stale, where it was added."""
        from modelreg.validators.base import locate_files

        the_target = self.target(target)
        runs = [
            self._verify(record, the_target, locate_files(record, None), options, actor)
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
        record = self.store.get(ref)
        the_target = self.target(target)
        fingerprint = runtime_fingerprint(the_target, _runtime_of(record))
        with self.store.locked(record.model_id) as tx:
            verdict = rules.judge(
                record.id,
                target,
                record.hold_reasons,
                tx.state(record.id),
                tx.latest_run(record.id, target),
                fingerprint,
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

    def _plan(
        self,
        view: Locked | _Reads,
        target: Target,
        fingerprints: Callable[[Target, str], Fingerprint],
    ) -> _Plan:
        history = view.promotions(target.name)
        steps = [p.step() for p in history]
        candidates = rules.rollback_candidates(steps)
        records = view.records([p.record_id for p in history])
        current = records[history[-1].record_id] if history else None

        def verdict_of(record: Record) -> Deployability:
            run = view.latest_run(record.id, target.name)
            return self._judge(
                record, target, target.name, view.state(record.id), run, fingerprints
            )

        current_verdict = verdict_of(current) if current else None
        rejected: list[tuple[str, str, str | None]] = []
        for record_id in candidates:
            verdict = verdict_of(records[record_id])
            if verdict.deployable:
                return _Plan(
                    history, current, current_verdict, records[record_id], verdict, rejected
                )
            hint = next((r.hint for r in verdict.reasons if r.hint), None)
            rejected.append((record_id, verdict.summary, hint))
        for record_id in sorted(rules.rolled_back_from(steps) - {current.id if current else ""}):
            rejected.append((record_id, "production was rolled back from it", None))
        return _Plan(history, current, current_verdict, None, None, rejected)

    def _deployed(self, record: Record, verdict: Deployability, target: str) -> DeployedOut:
        run = self.store.latest_run(record.id, target)
        answered = [
            str(g.get("output"))
            for v in run
            for g in v.result.evidence.get("generations", [])
            if isinstance(g, dict)
        ]
        return DeployedOut(
            record=self._record_out(record),
            deployability=deployability_out(verdict),
            verified_on_host=run[0].host if run else None,
            runtime=dict(run[0].fingerprint) if run else {},
            answered=answered,
            locations=[loc.url for loc in self.store.locations([record.id])[record.id]],
        )

    def _rollback_output(
        self,
        model_id: str,
        target: str,
        plan: _Plan,
        message: str,
        applied: Promotion | None = None,
        held: str | None = None,
    ) -> RollbackOutput:
        last = plan.history[-1] if plan.history else None
        production = candidate = rolled_back_from = None
        if applied is not None and plan.candidate is not None and plan.current is not None:
            # After the move: judge both again (the old production record is now held).
            production = self._deployed(
                plan.candidate, self.deployability(plan.candidate.id, target), target
            )
            rolled_back_from = self._deployed(
                plan.current, self.deployability(plan.current.id, target), target
            )
        else:
            if plan.current is not None and plan.current_verdict is not None:
                production = self._deployed(plan.current, plan.current_verdict, target)
            if plan.candidate is not None and plan.candidate_verdict is not None:
                candidate = self._deployed(plan.candidate, plan.candidate_verdict, target)
        return RollbackOutput(
            model_id=model_id,
            target=target,
            production=production,
            candidate=candidate,
            rolled_back_from=rolled_back_from,
            applied=promotion_out(applied) if applied else None,
            held=held,
            already_rolled_back=promotion_out(last)
            if last is not None and last.action == "rollback" and applied is None
            else None,
            rejected=[RejectedCandidate(record_id=r, why=w, hint=h) for r, w, h in plan.rejected],
            message=message,
        )

    def _no_candidate(self, model_id: str, target: str, plan: _Plan) -> NoRollbackCandidate:
        if plan.current is None:
            return NoRollbackCandidate(
                model_id,
                target,
                "nothing was ever production there",
                f"promote a verified record: modelreg promote RECORD --target {target}",
            )
        current = f"production is {plan.current.id}"
        if not plan.rejected:
            return NoRollbackCandidate(
                model_id,
                target,
                f"{current}, and nothing was production there before it",
                "a candidate is a record that was production on this target earlier and is "
                "deployable now",
            )
        rejected = "; ".join(f"{r} ({why})" for r, why, _ in plan.rejected)
        hint = next((h for _, _, h in plan.rejected if h), None)
        return NoRollbackCandidate(
            model_id,
            target,
            f"{current}; earlier production records are not deployable now: {rejected}",
            f"to make one a candidate: {hint}" if hint else None,
        )

    def rollback_plan(self, model_id: str, target: str) -> RollbackOutput:
        """The production record and the rollback candidate: the newest record that was
        production on ``target`` before the current one, is deployable now, and is not a
        record production was rolled back from. Raises ``NoRollbackCandidate`` when there is
        none and production was not put there by a rollback."""
        self._require_model(model_id)
        the_target = self.target(target)
        plan = self._plan(_Reads(self.store, model_id), the_target, self._fingerprints())
        last = plan.history[-1] if plan.history else None
        if plan.candidate is None:
            if last is not None and last.action == "rollback":
                return self._rollback_output(
                    model_id, target, plan, _already_rolled_back(model_id, target, last)
                )
            raise self._no_candidate(model_id, target, plan)
        assert plan.current is not None
        return self._rollback_output(
            model_id,
            target,
            plan,
            f"rollback would make {plan.candidate.id} production for {model_id} on {target} "
            f"instead of {plan.current.id}",
        )

    def rollback(
        self, model_id: str, target: str, *, why: str, actor: str | None = None
    ) -> RollbackOutput:
        """Apply the rollback plan in one locked transaction: the candidate becomes production
        and the record rolled back from is put on hold (``release`` makes it usable again).
        When production was already put there by a rollback, nothing changes (the output says
        so): running the same command twice during an incident is safe."""
        if not why or not why.strip():
            raise InvalidInput("a rollback needs a reason", "give --why '...'")
        self._require_model(model_id)
        the_target = self.target(target)
        fingerprints = self._fingerprints()
        actor = actor or config.actor()
        with self.store.locked(model_id) as tx:
            plan = self._plan(tx, the_target, fingerprints)
            last = plan.history[-1] if plan.history else None
            if last is not None and last.action == "rollback":
                message = _already_rolled_back(model_id, target, last)
                applied = None
                held = None
            elif plan.candidate is None:
                raise self._no_candidate(model_id, target, plan)
            else:
                assert plan.current is not None
                applied = tx.set_production(plan.candidate, target, "rollback", actor, why)
                held = None
                if tx.state(plan.current.id).state is RecordStateKind.ACTIVE:
                    tx.set_state(
                        plan.current,
                        RecordStateKind.HELD,
                        f"rolled back from on {target} (to {plan.candidate.id}): {why}",
                        actor,
                        {"rolled_back_to": plan.candidate.id, "target": target},
                    )
                    held = plan.current.id
                message = (
                    f"rolled back: {plan.candidate.id} is production for {model_id} on {target}; "
                    f"{plan.current.id} is "
                    + (
                        "on hold (release it with: modelreg release " + plan.current.id + ")"
                        if held
                        else "not active"
                    )
                )
        return self._rollback_output(model_id, target, plan, message, applied, held)

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
        if new is not RecordStateKind.ACTIVE and (not why or not why.strip()):
            raise InvalidInput(f"{action} needs a reason", "give --why '...'")
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
            targets = self._targets_with(view.target_specs())
            if target is None or target in targets:
                productions = view.productions(model_id, target)
            # A model with production records exists: ask only when it has none.
            known_model = model_id is None or bool(productions) or view.has_model(model_id)
            if productions:
                records = view.records_by_id(p.record_id for p in productions)
                ids = sorted(records)
                files = view.files(ids)
                states = view.states(ids)
                runs = view.latest_runs_on(ids, sorted({p.target for p in productions}))
                locations = view.locations(ids)
        if model_id is not None and not known_model:
            self._require_model(model_id)
        if target is not None and target not in targets:
            raise TargetNotFound(target, sorted(targets))
        fingerprints = self._fingerprints()
        entries = []
        for p in productions:
            record = records[p.record_id]
            state = states.get(record.id, rules.ACTIVE)
            verdict = self._judge(
                record,
                targets.get(p.target),
                p.target,
                state,
                runs.get((record.id, p.target), []),
                fingerprints,
            )
            entries.append(
                StatusEntry(
                    model_id=p.model_id,
                    target=p.target,
                    record=record_out(record, files[record.id], state),
                    deployability=deployability_out(verdict),
                    promotion=promotion_out(p),
                    locations=[loc.url for loc in locations[record.id]],
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
            targets = self._targets_with(view.target_specs())
            models, total = view.model_page(contains, offset, limit)
            productions = view.productions_of(models)
            records = view.records_by_id(p.record_id for p in productions)
            ids = sorted(records)
            states = view.states(ids)
            runs = view.latest_runs_on(ids, sorted({p.target for p in productions}))
        fingerprints = self._fingerprints()
        cells = []
        for p in productions:
            record = records[p.record_id]
            verdict = deployability_out(
                self._judge(
                    record,
                    targets.get(p.target),
                    p.target,
                    states.get(record.id, rules.ACTIVE),
                    runs.get((record.id, p.target), []),
                    fingerprints,
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
            targets=targets_output(targets).targets,
            models=models,
            total_models=total,
            offset=offset,
            limit=limit,
            cells=cells,
        )

    def gate(self, model_id: str, target: str, sha256: str) -> GateOutput:
        """The deploy gate: passes only when ``sha256`` is a file of the current production
        record of ``model_id`` on ``target`` and that record is deployable there now."""
        if not _SHA256_RE.fullmatch(sha256.strip()):
            raise InvalidInput(
                f"--expect-sha256 {sha256[:80]!r} is not a sha256", "give 64 hex characters"
            )
        sha256 = sha256.strip().lower()
        status = self.status(model_id, target)

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
        return GateOutput(
            model_id=model_id,
            target=target,
            sha256=sha256,
            passed=verdict.deployable,
            record_id=record.record_id,
            reasons=verdict.reasons,
        )

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
        """Will the record (or manifest file) fit ``target``'s memory?"""
        name, manifest = self.manifest_of(ref)
        return fit(name, manifest, self.target(target), **options)

    # -- cards ---------------------------------------------------------------------------

    def verified_on(self, record: Record) -> list[Any]:
        """Where the record's latest run passed, when, on which host, under which runtime."""
        from modelreg.manifests.card import VerifiedOn

        verified = []
        for target in self.store.verified_targets(record.id):
            run = self.store.latest_run(record.id, target)
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

    # -- transfer ------------------------------------------------------------------------

    def export(self, output: Path | None = None, stream: Any = None) -> ExportOutput:
        """Write the whole registry as JSON lines to ``output`` (or ``stream``)."""
        from modelreg.registry.transfer import export_registry

        return export_registry(self.store, output, stream)

    def import_(self, path: Path, *, actor: str | None = None) -> ImportOutput:
        """Load an export into this registry, all or nothing."""
        from modelreg.registry.transfer import import_registry

        return import_registry(self.store, path, actor or config.actor())

    # -- shared targets ------------------------------------------------------------------

    def define_targets(self, path: Path, *, actor: str | None = None) -> TargetsChangeOutput:
        """Share the targets of a YAML file (the targets.yaml format) through the registry:
        everyone using it sees the same definitions. A definition replaces the stored one of
        that name; each change is an event."""
        from modelreg.targets import builtin_names, read_target_specs, spec_as_json

        if not path.is_file():
            raise InvalidInput(f"{path}: no such file", "give a targets YAML file")
        specs = read_target_specs(path)
        if not specs:
            raise InvalidInput(f"{path}: defines no targets", "see: modelreg targets --help")
        for name in specs:
            if not _TARGET_NAME_RE.fullmatch(name):
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
        from modelreg.targets import SHARED_ORIGIN, builtin_names

        found = self.all_targets()
        if name in builtin_names():
            raise InvalidInput(f"target {name!r} is built in and cannot be removed")
        if name in found and found[name].origin != SHARED_ORIGIN:
            raise InvalidInput(
                f"target {name!r} is not shared through the registry: it is defined in "
                f"{found[name].origin.removeprefix('local:')}",
                "edit that file to remove it",
            )
        if not self.store.remove_target(name, actor or config.actor(), why):
            raise TargetNotFound(name, sorted(found))
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
        signature: str | None = None,
        actor: str | None = None,
    ) -> UploadRunOutput:
        """Keep a verification run produced elsewhere (``verify`` on a target host, sent over
        HTTP) as *imported, untrusted* evidence: stored and shown with the record, counted by
        no rule. Until signed evidence is checked (issue 12), no upload — signed or not — can
        make a record deployable; a signature is kept unchecked for that later check."""
        record = self.store.get(ref)
        self.target(target)
        if not checks:
            raise InvalidInput("a run needs at least one check result")
        if len(checks) > _MAX_UPLOADED_CHECKS:
            raise InvalidInput(f"a run has at most {_MAX_UPLOADED_CHECKS} check results")
        names = [c.check for c in checks]
        if len(set(names)) != len(names):
            raise InvalidInput("each check appears once in a run")
        run_id = self.store.save_imported_run(
            record,
            target,
            host,
            fingerprint,
            checks,
            signature,
            "untrusted",
            actor or config.actor(),
        )
        (run,) = [r for r in self.store.imported_runs(record.id) if r.run_id == run_id]
        verdict = self.deployability(record.id, target)
        return UploadRunOutput(
            record_id=record.id,
            run=_imported_out(run),
            deployability=deployability_out(verdict),
            message=f"run {run_id} kept for {record.id} on {target} as imported, untrusted "
            "evidence: it does not count towards deployability (verify on the target to "
            f"record evidence that does: modelreg verify {record.id} --target {target})",
        )

    def imported_runs(self, ref: str) -> ImportedRunsOutput:
        """Runs uploaded for a record (untrusted: shown, never counted)."""
        record = self.store.get(ref)
        return ImportedRunsOutput(
            record_id=record.id,
            runs=[_imported_out(r) for r in self.store.imported_runs(record.id)],
        )


# -- module-level helpers (no database) ---------------------------------------------------


def _token_out(t: StoredToken) -> TokenOut:
    return TokenOut(
        name=t.name,
        role=t.role,
        created_at=t.created_at,
        created_by=t.created_by,
        revoked_at=t.revoked_at,
        revoked_by=t.revoked_by,
    )


def _imported_out(run: ImportedRun) -> ImportedRunOut:
    return ImportedRunOut(
        run_id=run.run_id,
        target=run.target,
        host=run.host,
        fingerprint=run.fingerprint,
        checks=run.checks,
        signed=run.signature is not None,
        trust="untrusted",
        uploaded_at=run.uploaded_at,
        uploaded_by=run.uploaded_by,
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


def _runs_out(verifications: Sequence[Verification]) -> list[RunOut]:
    runs: dict[str, RunOut] = {}
    for v in verifications:
        run = runs.get(v.run_id)
        if run is None:
            run = runs[v.run_id] = RunOut(
                run_id=v.run_id, target=v.target, host=v.host, fingerprint=v.fingerprint, checks=[]
            )
        run.checks.append(v.result)
    return list(runs.values())


def _already_rolled_back(model_id: str, target: str, last: Promotion) -> str:
    return (
        f"already rolled back: {last.record_id} is production for {model_id} on {target} since "
        f"{last.at:%Y-%m-%d %H:%M} UTC (rolled back from {last.previous_record_id} by "
        f"{last.actor}: {last.why}); nothing changed. To go further back, promote an earlier "
        f"verified record: modelreg promote RECORD --target {target} --why '...'"
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


def fit(name: str, manifest: Manifest, target: Target, **options: Any) -> FitOutput:
    """Weights + KV cache + overhead against ``target``'s memory (Neuron bundles: per
    NeuronCore under the tp degree, and host RAM apart)."""
    from modelreg.manifests.fit_report import fit_report

    return fit_report(name, manifest, target, **options)
