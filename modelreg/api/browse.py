"""Browsing: search by record id prefix or file sha256, a filtered page of records with their
verdict on every target they ran on, and the trend of a record's or a model's runs (decode
speed, time to first token, peak RSS) — what the dashboard's pages and ``/api/v1/search``
answer from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from modelreg import rules
from modelreg.api.core import Core
from modelreg.api.views import _bits_per_weight, _total_parameters, deployability_out, record_out
from modelreg.errors import InvalidInput
from modelreg.limits import MODEL_ID_MAX
from modelreg.schemas.output import (
    BrowseItem,
    BrowseOutput,
    SearchMatch,
    SearchOutput,
    TrendOutput,
    TrendPoint,
)

if TYPE_CHECKING:
    from modelreg.registry.rows import Verification

VERDICTS = ("deployable", "stale", "held", "failing", "uncounted", "unverified")
FORMATS = ("gguf", "safetensors", "neuron")
SEARCH_MAX = 200
SEARCH_MIN = 4  # characters: an id prefix must be unambiguous enough to mean something
TREND_RECORDS = 50  # a model's trend: its newest records' runs


class Browse(Core):
    """Search, the records page and run trends."""

    def search(self, query: str, *, limit: int = 50) -> SearchOutput:
        """Records whose id starts with ``query`` (``r_3f2a…`` or ``3f2a…``), that hold a
        file whose sha256 is, or starts with, ``query`` (8 hex digits or more), or whose model
        id contains it (``smollm2``, case-insensitive)."""
        text = query.strip()
        if len(text) < SEARCH_MIN:
            raise InvalidInput(
                f"search {text!r} is too short",
                f"give at least {SEARCH_MIN} characters of a record id or a model id, or 8 of a "
                "sha256",
            )
        if len(text) > MODEL_ID_MAX:
            raise InvalidInput(
                f"search is longer than a model id ({MODEL_ID_MAX} characters)",
                "give a record id, a prefix of one, a file's sha256 or a part of a model id",
            )
        if not 1 <= limit <= SEARCH_MAX:
            raise InvalidInput(f"search limit must be from 1 to {SEARCH_MAX}")
        with self.store.read() as reads:
            hits = reads.search(text, limit + 1)
            ids = [i for i, _, _ in hits[:limit]]
            records = reads.records_by_id(ids)
            files = reads.files(ids)
            states = reads.states(ids)
        matches = [
            SearchMatch(
                record=record_out(records[i], files[i], states.get(i, rules.ACTIVE)),
                matched=how,
                file=path,
            )
            for i, how, path in hits[:limit]
        ]
        return SearchOutput(query=text, matches=matches, truncated=len(hits) > limit)

    def browse(
        self,
        *,
        model: str | None = None,
        state: str | None = None,
        format: str | None = None,
        target: str | None = None,
        now: str | None = None,
        offset: int = 0,
        limit: int = 100,
    ) -> BrowseOutput:
        """Records newest first, each with where it is production and its verdict now on every
        target it ran on. Filters: ``model``, ``state`` (active, held, retired), ``format``,
        and ``now`` — one of deployable, stale, held, failing, uncounted, unverified — on
        ``target``."""
        if model is not None:
            self._require_model(model)
        if state is not None and state not in {s.value for s in rules.RecordStateKind}:
            raise InvalidInput(f"`state` {state!r} must be one of: active, held, retired")
        if format is not None and format not in FORMATS:
            raise InvalidInput(f"`format` {format!r} must be one of: {', '.join(FORMATS)}")
        if now is not None and now not in VERDICTS:
            raise InvalidInput(f"`now` {now!r} must be one of: {', '.join(VERDICTS)}")
        if now is not None and target is None:
            raise InvalidInput("`now` needs `target`: a verdict is on a target")
        if target is not None:
            self.target(target)
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidInput("`offset` must be ≥ 0 and `limit` from 1 to 1000")
        with self.store.read() as reads:
            # A verdict that needs a run on the target: only records with one are judged.
            ran = now in ("deployable", "stale")
            records = reads.records(model, verified_on=target if ran else None)
            records.reverse()  # newest first
            ids = [r.id for r in records]
            states = reads.states(ids)
            if state is not None:
                records = [
                    r
                    for r in records
                    if rules.effective_state(states.get(r.id, rules.ACTIVE), r.hold_reasons)
                    == rules.RecordStateKind(state)
                ]
            if format is not None:
                records = [r for r in records if r.format == format]
            from modelreg.registry.verdicts import stored, stored_of_records

            production: dict[str, list[str]] = {}
            for p in reads.productions_of(sorted({r.model_id for r in records})):
                production.setdefault(p.record_id, []).append(p.target)
            picked: list[tuple[Any, list[Any]]] = []
            total = 0
            # Read a chunk at a time: a verdict filter must see every record, a page needs
            # only the records it shows.
            for start in range(0, len(records), 500):
                chunk = records[start : start + 500]
                kept = stored_of_records(reads, [r.id for r in chunk])
                if target is not None:
                    missing = [
                        (r.id, target)
                        for r in chunk
                        if target not in {v.target for v in kept[r.id]}
                    ]
                    for (record_id, _), verdict in stored(reads, missing).items():
                        kept[record_id].append(verdict)
                for record in chunk:
                    verdicts = sorted(kept[record.id], key=lambda v: v.target)
                    if now is not None:
                        shown = next(deployability_out(v) for v in verdicts if v.target == target)
                        if shown.now != now:
                            continue
                    total += 1
                    if offset < total <= offset + limit:
                        picked.append((record, verdicts))
                if now is None and total >= offset + limit:
                    total = len(records)  # no verdict filter: the rest need no reading
                    break
            files = reads.files([r.id for r, _ in picked])
        items = [
            BrowseItem(
                record=record_out(r, files[r.id], states.get(r.id, rules.ACTIVE)),
                total_parameters=_total_parameters(r),
                bits_per_weight=_bits_per_weight(r),
                production_on=sorted(production.get(r.id, [])),
                deployability=[deployability_out(v) for v in verdicts],
            )
            for r, verdicts in picked
        ]
        return BrowseOutput(records=items, total=total, offset=offset, limit=limit)

    def trend(self, *, model: str | None = None, record: str | None = None) -> TrendOutput:
        """Each local run of a record (or of a model's newest records) with what it measured:
        decode tokens/s, median time to first token, the runtime's peak RSS — oldest first.
        Imported and uploaded runs are not this registry's measurements and are left out."""
        if (model is None) == (record is None):
            raise InvalidInput("trend takes a model or a record")
        with self.store.read() as reads:
            if record is not None:
                found = reads.record(record)
                ids, model_id, record_id = [found.id], None, found.id
            else:
                assert model is not None
                self._require_model(model)
                ids = [r.id for r in reads.records(model)][-TREND_RECORDS:]
                model_id, record_id = model, None
            foreign = {run.run_id for i in ids for run in reads.foreign_runs(i)}
            checks = reads.verifications_of(ids)
        runs: dict[str, list[tuple[str, Verification]]] = {}
        for owner, v in checks:
            if v.run_id not in foreign:
                runs.setdefault(v.run_id, []).append((owner, v))
        points = [_point(run_id, run) for run_id, run in runs.items()]
        points.sort(key=lambda p: (p.at, p.run_id))
        return TrendOutput(model_id=model_id, record_id=record_id, points=points)


def _point(run_id: str, run: Sequence[tuple[str, Verification]]) -> TrendPoint:
    owner, first = run[0]
    verdict = rules.run_verdict(
        (v.result.check, v.result.required, v.result.outcome, v.result.classification)
        for _, v in run
    )
    measured: dict[str, Any] = {}
    for _, v in run:
        evidence = v.result.evidence
        suite = evidence.get("suite_result")
        for resources in (
            evidence.get("resources"),
            suite.get("resources") if isinstance(suite, dict) else None,
        ):
            if isinstance(resources, dict):
                for key in ("decode_tokens_per_s", "ttft_ms_median", "peak_rss_bytes"):
                    value = resources.get(key)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        measured.setdefault(key, value)
    peak = measured.get("peak_rss_bytes")
    return TrendPoint(
        record_id=owner,
        run_id=run_id,
        target=first.target,
        at=max(v.result.finished_at for _, v in run),
        passed=verdict.passed,
        decode_tokens_per_s=measured.get("decode_tokens_per_s"),
        ttft_ms=measured.get("ttft_ms_median"),
        peak_rss_bytes=int(peak) if peak is not None else None,
    )
