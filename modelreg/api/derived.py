"""Verdicts derived once per registry change, kept in each process.

What ``status``, the deploy gate and the matrix say about a model is derived from:

1. the model's rows — its production pointers, their records, files, states, runs and
   locations, and its attached suite: unchanged while the model's generation is (a trigger
   bumps ``models.generation`` in every transaction that writes one of its rows, migration
   0008);
2. the target definitions — built in, shared (the ``targets`` generation), the local targets
   file (its identity on disk) and whether this host is a Neuron host;
3. files outside the registry that an answer was worked out from — trusted keys, suite files,
   this host's runtime (``Judge.used``: each checked by its identity on every call);
4. where the bytes are (``fetchable_copy``, by ``stat``): checked on every call.

So a read checks (1) with one query per call, (2) with one more and a ``stat``, (3) and (4)
with ``stat`` calls, and derives again only what one of them says has changed — a write to
one model re-derives that model's entries only. The rules' state-machine test compares every
answer of this path with a derivation from scratch after every step, on both backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelreg import rules
from modelreg.api.judging import Assessment, Judge
from modelreg.fingerprint import file_signature

if TYPE_CHECKING:
    from modelreg.record import Record
    from modelreg.registry.store import (
        Promotion,
        Reads,
        StoredFile,
        StoredLocation,
        StoredToken,
    )
    from modelreg.registry.tables import ModelSuiteRow
    from modelreg.rules import Deployability, RecordState, StoredRun
    from modelreg.targets import Target

# Models whose derivations one process keeps (a status over every model of a large registry
# needs them all; beyond this the oldest are dropped and derived again when asked).
MAX_MODELS = 20_000


@dataclass(frozen=True)
class ProductionRows:
    """The rows the verdicts of production entries are derived from, read in one
    transaction: what ``status`` and the matrix both judge."""

    productions: list[Promotion]
    records: dict[str, Record]
    files: dict[str, list[StoredFile]]
    states: dict[str, RecordState]
    runs: dict[tuple[str, str], list[StoredRun]]
    locations: dict[str, list[StoredLocation]]

    @classmethod
    def read(cls, reads: Reads, productions: list[Promotion]) -> ProductionRows:
        records = reads.records_by_id((p.record_id for p in productions), with_manifests=False)
        ids = sorted(records)
        return cls(
            productions,
            records,
            reads.files(ids),
            reads.states(ids),
            reads.latest_runs_on(ids, sorted({p.target for p in productions})),
            reads.locations(ids),
        )


@dataclass(frozen=True)
class Judged:
    """One production entry and its verdict now."""

    promotion: Promotion
    record: Record
    files: list[StoredFile]
    state: RecordState
    verdict: Deployability
    locations: list[str]


def judge_productions(
    judge: Judge, rows: ProductionRows, productions: Iterable[Promotion] | None = None
) -> list[Judged]:
    """Production entries of ``rows`` (default: all) judged by the rules, as status and the
    matrix show them."""
    judged = []
    for p in rows.productions if productions is None else productions:
        record = rows.records[p.record_id]
        files = rows.files[record.id]
        state = rows.states.get(record.id, rules.ACTIVE)
        verdict = judge.verdict(
            record,
            p.target,
            state,
            rows.runs.get((record.id, p.target), []),
            {f.path: f.sha256 for f in files},
        )
        urls = [loc.url for loc in rows.locations[record.id]]
        judged.append(Judged(p, record, files, state, verdict, urls))
    return judged


@dataclass(frozen=True)
class ModelRows:
    """A model's rows at one generation."""

    generation: int
    suite: ModelSuiteRow | None
    rows: ProductionRows


@dataclass
class ModelVerdicts:
    """A model's production entries judged over one assessment, with what they used."""

    rows: ModelRows
    assessment: Assessment
    used: frozenset[tuple[Hashable, Hashable]]
    judged: list[Judged]
    # Per entry, its output for the fetchability it was last shown with: index ->
    # ((fetch_from, why), output) — one kept per entry, whatever a copy in progress says.
    shown: dict[int, tuple[tuple[str | None, str | None], object]] = field(default_factory=dict)


@dataclass(frozen=True)
class Derivation:
    """What one read derived: the assessment, and every production entry asked for."""

    assessment: Assessment
    judged: list[Judged]
    verdicts: list[ModelVerdicts]  # the entry's model's, entry by entry
    indexes: list[int]  # the entry's place in its model's list

    def of(self, model_id: str | None) -> Derivation:
        """The entries of one model only."""
        keep = [i for i, j in enumerate(self.judged) if j.promotion.model_id == model_id]
        return Derivation(
            self.assessment,
            [self.judged[i] for i in keep],
            [self.verdicts[i] for i in keep],
            [self.indexes[i] for i in keep],
        )


class Derived:
    """This process's derivations (thread-safe: the server answers from many threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._assessment: tuple[Hashable, Assessment] | None = None
        self._models: dict[str, ModelRows] = {}
        self._verdicts: dict[str, ModelVerdicts] = {}
        self._tokens: tuple[int, dict[str, StoredToken]] | None = None
        self.enabled = True

    def models_kept(self) -> int:
        return len(self._models)

    def _touch(self, model_ids: Iterable[str]) -> None:
        """Move these models' derivations to the most recently used end (under the lock)."""
        for model_id in model_ids:
            kept = self._models.pop(model_id, None)
            if kept is not None:
                self._models[model_id] = kept

    def tokens(self, generation: int) -> dict[str, StoredToken] | None:
        """The API tokens by secret digest, when kept at ``generation``."""
        kept = self._tokens
        return kept[1] if self.enabled and kept is not None and kept[0] == generation else None

    def keep_tokens(self, generation: int, tokens: dict[str, StoredToken]) -> None:
        self._tokens = (generation, tokens)

    def assessment(
        self, key: Hashable | None, targets: Callable[[], dict[str, Target]]
    ) -> Assessment:
        """The assessment of the target definitions ``key`` names (made by ``targets``).
        Another key (targets redefined, another targets file, another database) drops every
        derivation made over the old one; None (a registry without its generation rows):
        a fresh one, kept for nothing."""
        with self._lock:
            if self.enabled and self._assessment is not None and self._assessment[0] == key:
                return self._assessment[1]
        assessment = Assessment(targets(), kept=key is not None and self.enabled)
        if assessment.kept:
            with self._lock:
                self._assessment = (key, assessment)
                self._models.clear()
                self._verdicts.clear()
        return assessment

    def cached(
        self, key: Hashable | None, generations: dict[str, int], target: str | None = None
    ) -> Derivation | None:
        """``derive``'s answer when everything it would use is kept and current — the
        assessment of target definitions ``key``, every model at its generation in
        ``generations`` (read outside a transaction: ``Store.peek``), every file a verdict
        used unchanged — without reading the registry; None otherwise."""
        with self._lock:
            if (
                key is None
                or not self.enabled
                or self._assessment is None
                or self._assessment[0] != key
            ):
                return None
            assessment = self._assessment[1]
            kept = [
                (self._models.get(m), self._verdicts.get(m), g)
                for m, g in sorted(generations.items())
            ]
            self._touch(generations)
        judge = Judge(assessment, {})
        owners = []
        for rows, found, generation in kept:
            if (
                rows is None
                or rows.generation != generation
                or found is None
                or found.rows is not rows
                or found.assessment is not assessment
                or not judge.unchanged(found.used)
            ):
                return None
            owners.append(found)
        return _derivation(assessment, owners, target)

    def derive(
        self,
        reads: Reads,
        assessment: Assessment,
        generations: dict[str, int],
        target: str | None = None,
    ) -> Derivation:
        """The production entries of the models in ``generations`` (model -> generation, read
        in this transaction) on ``target`` (None: every target), each model's rows read again
        only when its generation moved, and judged again only when its rows, the assessment
        or a file a verdict used has changed."""
        with self._lock:
            known = {m: self._models[m] for m in generations if self.enabled and m in self._models}
            verdicts = {
                m: self._verdicts[m] for m in generations if self.enabled and m in self._verdicts
            }
        stale = sorted(m for m, g in generations.items() if known.get(m, _NONE).generation != g)
        if stale:
            known |= _read_models(reads, stale, generations)
        suites: dict[str, ModelSuiteRow] = {}
        for m in generations:
            attached = known[m].suite
            if attached is not None:
                suites[m] = attached
        judge = Judge(assessment, suites)
        owners: list[ModelVerdicts] = []
        fresh: dict[str, ModelVerdicts] = {}
        for model_id in sorted(generations):
            rows = known[model_id]
            found = verdicts.get(model_id)
            if (
                found is None
                or found.rows is not rows
                or found.assessment is not assessment
                or not judge.unchanged(found.used)
            ):
                judge.used = set()
                entries = judge_productions(judge, rows.rows)
                found = ModelVerdicts(rows, assessment, judge.record_of_use(), entries)
                fresh[model_id] = found
            owners.append(found)
        with self._lock:
            keep = (
                self.enabled and self._assessment is not None and self._assessment[1] is assessment
            )
            if keep:
                for model_id in stale:
                    self._models[model_id] = known[model_id]
                self._verdicts |= fresh
                self._touch(generations)
                while len(self._models) > MAX_MODELS:  # the least recently used go first
                    oldest = next(iter(self._models))
                    self._models.pop(oldest)
                    self._verdicts.pop(oldest, None)
        return _derivation(assessment, owners, target)


def _derivation(
    assessment: Assessment, models: Iterable[ModelVerdicts], target: str | None
) -> Derivation:
    """The entries of these models' verdicts on ``target`` (None: every target)."""
    judged: list[Judged] = []
    owners: list[ModelVerdicts] = []
    indexes: list[int] = []
    for found in models:
        for index, entry in enumerate(found.judged):
            if target is None or entry.promotion.target == target:
                judged.append(entry)
                owners.append(found)
                indexes.append(index)
    return Derivation(assessment, judged, owners, indexes)


_NONE = ModelRows(-1, None, ProductionRows([], {}, {}, {}, {}, {}))


def _read_models(
    reads: Reads, model_ids: Sequence[str], generations: dict[str, int]
) -> dict[str, ModelRows]:
    """The rows of these models (every production of theirs), read in ``reads``."""
    productions = reads.productions_of(model_ids)
    rows = ProductionRows.read(reads, productions)
    suites = reads.model_suites(model_ids)
    by_model: dict[str, list[Promotion]] = {m: [] for m in model_ids}
    for p in productions:
        by_model[p.model_id].append(p)
    parts: dict[str, ProductionRows] = {
        m: ProductionRows(mine, {}, {}, {}, {}, {}) for m, mine in by_model.items()
    }
    for record_id, record in rows.records.items():
        part = parts[record.model_id]
        part.records[record_id] = record
        part.files[record_id] = rows.files[record_id]
        part.locations[record_id] = rows.locations[record_id]
        if record_id in rows.states:
            part.states[record_id] = rows.states[record_id]
    for (record_id, target), runs in rows.runs.items():
        parts[rows.records[record_id].model_id].runs[(record_id, target)] = runs
    return {m: ModelRows(generations[m], suites.get(m), part) for m, part in parts.items()}


def targets_key(generations: dict[str, int], targets_file: str) -> Hashable | None:
    """What the target definitions are a function of, besides the code: the database
    (its ``epoch``), the shared definitions (their generation), the local targets file (path
    and identity) and this host's facts (name, memory, Neuron devices). None when the database
    has no generation rows to say so (nothing is kept then)."""
    from modelreg import host
    from modelreg.targets import neuron_device_visible

    if "epoch" not in generations or "targets" not in generations:
        return None
    return (
        generations["epoch"],
        generations["targets"],
        targets_file,
        file_signature(targets_file),
        neuron_device_visible(),
        host.hostname(),
        host.memory_total_bytes(),
    )
