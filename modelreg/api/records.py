"""Records: add, show, list, history, diff, fit, cards, attestations, locations, transfer."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from modelreg import config, rules
from modelreg.api.core import _RECORD_ID_RE, Core, _only_stale, _write_private
from modelreg.api.deploy import Deploy
from modelreg.api.locations import Locations
from modelreg.api.offline import (
    FitOptions,
    ManifestOptions,
    diff,
    fit,
    inspect,
    known_options,
    signed_run_problem_for,
)
from modelreg.api.views import (
    _bits_per_weight,
    _card_output,
    _runs_out,
    _total_parameters,
    deployability_out,
    event_out,
    promotion_out,
    record_out,
)
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    IntegrityError,
    InvalidInput,
)
from modelreg.judging import trust_policy
from modelreg.license_policy import LicenseClass, classify, license_change
from modelreg.rules import (
    Deployability,
    RecordStateKind,
)
from modelreg.schemas.output import (
    AddOutput,
    AttestOutput,
    BadValueOut,
    CardRenderOutput,
    CardValidateOutput,
    DbCheckOutput,
    DiffOutput,
    ExportOutput,
    FitOutput,
    HistoryOutput,
    ImportOutput,
    ListItem,
    ListOutput,
    ShowOutput,
    steps_out,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.rows import Promotion
    from modelreg.registry.store import Store
    from modelreg.schemas.manifest import Manifest


# License classes an add remarks on (modelreg.license_policy), whatever the targets decide:
# a non-commercial license is the one a team most often deploys by mistake.
_REMARKED = (LicenseClass.NON_COMMERCIAL,)


def _promotions_of(reads: Reads, record: Record) -> tuple[list[Promotion], list[Promotion]]:
    """Where the record is production now, and — on every other target it was promoted to —
    the newest promotion there: the approval it was made with stays with the record."""
    now = [p for p in reads.productions(record.model_id) if p.record_id == record.id]
    targets = {p.target for p in now}
    return now, [p for p in reads.approvals(record.id) if p.target not in targets]


class Records(Core):
    """Records: add, show, list, history, diff, fit, cards, attestations, the ML-BOM,
    transfer. Collaborators: ``deploy`` (a card that contradicts its record holds it) and
    ``locations`` (the BOM names where the bytes are)."""

    def __init__(self, store: Store, url: str, *, deploy: Deploy, locations: Locations) -> None:
        super().__init__(store, url)
        self._deploy = deploy
        self._locations = locations

    def add(
        self,
        paths: Sequence[str | Path],
        *,
        signature: Path | None = None,
        actor: str | None = None,
        locations: Sequence[str] = (),
        **options: Unpack[ManifestOptions],
    ) -> AddOutput:
        """Record an artifact (idempotent: the same facts are the same record). Options are
        those of ``modelreg.inspect``.

        ``signature``: a bundle made with ``model_signing sign key``; its per-file digests
        must be the record's (checked before anything is written) and it is kept with the
        record, to be verified against a target's trusted keys. ``locations``: URLs its bytes
        can also be fetched from; this host's ``file://`` path (or, for ``hf://`` adds, the
        pinned revision) is recorded with them."""
        from modelreg.locations import file_url, parse_location
        from modelreg.signing import read_artifact_signature
        from modelreg.storable import text_problem
        from modelreg.textsafe import for_terminal
        from modelreg.validators.signature import covered

        known_options("add", options, ManifestOptions)
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
        return self._added(record, created, [here, *given], actor, verified=here)

    def _added(
        self,
        record: Record,
        created: bool,
        urls: Sequence[str],
        actor: str,
        verified: str | None = None,
    ) -> AddOutput:
        """Add the locations of a record just added, and say what was recorded; ``verified``:
        the location add read every file of (its bytes were hashed there just now)."""
        from modelreg import host

        with self.store.locked(record.model_id) as tx:
            if urls:
                tx.add_locations(record, urls, actor)
            if verified is not None:
                tx.record_location_check(
                    record.id,
                    verified,
                    True,
                    "every sha256, hashed by add",
                    host.hostname(),
                    "add",
                    actor,
                )
            out = record_out(record, tx.files([record.id])[record.id], tx.state(record.id))
            locations = [loc.url for loc in tx.locations([record.id])[record.id]]
            earlier = [r for r in tx.records(record.model_id) if r.id != record.id]
        notes = []
        if created and earlier:
            changed = license_change(earlier[-1].license, record.license)
            if changed is not None:
                notes.append(f"{changed} ({earlier[-1].id})")
        kind = classify(record.license) if created and record.license else None
        if kind is not None and kind.license_class in _REMARKED:
            # Said at add whatever the targets decide: a target's license_policy holds it
            # where the policy denies it (a verdict input); none of that is silent.
            notes.append(
                f"license {record.license} is {kind.license_class.value} ({kind.source}): "
                "a target's license_policy (allow, warn or deny) decides where it may deploy"
            )
        return AddOutput(
            created=created,
            record=out,
            manifest=record.manifest.model_dump(mode="json"),
            locations=locations,
            notes=notes,
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
                "send the manifest exactly as inspect wrote it",
            )
        urls = [parse_location(url) for url in locations]
        root = next((Path(u.path) for u in urls if u.scheme == "file"), Path("."))
        actor = actor or config.actor()
        record, created = self.store.add(parsed, root, actor, {"from": "manifest"})
        return self._added(record, created, [u.url for u in urls], actor)

    def show(self, ref: str) -> ShowOutput:
        """One record: manifest, state, where it is production, deployability on every target
        it was verified on, and every run with its evidence."""
        with self.store.read() as reads:
            record = reads.record(ref)
            state = reads.state(record.id)
            files = reads.files([record.id])[record.id]
            verifications = reads.verifications(record.id)
            targets = self.targets_with(reads.target_specs())
            verified_on = sorted({v.target for v in verifications})
            verdicts = reads.verdicts([(record.id, t) for t in verified_on])
            production_now, approved_before = _promotions_of(reads, record)
            production = [promotion_out(p) for p in production_now]
            approvals = [promotion_out(p) for p in approved_before]
            foreign = reads.foreign_runs(record.id)
            exploratory = reads.exploratory_runs(record.id)
        deployability = [deployability_out(verdicts[(record.id, name)]) for name in verified_on]
        named = {p.target for p in production} | set(verified_on)
        units = {t: deployed_unit(targets[t]) for t in sorted(named) if t in targets}
        return ShowOutput(
            record=record_out(record, files, state),
            manifest=record.manifest.model_dump(mode="json"),
            production=production,
            approvals=approvals,
            deployability=deployability,
            runs=_runs_out(verifications, foreign, exploratory),
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
            raise InvalidInput(f"`state` {state!r} must be one of: active, held, retired")
        if deployable_on is not None:
            self.target(deployable_on)
        verdicts: dict[str, Deployability] = {}
        with self.store.read() as reads:
            records = reads.records(model, verified_on=deployable_on)
            ids = [r.id for r in records]
            files = reads.files(ids)
            states = reads.states(ids)
            if deployable_on is not None:
                found = reads.verdicts([(i, deployable_on) for i in ids])
                verdicts = {i: found[(i, deployable_on)] for i in ids}
        items = []
        for record in records:
            record_state = states.get(record.id, rules.ACTIVE)
            if state is not None and rules.effective_state(
                record_state, record.hold_reasons
            ) != RecordStateKind(state):
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

    def history(
        self,
        model_id: str,
        *,
        limit: int | None = None,
        since: str | datetime | None = None,
        target: str | None = None,
    ) -> HistoryOutput:
        """Adds, verifications, promotions, rollbacks, holds of a model, in commit order:
        only those on ``target`` (and the events of no target, as adds), at or after ``since``
        (a datetime, an ISO 8601 date or time, or an age: ``90m``, ``12h``, ``7d``), the newest
        ``limit`` of them."""
        self._require_model(model_id)
        if limit is not None and not 1 <= limit <= 1_000_000:
            raise InvalidInput(f"`limit` {limit} is not 1-1,000,000")
        after = parse_since(since) if since is not None else None
        with self.store.read() as reads:
            events = reads.events(model_id)
            versions = {
                r.id: r.version
                for r in reads.records_by_id(
                    {e.record_id for e in events if e.record_id}, with_manifests=False
                ).values()
            }
        if target is not None:
            events = [e for e in events if e.target in (None, target)]
        if after is not None:
            events = [e for e in events if e.at >= after]
        if limit is not None:
            events = events[-limit:]
        return HistoryOutput(
            model_id=model_id,
            events=[
                event_out(e).model_copy(
                    update={"record_version": versions.get(e.record_id) if e.record_id else None}
                )
                for e in events
            ],
        )

    def _subject(self, ref: str) -> tuple[str, Manifest, bool]:
        """(name, manifest, whether it is a record) of what ``fit`` was given: a record id or
        prefix (one that reads as an id is the record, even where a file has that name), a
        manifest ``.json`` file, or an artifact read as ``inspect`` reads it, unhashed."""
        path = Path(ref)
        manifest_file = path.suffix == ".json" and path.is_file()
        a_record = _RECORD_ID_RE.fullmatch(ref.strip()) is not None
        if not a_record and not manifest_file and (ref.startswith("hf://") or path.exists()):
            from modelreg.manifests.build import build_manifest

            return ref, build_manifest([ref], digest=False).manifest, False
        name, manifest = self.manifest_of(ref)
        return name, manifest, not manifest_file

    def manifest_of(self, ref: str) -> tuple[str, Manifest]:
        """(name, manifest) of a record id/prefix, or of a manifest ``.json`` file."""
        path = Path(ref)
        if path.suffix == ".json" and path.is_file():
            from modelreg.schemas.manifest import read_manifest_file

            return str(path), read_manifest_file(path)
        record = self.get(ref)
        return record.id, record.manifest

    def diff(self, a: str, b: str) -> DiffOutput:
        """What changed from A to B (records or manifest files)."""
        return diff(*self.manifest_of(a), *self.manifest_of(b))

    def fit(
        self, ref: str, target: str, *, compile_host: bool = False, **options: Unpack[FitOptions]
    ) -> FitOutput:
        """Will the record, manifest file or artifact fit ``target``'s memory?
        (``compile_host=True``: can ``target`` compile this Neuron bundle?) An artifact — a
        GGUF file, a checkpoint or Neuron bundle directory, ``hf://org/name@REV`` — is read as
        ``inspect`` reads it, without hashing. For a record verified there, the runtime's
        measured peak RSS is shown beside the estimate. A CPU target that declares no memory
        (built-in ``cpu``) is judged against this host's (``targets.for_host``): fit answers
        for the host that asks; no verdict does."""
        from modelreg.targets import for_host

        known_options("fit", options, FitOptions)
        name, manifest, recorded = self._subject(ref)
        the_target = for_host(self.target(target))
        report = fit(name, manifest, the_target, compile_host=compile_host, **options)
        if recorded and not compile_host:
            measured = self._measured_peak(name, target)
            if measured is not None:
                from modelreg.manifests.fit_report import measured_line

                report.lines.append(measured_line(*measured))
        return report

    def _measured_peak(self, record_id: str, target: str) -> tuple[int, str] | None:
        """The peak RSS the runtime child of the record's latest run on ``target`` measured."""
        with self.store.read() as reads:
            run = reads.latest_local_run(record_id, target)
        for verification in reversed(run):
            resources = verification.result.evidence.get("resources")
            if isinstance(resources, dict) and isinstance(resources.get("peak_rss_bytes"), int):
                return resources["peak_rss_bytes"], verification.run_id
        return None

    def verified_on(self, record: Record) -> list[Any]:
        """Where the record's latest run passed, when, on which host, under which runtime."""
        from modelreg.manifests.card import VerifiedOn

        verified = []
        with self.store.read() as reads:
            targets = reads.verified_targets(record.id)
            found = reads.verdicts([(record.id, t) for t in targets])
            decided = {t: found[(record.id, t)] for t in targets}
            counted = {
                t: reads.run_checks(d.run_id) if d.run_id else [] for t, d in decided.items()
            }
        for target in targets:
            # The run that counts there (an unsigned upload never vouches for a card).
            run = counted[target]
            result = rules.run_verdict(
                (v.result.check, v.result.required, v.result.outcome, v.result.classification)
                for v in run
            )
            if run and result.passed:
                at = max(v.result.finished_at for v in run)
                verified.append(VerifiedOn(target, at, run[0].host, run[0].fingerprint))
        return verified

    def card_render(self, ref: str, output: Path | None = None) -> CardRenderOutput:
        """The card section a publisher needs, from the record's facts — and where it is
        production, with the approval it was promoted with (and the approvals of targets it
        was production on before: its known limitations stay with it)."""
        from modelreg import clock
        from modelreg.api.status import retest_overdue
        from modelreg.manifests.card import ProductionOn, render_card

        record = self.get(ref)
        with self.store.read() as reads:
            promotions, earlier = _promotions_of(reads, record)
        today = clock.utcnow().date()
        production = [
            ProductionOn(
                p.target,
                p.at,
                p.owner,
                p.limitations,
                p.retest_by.date() if p.retest_by is not None else None,
                retest_overdue(p, today) if now else False,
                now=now,
            )
            for now, p in [(True, p) for p in promotions] + [(False, p) for p in earlier]
        ]
        text = render_card(record.manifest, record.id, self.verified_on(record), production)
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
            raise InvalidInput("`hold` needs `record`: the record to hold")
        record = self.get(ref) if ref is not None else None
        report = validate_card(path, record.manifest if record else None)
        held = None
        active = False
        if hold and record is not None and report.hold_reason is not None:
            with self.store.read() as reads:
                active = reads.state(record.id).state is RecordStateKind.ACTIVE
        if active:
            assert record is not None and report.hold_reason is not None
            self._deploy.hold(record.id, report.hold_reason, actor=actor)
            held = report.hold_reason
        return _card_output(path, report, record.id if record else None, held)

    def attest(self, ref: str, target: str) -> AttestOutput:
        """The latest signed run of the record on ``target``: its DSSE envelope and in-toto
        statement, whether the signature verifies with a key the target trusts, whether it
        vouches for the stored run, and whether the stored evidence still hashes to the
        digests it signs."""
        from modelreg.signing import SignatureInvalid, evidence_sha256, verify_run_envelope

        the_target = self.target(target)
        with self.store.read() as reads:
            record = reads.record(ref)
            runs = reads.latest_runs([record.id], target)[record.id]
            trust = trust_policy(the_target)
            stored = reads.verifications(record.id, target)
        signed = [r for r in runs if r.envelope is not None]
        if not signed:
            raise InvalidInput(
                f"record {record.id} has no signed run on {target}",
                step=Step("verify", "sign one", ref=record.id, target=target, sign_key=None),
            )
        run = signed[0]
        envelope = dict(run.envelope or {})
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
        stored = [v for v in stored if v.run_id == run.run_id]
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

    def cyclonedx(self, ref: str, output: Path | None = None) -> dict[str, Any]:
        """A CycloneDX 1.6 ML-BOM (``modelreg.bom``) of one record (an id or unique prefix) or
        of every record of a model (``ORG/NAME``), as the JSON document; also written to
        ``output`` (whole, through a rename) when given."""
        from modelreg import __version__, bom

        if "/" in ref:
            self._require_model(ref)
            ids = [item.record.record_id for item in self.records(ref).records]
        else:
            ids = [self.get(ref).id]
        document = bom.bom(
            [(self.show(i), self._locations.locations(i)) for i in ids], version=__version__
        )
        if output is not None:
            _write_private(output, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        return document

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

    def db_check(self, *, quarantine: bool = False, actor: str | None = None) -> DbCheckOutput:
        """Name every stored value that cannot be read back (a lone surrogate, JSON nested too
        deep: rows from before the storage boundary); ``quarantine`` makes each readable."""
        from modelreg.registry.verdicts import drift, settle_everything

        bad = self.store.check(quarantine=quarantine, actor=actor or config.actor())
        out = [BadValueOut(table=b.table, key=b.key, column=b.column, why=b.why) for b in bad]
        with self.store.read() as reads:
            drifted = drift(reads)
        if quarantine and drifted:
            with self.store.write() as tx:
                settle_everything(tx)
        steps: list[Step] = []
        if not bad:
            message = "every stored value can be read back"
        elif quarantine:
            message = f"{len(bad)} value(s) quarantined: made readable, each with an event"
        else:
            message = f"{len(bad)} stored value(s) cannot be read back as stored"
            steps.append(Step("db_check", "make them readable", quarantine=True))
        if drifted:
            message += (
                f"; {len(drifted)} stored verdict(s) disagree with the rows they are derived "
                "from (written around modelreg)"
                + (": derived again" if quarantine else ": derive them again with --quarantine")
            )
        return DbCheckOutput(
            bad=out,
            quarantined=quarantine and bool(bad),
            verdicts_drifted=drifted,
            message=message,
            next_steps=steps_out(steps),
        )


_AGE_RE = re.compile(r"(\d{1,6})([mhd])")


def parse_since(value: str | datetime) -> datetime:
    """A moment: a datetime (naive is UTC), an ISO 8601 date or time, or an age before now
    (``90m``, ``12h``, ``7d``)."""
    from datetime import UTC, timedelta

    from modelreg.clock import utcnow

    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    text = value.strip()
    age = _AGE_RE.fullmatch(text)
    if age:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[age.group(2)]
        try:
            return utcnow() - timedelta(**{unit: int(age.group(1))})
        except OverflowError:  # before year 1: no moment to count from
            raise InvalidInput(
                f"`since` {text[:60]!r} reaches before year 1", "e.g. 12h, 7d or 365d"
            ) from None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"`since` {text[:60]!r} is not a date, a time or an age",
            "e.g. 2026-11-30, 2026-11-30T09:00Z, 12h or 7d",
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
