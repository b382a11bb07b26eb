"""Run every benchmark and write benchmarks/RESULTS.md (``make bench``)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import (
    bench_digest,
    bench_endpoint,
    bench_fetch,
    bench_gguf_header,
    bench_registry,
    bench_safetensors,
    bench_scan,
    bench_server,
    bench_suite,
    bench_trust,
    bench_verify,
)
from modelreg import host

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def _commit() -> str:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+uncommitted" if dirty else "")


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"  # None: nothing measured beside ours


def _met(value: bool | None) -> str:
    return "n/a" if value is None else "yes" if value else "**no**"  # None: a figure recorded


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "# Benchmark results",
        "",
        f"- date: {dt.date.today().isoformat()}",
        f"- commit: {_commit()}",
        f"- machine: {host.cpu_model()}, {os.cpu_count()} cores, "
        f"{(host.memory_total_bytes() or 0) / 2**30:.0f} GiB RAM; Python "
        f"{sys.version.split()[0]}",
        "- each row is one run of `make bench`: ours and the alternative measured side by side",
        "",
        "| benchmark | ours | alternative | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['name']} | {_seconds(r['ours_s'])} | {_seconds(r['theirs_s'])} | "
            f"{_ratio(r['ratio'])} | {r['target']} | {_met(r['met'])} |"
        )
    lines += ["", "## Details", ""]
    lines += [f"- **{r['name']}**: {r['detail']}" for r in results]
    return "\n".join(lines) + "\n"


def main() -> None:
    results: list[dict[str, Any]] = [bench_gguf_header.run()]
    results += bench_digest.run()
    results += bench_verify.run()
    results += bench_trust.run()
    results += bench_fetch.run()
    results += bench_suite.run()
    results += bench_endpoint.run()
    results += bench_safetensors.run()
    results += bench_scan.run()
    results += bench_registry.run()
    results += bench_server.run()
    text = render(results)
    RESULTS.write_text(text + _NOTES, encoding="utf-8")
    print(text)


_NOTES = """
## Notes

- Rows marked **no** are targets this round did not reach; each is explained here (the figures
  are the table's and the details'). A blank ratio: nothing was measured beside ours; "n/a": a
  figure recorded, with no target to meet.
- `verify` vs the bare script (target +0.35 s, not met: +0.52 s here): the llama.cpp child now
  starts before any heavy import, and its request goes out before the checks run (re-hash,
  library digests and the fixed fingerprint beside the model load). What is left on the critical
  path is the parent's own start-up before it can send the request — the CLI, SQLAlchemy (~0.22
  s), SQLModel (~0.12 s), the tables and pydantic schemas, opening the registry and reading the
  record (the model's path comes from the database), and importing the check catalogue
  (~0.05–0.13 s, every check eagerly) — profiled with pyinstrument on a quiet machine.
- `inspect` vs `openssl dgst` (target 1.25×, not met: 1.43×): the file digest and the
  tensor-data digest come from one read, the second hashed on the other core while the chunk is
  in cache; on two cores shared with the rest of the run the second digest is not free, and the
  process's fixed cost (interpreter, imports, the header read) is ~0.32 s (profiled on the 98 MB
  SmolLM2: the whole process 0.39 s, hashing 0.07 s; typer, the CLI, the manifest builder and
  the pydantic schemas import in ~0.22 s). A cheaper second digest (BLAKE3: a fifth of a sha256
  here, same one read and one core) was built and measured, and not kept: it changes the facts
  of every GGUF record, so the same bytes added again would be a new record (invariant 9).
- The default chat suite vs the Paris check (target 3×, not met: 14.97×): the 17 cases run as
  parallel sequences in one llama.cpp context (one prefill of every prompt after their shared
  prefix, then one decode step for all live sequences). Since issue 24 the suite has a
  long-context case whose input is sized for the model's context: for SmolLM2 (8,192 tokens) it
  is 796 of the suite's 1,146 prompt tokens, and its prefill alone takes 1.97 s on this host
  (measured with llama-cpp-python, 2 threads: ~400 tokens/s); the other 16 cases are the ~2.7 s
  the 15-case suite took before (5.29× then). On 2 cores both phases are compute-bound. The
  physical-limit row — a bare batched llama-cpp-python script given the very prompts verify
  asks, the long-context one included — takes as long as our suite (1.01×, outputs identical):
  the gap to the Paris check is the runtime's compute on this host, not the registry. Batched
  outputs equal one-at-a-time ones on SmolLM2 (tested); on Gemma 3 270M some differ (a
  sequence's logits depend on its batch neighbours in llama.cpp's kernels), recorded as an
  expected failure.
- PostgreSQL rollback plan (target 20 ms): since issue 21 a plan names only a candidate whose
  bytes can be fetched (a stat of each file at each recorded location), and the bench now gives
  model 0's records such copies, so the plan does that work for the first time; 12.0 ms here vs
  4.5 ms on SQLite (met on both in this run; 21.6 and 27.6 ms in earlier, busier runs), the
  difference being PostgreSQL's round trips on a 2-core box that also runs the server under
  test.
- `status --json` over 5,000 production entries (target 100 ms, met): each model's rows and
  verdicts are kept per model generation (migration 0008) in the process; after a write (a hold
  and a release of one production record before each call) the call re-reads and re-judges that
  model only, checks every other model's generation in one query and the identity of the files
  the verdicts used (stat), and joins each entry's kept JSON. The first call in a fresh process
  derives everything (~0.2–0.3 s at this size); the repeated call is in the details.
- The team service vs MLflow (met): the plain `status?model=` and `gate` requests are answered
  in the event loop from the derived entries after one statement on the loop's own connection
  (the model's and the tokens' generations); anything else goes through a worker thread or
  FastAPI. Each worker derives every entry once at start-up. MLflow's figures are its own
  `mlflow server` on SQLite, and they include the ~40 ms Nagle/delayed-ACK stall of its
  keep-alive responses (ours sets TCP_NODELAY, tested on live connections): the first row's
  details show both p50s on one sequential keep-alive connection.
- The ceiling row (target 0.5×, not met: 0.21×): per request ours still makes a PostgreSQL round
  trip (the generations: a write by another process or a revoked token must count from the next
  request), authenticates the token (a sha256 and a lookup), stats the production record's files
  at its locations (the gate passes only fetchable bytes) and encodes the kept JSON. Measured in
  process on PostgreSQL (20,000 records), one model's `status_json` from the kept derivation
  takes 0.36 ms and a gate 0.40 ms, of the 0.62 ms server CPU per request; the ceiling does none
  of it (0.14 ms), and PostgreSQL's CPU shares the 2 cores. A LISTEN/NOTIFY invalidation would
  remove the round trip but answer from a cache a notification may not yet have reached.
- Peak RSS under load (target ≤ 1/10 of MLflow's, not met: 0.17×, 517 MB vs 3,096 MB): each of
  the two workers keeps the derivations of all 5,000 production entries (rows, verdicts and each
  entry's output and JSON) — ~100 MB per worker more than before, the price of not re-deriving
  them per request.
- The write path (target: add, promote and the verify write within 10 % of before, not met for
  add in the run at 31f3c42): `add of a manifest` was 3.2 ms vs 1.6 ms on SQLite and 5.1 ms vs
  3.7 ms on PostgreSQL (1.7 ms and 2.9 ms in this quieter run) — the generation triggers (one
  model row updated per written row on SQLite, once per model and transaction on PostgreSQL at
  commit) and the record's rows flushed one by one (its files refer to it); still far under its
  50 ms bound. The rollback plan (a read that builds a fresh judge twice: 28 queries and the
  runtime fingerprints worked out from scratch) is 4.5 ms on SQLite and 12.0 ms on PostgreSQL
  here (target 20 ms); reading it through the kept assessment, as status does, is the next step.
- The gate row: `gate?model=&target=&sha256=` of a random model's production record on a random
  target, every answer a pass (200). The gate passes only bytes some location has, so after the
  status rows are measured every production record gets a second location, a copy on this host
  (sparse files of the recorded sizes); MLflow's figure is the status row's.
- The peak-RSS rows hash sparse files (all zero bytes): sha256 costs the same per byte, and a
  sparse 8 GiB file needs no disk.
- Registry rows: 100,000 records in 1,000 models, every model production on the five built-in
  targets with a passing run under the current fingerprint, 20,000 more runs on `inf2.xlarge`,
  one model's 100 records verified on `cpu`. The "alternative" column is the same query with our
  indexes dropped (rollback), deployability asked one record at a time (list), or CPython's
  default collector (status, first call after a write as ours).
"""


if __name__ == "__main__":
    main()
