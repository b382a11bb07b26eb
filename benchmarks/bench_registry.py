"""The registry at 100,000 records, on SQLite and PostgreSQL, through the public API.

Data: 100,000 records in 1,000 models; every model has a production record on each of 5
targets (5,000 production pointers, each with a passing 3-check run under the target's
current fingerprint) and 2 earlier promotions on cpu; 20,000 more runs on inf2.xlarge. The
rows are bulk-inserted, then every verdict is derived and stored as the writes that make them
store them (``settle_everything``: what ``db check --quarantine`` does for rows written around
modelreg).

- `modelreg status --json` (what runs where, all 5,000 production entries, serialized) from a
  fresh process, the first call after a write (a hold and a release of a production record
  through the API, each committed, by this process): the command's own time in that process
  (from before it opens the registry to its JSON written; the interpreter and the imports of
  `modelreg`'s start-up are the --help row's) and the whole process's;
- the same in process, with the collector setting of the CLI and server vs CPython's default:
  the first call after a write and a repeated call with no write in between; and `status MODEL`;
- rollback plan with our indexes vs with them dropped;
- `list --deployable-on cpu` over 1,000 verified records of one model vs one record at a time;
- the write path: `add` of a manifest (no hashing), `promote` of a verified record, and
  verify's write (``_record_results``: a run of 3 passing checks stored, judged and its
  verdicts settled; the checks themselves are the verify rows').
Query plans of the hot queries are printed into RESULTS.md.

    python -m benchmarks.bench_registry [--records 100000] [--models 1000] [--write-path-only]

``--write-path-only`` measures the write path alone; it runs on the commit before issue 39
too (a tree without recorded location checks or stored verdicts), for the before column.

(PostgreSQL too when $MODELREG_TEST_POSTGRES_URL is set; a smaller population is for smoke runs
only: ``--records`` at least 5 × ``--models``, ``--models`` at least 4.)
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

import modelreg
from benchmarks.common import WORK
from modelreg.api import Registry
from modelreg.fingerprint import runtime_fingerprint
from modelreg.process import tune_collector
from modelreg.registry import tables
from modelreg.registry.tables import (
    ModelRow,
    PromotionRow,
    RecordFileRow,
    RecordLocationRow,
    RecordRow,
    RunRow,
    VerificationRow,
)
from modelreg.schemas.manifest import (
    Count,
    FileEntry,
    License,
    Manifest,
    ParameterLedger,
    RuntimeRequirements,
)

RECORDS, MODELS = 100_000, 1_000
TARGETS = ("cpu", "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")
INDEXES = (
    "ix_verifications_record_target",
    "ix_verifications_target_record",
    "ix_promotions_model_target",
)
CHECKS = ("digest", "host-compat", "gguf-cpu-smoke")


def _manifest(i: int, models: int = MODELS) -> Manifest:
    return Manifest(
        model_id=f"bench/m{i % models}",
        source=f"pypi://bench=={i}",
        license=License(id="mit", source="cli"),
        format="gguf",
        files=[FileEntry(path="m.gguf", bytes=i, sha256=hashlib.sha256(b"%d" % i).hexdigest())],
        parameters=ParameterLedger(total=Count(value=i, provenance="tensors")),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
    )


Row = dict[str, Any]


def _as_verify_sees(target: Any) -> Any:
    """The target as a verify on this host sees it (``targets.for_host``: whether this host
    is one of its hosts, so its evidence carries this host's runtime); before issue 39 every
    target was judged against the host that asked: the target itself."""
    try:
        from modelreg.targets import for_host
    except ImportError:
        return target
    return for_host(target)


def _run_rows(record_id: str, target: str, at: datetime, fp: str) -> tuple[Row, list[Row]]:
    run_id = uuid.uuid4().hex
    run = {
        "run_id": run_id,
        "record_id": record_id,
        "target": target,
        "origin": "local",
        "created_at": at,
    }
    checks = [
        {
            "run_id": run_id,
            "record_id": record_id,
            "target": target,
            "check": check,
            "required": True,
            "outcome": "pass",
            "summary": "ok",
            "evidence_json": "{}",
            "host": "bench",
            "started_at": at,
            "finished_at": at,
            "fingerprint_json": fp,
        }
        for check in CHECKS
    ]
    return run, checks


def _populate(registry: Registry, records_n: int = RECORDS, models: int = MODELS) -> None:
    """``records_n`` records in ``models`` models (the defaults: the rows of RESULTS.md)."""

    def manifest(i: int) -> Manifest:
        return _manifest(i, models)

    now = datetime.now(UTC)
    # The runs' evidence as a verify on this host records it (built-in cpu: this host's runtime).
    fingerprints = {
        t: json.dumps(
            runtime_fingerprint(_as_verify_sees(registry.target(t)), "llama.cpp"), sort_keys=True
        )
        for t in TARGETS
    }
    with registry.store.engine.begin() as c:
        c.execute(
            insert(ModelRow),
            [{"model_id": f"bench/m{m}", "created_at": now} for m in range(models)],
        )
        for start in range(0, records_n, 10_000):
            records, files = [], []
            for i in range(start, min(records_n, start + 10_000)):
                m = manifest(i)
                records.append(
                    {
                        "id": m.record_id,
                        "manifest_sha256": m.digest(),
                        "identity_sha256": m.identity_digest(),
                        "model_id": m.model_id,
                        "format": "gguf",
                        "source": m.source,
                        "license": "mit",
                        "manifest_json": m.canonical_json(),
                        "hold_reasons_json": "[]",
                        "root": "/bench",
                        "created_at": now,
                        "created_by": "bench",
                    }
                )
                files.append(
                    {
                        "record_id": m.record_id,
                        "path": "m.gguf",
                        "bytes": i,
                        "sha256": m.files[0].sha256,
                    }
                )
            c.execute(insert(RecordRow), records)
            c.execute(insert(RecordFileRow), files)
        runs: list[Row] = []
        checks: list[Row] = []
        promotions: list[Row] = []
        for model in range(models):
            # records model, model + 1000, model + 2000: two earlier cpu promotions, then the
            # production record on every target.
            older = [manifest(model + k * models).record_id for k in (1, 2)]
            production = manifest(model).record_id
            previous = None
            for step, record_id in enumerate(older):
                run, rows = _run_rows(
                    record_id, "cpu", now - timedelta(days=2 - step), fingerprints["cpu"]
                )
                runs.append(run)
                checks += rows
                promotions.append(_promotion(model, "cpu", record_id, previous, now))
                previous = record_id
            for target in TARGETS:
                run, rows = _run_rows(production, target, now, fingerprints[target])
                runs.append(run)
                checks += rows
                promotions.append(
                    _promotion(
                        model, target, production, previous if target == "cpu" else None, now
                    )
                )
        for k in range(records_n // 5):  # 20,000 of 100,000: records 50,000 to 69,999
            run, rows = _run_rows(manifest(k + records_n // 2).record_id, "inf2.xlarge", now, "{}")
            runs.append(run)
            checks += rows[:1]
        # Every record of one model verified on cpu, for list --deployable-on.
        for k in range(records_n // models):
            run, rows = _run_rows(
                manifest(3 + k * models).record_id, "cpu", now, fingerprints["cpu"]
            )
            runs.append(run)
            checks += rows
        for chunk in range(0, len(runs), 20_000):
            c.execute(insert(RunRow), runs[chunk : chunk + 20_000])
        for chunk in range(0, len(checks), 20_000):
            c.execute(insert(VerificationRow), checks[chunk : chunk + 20_000])
        c.execute(insert(PromotionRow), promotions)
        # Model 0's records have their bytes on this host (a rollback names only a record
        # someone can fetch): sparse files of the recorded sizes, recorded as file:// copies.
        from modelreg.locations import file_url

        locations = []
        for k in (0, 1, 2):
            index = k * models
            copy = WORK / "registry-copies" / f"r{index}"
            copy.mkdir(parents=True, exist_ok=True)
            with (copy / "m.gguf").open("wb") as fh:
                fh.truncate(index)
            locations.append(
                {
                    "record_id": manifest(index).record_id,
                    "url": file_url(copy),
                    "added_at": now,
                    "added_by": "bench",
                }
            )
        c.execute(insert(RecordLocationRow), locations)
        if not hasattr(tables, "LocationCheckRow"):
            return  # before issue 39: a location was probed by the reader
        # Fetchable is a recorded fact (the newest check of a location verified it), never a
        # probe by the reader: each copy checked once, as `locate --check` records it.
        checks_of_copies = [
            {
                "record_id": loc["record_id"],
                "url": loc["url"],
                "ok": True,
                "host": "bench",
                "source": "check",
                "at": now,
                "actor": "bench",
            }
            for loc in locations
        ]
        c.execute(insert(tables.LocationCheckRow), checks_of_copies)
    _settle(registry)


def _settle(registry: Registry) -> None:
    """Derive and store every verdict of the bulk-inserted rows, as the writes that make them
    (verify, promote) store them."""
    from modelreg.registry.verdicts import settle_everything

    with registry.store.write() as tx:
        settle_everything(tx)


def _promotion(model: int, target: str, record_id: str, previous: str | None, at: datetime) -> Row:
    return {
        "model_id": f"bench/m{model}",
        "target": target,
        "record_id": record_id,
        "previous_record_id": previous,
        "action": "promote",
        "at": at,
        "actor": "bench",
    }


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _median_ms_after_write(registry: Registry, record_id: str, fn: Any, repeat: int) -> float:
    """Median of ``fn``'s first call after a write: before each call, a hold and a release
    of ``record_id`` through the public API (two committed writes; the record ends as it
    was). Only ``fn`` is timed."""
    times = []
    for k in range(repeat):
        registry.hold(record_id, f"bench: a write before the call ({k})", actor="bench")
        registry.release(record_id, "bench", actor="bench")
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _median_ms_repeated(fn: Any, repeat: int) -> float:
    """Median of ``fn`` called again with no write in between (after one untimed call)."""
    fn()
    return _median_ms(fn, repeat)


# A fresh `modelreg` process running `status --json`: the modules the command uses imported
# first (timed apart: import time is start-up, the --help and empty-registry rows'), then the
# command as `modelreg` runs it, timed from before it opens the registry to its JSON written to
# stdout (a file): no connection, no compiled statement, nothing read yet.
_FRESH_STATUS = r"""
import importlib, json, sys, time
started = time.perf_counter()
for name in (
    "modelreg.cli.main", "modelreg.cli.deploy", "modelreg.api", "modelreg.api.status",
    "modelreg.registry.db", "modelreg.registry.store", "modelreg.registry.verdicts",
    "sqlalchemy.dialects.postgresql.psycopg" if sys.argv[1].startswith("postgresql")
    else "sqlalchemy.dialects.sqlite.pysqlite",
):
    importlib.import_module(name)
from modelreg.cli.main import run
imported = time.perf_counter()
url, timings = sys.argv[1], sys.argv[2]
sys.argv = ["modelreg", "--db", url, "status", "--json"]
code = 0
try:
    run()
except SystemExit as exc:
    code = exc.code or 0
sys.stdout.flush()
done = time.perf_counter()
with open(timings, "w") as fh:
    json.dump({"imports_ms": (imported - started) * 1000, "command_ms": (done - imported) * 1000,
               "code": code}, fh)
"""


def _fresh_status_after_write(
    registry: Registry, url: str, record_id: str, entries: int, repeat: int
) -> dict[str, float]:
    """`modelreg status --json` in a fresh process, the first call after a write: before each
    process, a hold and a release of ``record_id`` through the API (two committed writes by
    this process; the record ends as it was). Medians of the command's time in its process,
    of its imports, and of the whole process (spawn to exit)."""
    import subprocess
    import sys
    import tempfile

    command, imports, whole = [], [], []
    env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with tempfile.TemporaryDirectory(prefix="bench-status-") as directory:
        out, timings = Path(directory) / "status.json", Path(directory) / "timings.json"
        for k in range(repeat):
            registry.hold(record_id, f"bench: a write before the call ({k})", actor="bench")
            registry.release(record_id, "bench", actor="bench")
            with out.open("wb") as fh:
                started = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-c", _FRESH_STATUS, url, str(timings)],
                    stdout=fh,
                    env=env,
                    check=True,
                )
                whole.append((time.perf_counter() - started) * 1000)
            measured = json.loads(timings.read_text())
            assert measured["code"] == 0, measured
            status = json.loads(out.read_text())
            assert len(status["entries"]) == entries, len(status["entries"])
            assert all(e["deployability"]["deployable"] for e in status["entries"])
            command.append(measured["command_ms"])
            imports.append(measured["imports_ms"])
        size = out.stat().st_size
    return {
        "command_ms": statistics.median(command),
        "imports_ms": statistics.median(imports),
        "process_ms": statistics.median(whole),
        "bytes": size,
    }


def _write_path(registry: Registry, records_n: int, models: int) -> dict[str, float]:
    """Medians of the write path, each call its own committed transaction: `add` of a new
    manifest (no hashing), `promote` of a verified record on cpu (model 3's, every one of
    which has a passing run there), and verify's write of a passing 3-check run on cpu
    (``_record_results``, as the rules' state machine drives it; one untimed call first: the
    host's runtime fingerprint is memoized by the process)."""
    from datetime import UTC, datetime

    from modelreg.schemas.verification import CheckResult, Outcome

    counter = iter(range(records_n, records_n + 1000))
    add = _median_ms(
        lambda: registry.store.add(_manifest(next(counter), models), Path("/bench"), "bench"),
        51,
    )
    per_model = records_n // models
    promotions = iter(_manifest(3 + k * models, models).record_id for k in range(1, per_model))
    promote = _median_ms(
        lambda: registry.promote(next(promotions), "cpu", why="bench", actor="bench"),
        min(51, per_model - 1),
    )
    target = _as_verify_sees(registry.target("cpu"))
    # verify's half of the facade (before issue 39: a mixin of the registry itself)
    verify: Any = registry if hasattr(registry, "_record_results") else registry._verify
    verified = iter(_manifest(5 + k * models, models).record_id for k in range(1, per_model))

    def verify_write() -> None:
        record = registry.get(next(verified))
        now = datetime.now(UTC)
        results = [
            CheckResult(
                check=check,
                required=True,
                outcome=Outcome.PASS,
                summary="bench pass",
                evidence={},
                started_at=now,
                finished_at=now,
            )
            for check in CHECKS
        ]
        plan = verify._verify_plan(record, target, None, None, None, None, None)
        started = time.perf_counter()
        out = verify._record_results(record, target, results, plan, "bench")
        times.append((time.perf_counter() - started) * 1000)
        assert out.passed, out

    times: list[float] = []
    verify_write()  # the fingerprint of this host's runtime, memoized
    times.clear()
    for _ in range(min(11, per_model - 2)):
        verify_write()
    return {"add_ms": add, "promote_ms": promote, "verify_write_ms": statistics.median(times)}


def _plan(registry: Registry, sql: str) -> str:
    engine = registry.store.engine
    prefix = "EXPLAIN QUERY PLAN " if engine.dialect.name == "sqlite" else "EXPLAIN "
    with engine.connect() as c:
        rows = c.execute(text(prefix + sql)).all()
    return " | ".join(str(r[-1]) for r in rows)


def _bench(
    name: str, url: str, records_n: int = RECORDS, models: int = MODELS
) -> list[dict[str, Any]]:
    registry = modelreg.open(url)
    _populate(registry, records_n, models)
    engine = registry.store.engine
    if engine.dialect.name == "postgresql":
        with engine.begin() as c:
            c.execute(text("ANALYZE"))
    entries = models * len(TARGETS)

    def all_deployable() -> None:
        matrix = registry.status()
        assert len(matrix.entries) == entries, len(matrix.entries)
        # Every production record passed on its target under the current fingerprint.
        assert all(e.deployability.deployable for e in matrix.entries), [
            e.deployability.reasons for e in matrix.entries if not e.deployability.deployable
        ][:1]

    all_deployable()
    written = _manifest(1, models).record_id
    # `modelreg status --json` from a fresh process, the first call after a write.
    fresh = _fresh_status_after_write(registry, url, written, entries, 5)
    # `status` the first time after a write (what a deploy asks after a promotion or a
    # verify: any committed write is a new generation of the registry) and repeated with no
    # write in between. The write: a hold and a release of model 1's production record.

    def status_json() -> str:
        return registry.status().model_dump_json()

    def status_model() -> str:
        return registry.status("bench/m7").model_dump_json()

    # The command line and the server run with ``tune_collector()``; CPython's default
    # collector thresholds are measured beside it, in the same run.
    thresholds = gc.get_threshold()
    status_default_gc = _median_ms_after_write(registry, written, status_json, 5)
    tune_collector()
    status_all = _median_ms_after_write(registry, written, status_json, 5)
    status_repeated = _median_ms_repeated(status_json, 5)
    gc.set_threshold(*thresholds)
    all_deployable()  # the holds were released: the same matrix
    status_one = _median_ms_after_write(registry, written, status_model, 21)
    status_one_repeated = _median_ms_repeated(status_model, 21)
    rollback = _median_ms(lambda: registry.rollback_plan("bench/m0", "cpu"), 21)
    plan = registry.rollback_plan("bench/m0", "cpu")
    assert plan.candidate is not None, plan.model_dump_json(indent=1)[:3000]
    listing = _median_ms(lambda: registry.records("bench/m3", deployable_on="cpu"), 5)
    with registry.store.read() as reads:
        verified = reads.records("bench/m3", verified_on="cpu")
    one_by_one = _median_ms(lambda: [registry.deployability(r.id, "cpu") for r in verified], 3)
    writes = _write_path(registry, records_n, models)
    all_deployable()  # model 3's newest promotion is production on cpu: deployable as well
    plans = {
        "latest run per record on a target": _plan(
            registry,
            "SELECT max(CASE WHEN runs.origin = 'local' THEN verifications.id END), "
            "max(CASE WHEN runs.envelope_json IS NOT NULL THEN verifications.id END), "
            "max(verifications.id) FROM verifications JOIN runs ON runs.run_id = "
            "verifications.run_id WHERE verifications.target IN ('cpu') AND "
            "verifications.record_id IN ('r_0') "
            "GROUP BY verifications.record_id, verifications.target",
        ),
        "production pointers": _plan(
            registry,
            "SELECT * FROM promotions WHERE id IN (SELECT max(id) FROM promotions "
            "GROUP BY model_id, target)",
        ),
    }
    with engine.begin() as c:
        for index in INDEXES:
            c.execute(text(f"DROP INDEX {index}"))
    rollback_noidx = _median_ms(lambda: registry.rollback_plan("bench/m0", "cpu"), 5)
    # Dropping an index is no write to a table: a write first, or a cached verdict is timed.
    status_noidx = _median_ms_after_write(registry, written, status_model, 3)
    engine.dispose()
    size = f"{records_n // 1000}k records" if records_n >= 1000 else f"{records_n} records"
    add = writes["add_ms"]
    return [
        {
            "name": f"{name}: `modelreg status --json`, {size}, {entries:,} production entries "
            f"({models:,} models × 5 targets), fresh process, first call after a write",
            "ours_s": fresh["command_ms"] / 1000,
            "theirs_s": None,
            "ratio": None,
            "detail": f"the command in a fresh process, from before it opens the registry to "
            f"its JSON ({fresh['bytes']:,} bytes) written: {fresh['command_ms']:.1f} ms (median "
            "of 5 processes, each after a hold and a release of a production record committed "
            f"by another process); the process's imports {fresh['imports_ms']:.0f} ms, the "
            f"whole process spawn to exit {fresh['process_ms']:.0f} ms; in process: "
            f"{status_all:.1f} ms after a write, {status_repeated:.1f} ms repeated",
            "target": "≤ 50 ms",
            "met": fresh["command_ms"] <= 50,
        },
        {
            "name": f"{name}: status --json, {size}, {models:,} models × 5 targets, "
            "first call after a write",
            "ours_s": status_all / 1000,
            "theirs_s": status_default_gc / 1000,
            "ratio": status_default_gc / status_all,
            "detail": f"{entries:,} production entries judged and serialized in "
            f"{status_all:.0f} ms ({status_all / entries * 1000:.0f} µs each) on the first "
            "call after a write (a hold and a release of a production record through the "
            "API, committed before each call; median of 5) with the collector setting of the "
            f"CLI and server, {status_default_gc:.0f} ms with CPython's default (theirs "
            f"column, also after a write); repeated call, no write in between: "
            f"{status_repeated:.0f} ms (median of 5); one model (`status MODEL`): "
            f"{status_one:.1f} ms after a write, {status_one_repeated:.1f} ms repeated, "
            f"{status_noidx:.1f} ms after a write without our indexes; plan of the "
            f"pointers: {plans['production pointers']}",
            "target": "≤ 100 ms",
            "met": status_all <= 100,
        },
        {
            "name": f"{name}: rollback plan, {size}",
            "ours_s": rollback / 1000,
            "theirs_s": rollback_noidx / 1000,
            "ratio": rollback_noidx / rollback,
            "detail": f"{rollback:.1f} ms with indexes vs {rollback_noidx:.1f} ms without",
            "target": "median ≤ 20 ms",
            "met": rollback <= 20,
        },
        {
            "name": f"{name}: list --deployable-on cpu, one model's verified records",
            "ours_s": listing / 1000,
            "theirs_s": one_by_one / 1000,
            "ratio": one_by_one / listing,
            "detail": f"{len(verified)} records: batched {listing:.0f} ms vs one record at a "
            f"time {one_by_one:.0f} ms; plan: {plans['latest run per record on a target']}",
            "target": "≤ 200 ms",
            "met": listing <= 200,
        },
        {
            "name": f"{name}: add of a manifest (no hashing), {size} present",
            "ours_s": add / 1000,
            "theirs_s": None,
            "ratio": None,
            "detail": f"median {add:.1f} ms over 51 adds",
            "target": "≤ 50 ms",
            "met": add <= 50,
        },
        *_write_rows(name, size, writes),
    ]


# The write path before issue 39 (RESULTS.md, measured at a2571ee): add only.
_BEFORE_MS = {"SQLite": {"add_ms": 1.7}, "PostgreSQL": {"add_ms": 2.9}}


def _write_rows(name: str, size: str, writes: dict[str, float]) -> list[dict[str, Any]]:
    """Promote and verify's write (add has its row above): recorded, with the before figure
    where there is one."""
    found = []
    for key, what, repeat in (
        ("promote_ms", "promote of a verified record on cpu", 51),
        ("verify_write_ms", "verify's write (a passing 3-check run stored and judged)", 11),
    ):
        ours = writes[key]
        before = _BEFORE_MS.get(name, {}).get(key)
        found.append(
            {
                "name": f"{name}: {what}, {size} present",
                "ours_s": ours / 1000,
                "theirs_s": before / 1000 if before else None,
                "ratio": ours / before if before else None,
                "detail": f"median {ours:.1f} ms over {repeat} calls",
                "target": "within 20 % of before",
                "met": ours <= 1.2 * before if before else None,
            }
        )
    return found


def write_path_of(url: str, records_n: int, models: int) -> dict[str, float]:
    """The write path alone on a populated registry (``--write-path-only``)."""
    registry = modelreg.open(url)
    _populate(registry, records_n, models)
    if registry.store.engine.dialect.name == "postgresql":
        with registry.store.engine.begin() as c:
            c.execute(text("ANALYZE"))
    found = _write_path(registry, records_n, models)
    registry.store.engine.dispose()
    return found


def run(
    records: int = RECORDS, models: int = MODELS, *, write_path_only: bool = False
) -> list[dict[str, Any]]:
    """The rows of RESULTS.md, on SQLite and (with $MODELREG_TEST_POSTGRES_URL) PostgreSQL;
    ``write_path_only``: the write path's medians alone, one dict per database."""
    if models < 4 or records < 5 * models or records % models:
        raise SystemExit("--records must be a multiple of --models, at least 5 × it; --models ≥ 4")
    WORK.mkdir(parents=True, exist_ok=True)
    sqlite_path = WORK / "bench-registry.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sqlite_path}{suffix}").unlink(missing_ok=True)
    os.environ["MODELREG_HOME"] = str(WORK / "registry-home")

    def bench(name: str, url: str) -> list[dict[str, Any]]:
        if write_path_only:
            return [{"name": name} | write_path_of(url, records, models)]
        return _bench(name, url, records, models)

    results = bench("SQLite", f"sqlite:///{sqlite_path}")
    pg = os.environ.get("MODELREG_TEST_POSTGRES_URL")
    if pg:
        from sqlalchemy import create_engine

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(pg)
        with admin.begin() as c:
            c.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            results += bench("PostgreSQL", f"{pg}?options=-csearch_path%3D{schema}")
        finally:
            with admin.begin() as c:
                c.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--models", type=int, default=MODELS)
    parser.add_argument(
        "--write-path-only",
        action="store_true",
        help="add, promote and verify's write alone (runs on the commit before issue 39 too)",
    )
    args = parser.parse_args(argv)
    found = run(args.records, args.models, write_path_only=args.write_path_only)
    if args.write_path_only:
        for r in found:
            print(json.dumps(r))
        return
    from benchmarks.run import render

    print(render(found))


if __name__ == "__main__":
    main()
