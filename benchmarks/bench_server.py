"""``modelreg serve`` against MLflow's ``mlflow server``, on loopback, with one load generator.

    python -m benchmarks.bench_server [--records 100000] [--seconds 20] [--clients 50]
                                      [--rate 200] [--mlflow-seconds 120] [--skip-mlflow]
                                      [--workers 1] [--skip-metrics-overhead]

Ours: 100,000 records (1,000 models × 100) on PostgreSQL ($MODELREG_TEST_POSTGRES_URL, a schema
of its own), every model production on the 5 built-in targets with a passing run under the
current runtime, a location per record with a recorded check that verified its bytes (the
gate passes only bytes a recorded location holds: fetchable is a recorded fact, never a probe by
the reader) — bulk-inserted through ``modelreg.registry.tables``, then every verdict derived and
stored as the writes that make them store them (``registry.verdicts.settle_everything``, what
``db check --quarantine`` does for rows written around modelreg). Asked
``GET /api/v1/status?model=…`` for a random model, and the deploy gate
``GET /api/v1/gate?model=…&target=…&sha256=…`` of a random model's production record on a
random target (a passing gate: 200, asserted before it is measured).

The ceiling (``benchmarks/ceiling_app.py``, closed loop only): a raw ASGI app answering every
request with the bytes of one of ours' responses (status line, the same headers — security
headers, content type, length — and body), under the uvicorn configuration of ``modelreg
serve`` with the same worker processes: the framework's physical limit here. Once with a
status response (for the status rows), once with a gate response (for the gate rows).

MLflow (its own virtualenv under benchmarks/.work/, never the project's): as many model
versions as it registers in ``--mlflow-seconds`` through its own client (stated in the output),
1,000 registered models each with a ``production`` alias. Asked its alias lookup
``GET /api/2.0/mlflow/registered-models/alias?name=…&alias=production`` for a random model.

For each server, the same generator (asyncio, a minimal HTTP/1.1 keep-alive client):
- start-up: process spawn to the first 200;
- one connection, sequential requests: p50 (a ~40 ms p50 is Nagle against delayed ACK);
- closed loop: ``--clients`` connections for ``--seconds``: requests/s, p50, p99, errors;
- open loop: ``--rate`` requests/s for ``--seconds``, latency from the scheduled time
  (no coordinated omission): p50, p99, errors;
- peak RSS of the server's whole process tree during the load (sampled every 100 ms; ours:
  the status and the gate loads), and its CPU time per request in the closed loop (the box is
  shared: requests/s alone hides it);
- ours only: the dashboard's matrix page (1,000 models × 5 targets), server time by the
  response's arrival, median of 5.

Not part of ``make test``: it takes minutes and starts servers.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import WORK

REPO = Path(__file__).resolve().parent.parent
MLFLOW_VENV = WORK / "mlflow-venv"
MODELS = 1_000
TARGETS = ("cpu", "inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")
CHECKS = ("digest", "host-compat", "gguf-cpu-smoke")
SCHEMA = "bench_server"


# -- a minimal HTTP/1.1 keep-alive client ----------------------------------------------------


class Connection:
    """One keep-alive connection: GET a path, read one response (Content-Length or chunked)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_headers: list[tuple[str, str]] = []  # of the last response, in order

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def get(self, path: str) -> tuple[int, bytes]:
        for attempt in (0, 1):  # a keep-alive connection the server closed: reconnect once
            if self.writer is None:
                await self._open()
            assert self.reader is not None and self.writer is not None
            try:
                self.writer.write(
                    f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                    "Accept: application/json\r\n\r\n".encode()
                )
                return await self._response()
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _response(self) -> tuple[int, bytes]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        self.last_headers = []
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
                self.last_headers.append((name.strip().lower(), value.strip()))
        if status in (204, 304) or status < 200:
            body = b""
        elif "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            body = b"".join(parts)
        else:
            body = await self.reader.read()
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    def summary(self) -> dict[str, Any]:
        def ms(v: float | None) -> float | None:
            return None if v is None else round(v * 1000, 2)

        return {
            "requests": self.requests,
            "errors": self.errors,
            "requests_per_s": round(self.rps, 1),
            "p50_ms": ms(self.percentile(50)),
            "p99_ms": ms(self.percentile(99)),
        }


async def closed_loop(
    host: str, port: int, paths: Callable[[], str], clients: int, seconds: float
) -> LoadResult:
    """``clients`` connections, each sending its next request when the last one answered."""
    result = LoadResult()
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        connection = Connection(host, port)
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                status, _ = await connection.get(paths())
                ok = status == 200
            except (OSError, asyncio.IncompleteReadError, ValueError):
                ok = False
                connection.close()
            result.latencies.append(time.perf_counter() - started)
            result.requests += 1
            result.errors += not ok
        connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    result.seconds = time.perf_counter() - started
    return result


async def open_loop(
    host: str, port: int, paths: Callable[[], str], rate: float, seconds: float
) -> LoadResult:
    """Requests sent at a fixed rate whatever the server does; latency counted from when each
    request was due (a slow server does not slow the generator down)."""
    result = LoadResult()
    idle: list[Connection] = []
    tasks: set[asyncio.Task[None]] = set()

    async def one(due: float) -> None:
        connection = idle.pop() if idle else Connection(host, port)
        try:
            status, _ = await connection.get(paths())
            ok = status == 200
            idle.append(connection)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            ok = False
            connection.close()
        result.latencies.append(time.perf_counter() - due)
        result.requests += 1
        result.errors += not ok

    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.ensure_future(one(due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
    result.seconds = time.perf_counter() - start
    for connection in idle:
        connection.close()
    return result


# -- server processes --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its living descendants."""
    import psutil

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = p.cpu_times()
            total += times.user + times.system
    return total


class RssSampler:
    """Peak RSS of a process tree, sampled every 100 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(0.1)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    startup_seconds: float


def start(name: str, argv: Sequence[str], port: int, probe: str, env: dict[str, str]) -> Server:
    """Spawn a server; the start-up time is spawn → first 200 on ``probe``."""
    log = (WORK / f"{name}.log").open("wb")
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)

    while True:
        if process.poll() is not None:
            raise SystemExit(f"{name} exited with {process.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=2) as r:
                if r.status == 200:
                    break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.perf_counter() - started > 300:
            process.kill()
            raise SystemExit(f"{name} did not answer within 300 s; see {log.name}")
        time.sleep(0.01)
    return Server(name, process, port, time.perf_counter() - started)


def stop(server: Server) -> None:
    import signal

    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def measure(server: Server, paths: Callable[[], str], args: argparse.Namespace) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        await closed_loop("127.0.0.1", server.port, paths, 4, 1.0)  # warm up
        sequential = await closed_loop("127.0.0.1", server.port, paths, 1, 3.0)
        with RssSampler(server.process.pid) as rss:
            cpu_before = tree_cpu_seconds(server.process.pid)
            closed = await closed_loop("127.0.0.1", server.port, paths, args.clients, args.seconds)
            cpu = tree_cpu_seconds(server.process.pid) - cpu_before
            opened = await open_loop("127.0.0.1", server.port, paths, args.rate, args.seconds)
        return {
            "startup_s": round(server.startup_seconds, 2),
            "sequential_1_connection": sequential.summary(),
            f"closed_loop_{args.clients}_clients": closed.summary()
            | {"server_cpu_ms_per_request": round(cpu / max(closed.requests, 1) * 1000, 2)},
            f"open_loop_{args.rate:g}_per_s": opened.summary(),
            "peak_rss_mb": round(rss.peak / 2**20, 1),
        }

    return asyncio.run(run())


def measure_closed(
    server: Server, paths: Callable[[], str], args: argparse.Namespace
) -> dict[str, Any]:
    """The closed loop alone (after the same 1 s warm-up): requests/s, p50, p99, errors, the
    server's CPU per request and the peak RSS of its process tree during the loop."""

    async def run() -> dict[str, Any]:
        await closed_loop("127.0.0.1", server.port, paths, 4, 1.0)  # warm up
        with RssSampler(server.process.pid) as rss:
            cpu_before = tree_cpu_seconds(server.process.pid)
            closed = await closed_loop("127.0.0.1", server.port, paths, args.clients, args.seconds)
            cpu = tree_cpu_seconds(server.process.pid) - cpu_before
        return closed.summary() | {
            "server_cpu_ms_per_request": round(cpu / max(closed.requests, 1) * 1000, 3),
            "peak_rss_mb": round(rss.peak / 2**20, 1),
        }

    return asyncio.run(run())


# Headers the ceiling does not replay: uvicorn adds ``date`` itself; the rest are the
# connection's framing, not the response's.
_NOT_REPLAYED = ("date", "connection", "transfer-encoding", "keep-alive")


def capture(port: int, path: str) -> dict[str, Any]:
    """One response of a server, as the ceiling app replays it (``benchmarks.ceiling_app``)."""

    async def get() -> tuple[int, bytes, list[tuple[str, str]]]:
        connection = Connection("127.0.0.1", port)
        try:
            status, body = await connection.get(path)
            return status, body, connection.last_headers
        finally:
            connection.close()

    status, body, headers = asyncio.run(get())
    return {
        "status": status,
        "headers": [[n, v] for n, v in headers if n not in _NOT_REPLAYED],
        "body_base64": base64.b64encode(body).decode(),
    }


def bench_ceiling(
    args: argparse.Namespace, response: dict[str, Any], paths: Callable[[], str]
) -> dict[str, Any]:
    """The raw ASGI app replaying ``response`` under ``modelreg serve``'s uvicorn settings
    and ``args.workers`` processes, asked ``paths`` in the same closed loop as ours."""
    from benchmarks import ceiling_app

    descriptor, name = tempfile.mkstemp(prefix="ceiling-response-", suffix=".json", dir=WORK)
    with os.fdopen(descriptor, "w", encoding="utf-8") as fh:
        json.dump(response, fh)
    port = free_port()
    env = os.environ | {"PYTHONPATH": str(REPO), ceiling_app.VARIABLE: name}
    argv = [
        sys.executable,
        "-m",
        "benchmarks.ceiling_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(args.workers),
    ]
    try:
        server = start("ceiling", argv, port, paths(), env)
        try:
            replayed = capture(port, paths())  # the same bytes as ours sent
            assert replayed == response, (replayed, response)
            result = measure_closed(server, paths, args)
        finally:
            stop(server)
    finally:
        os.unlink(name)
    body = base64.b64decode(response["body_base64"])
    return {
        "startup_s": round(server.startup_seconds, 2),
        "response_body_bytes": len(body),
        "response_headers": [n for n, _ in response["headers"]],
        "workers": args.workers,
        f"closed_loop_{args.clients}_clients": result,
    }


# -- populating ours -----------------------------------------------------------------------


def _schema_url(base: str) -> str:
    from sqlalchemy import create_engine, text

    admin = create_engine(base)
    with admin.begin() as connection:
        connection.execute(text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
        connection.execute(text(f"CREATE SCHEMA {SCHEMA}"))
    admin.dispose()
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}options=-csearch_path%3D{SCHEMA}"


def populate_ours(url: str, records: int) -> dict[str, Any]:
    """Bulk-insert ``records`` records (MODELS models), every model production on every
    built-in target with a passing run under the current runtime, one location per record
    with a check that verified its bytes; then derive and store every verdict, as the writes
    that make them do."""
    if records < 2 * MODELS or records % MODELS:
        raise SystemExit(f"--records must be a multiple of {MODELS} and at least {2 * MODELS}")
    from sqlalchemy import insert

    import modelreg
    from modelreg.fingerprint import runtime_fingerprint
    from modelreg.registry.tables import (
        EventRow,
        LocationCheckRow,
        ModelRow,
        PromotionRow,
        RecordFileRow,
        RecordLocationRow,
        RecordRow,
        RunRow,
        VerificationRow,
    )
    from modelreg.registry.verdicts import settle_everything
    from modelreg.schemas.manifest import (
        Count,
        FileEntry,
        License,
        Manifest,
        ParameterLedger,
        RuntimeRequirements,
    )
    from modelreg.targets import all_targets, for_host

    started = time.perf_counter()
    registry = modelreg.open(url)
    targets = all_targets()
    # The runs' evidence as a verify on this host records it (built-in cpu: this host's runtime).
    fingerprints = {
        t: json.dumps(runtime_fingerprint(for_host(targets[t]), "llama.cpp"), sort_keys=True)
        for t in TARGETS
    }
    template = json.loads(
        Manifest(
            model_id="bench/m0",
            source="pypi://bench==0",
            license=License(id="mit", source="cli"),
            format="gguf",
            files=[FileEntry(path="m.gguf", bytes=1000, sha256="0" * 64)],
            parameters=ParameterLedger(total=Count(value=1000, provenance="tensors")),
            runtime=RuntimeRequirements(runtime="llama.cpp"),
        ).canonical_json()
    )
    now = datetime.now(UTC)
    with registry.store.engine.begin() as c:
        c.execute(
            insert(ModelRow),
            [{"model_id": f"bench/m{m}", "created_at": now} for m in range(MODELS)],
        )
        for start_at in range(0, records, 10_000):
            rows, files, locations, checks, events = [], [], [], [], []
            for i in range(start_at, min(records, start_at + 10_000)):
                model = f"bench/m{i % MODELS}"
                manifest_json, digest = _manifest_json(template, i)
                record_id = "r_" + digest[:12]
                sha = hashlib.sha256(b"file %d" % i).hexdigest()
                rows.append(
                    {
                        "id": record_id,
                        "manifest_sha256": digest,
                        "identity_sha256": digest,
                        "model_id": model,
                        "format": "gguf",
                        "source": f"pypi://bench=={i}",
                        "license": "mit",
                        "manifest_json": manifest_json,
                        "hold_reasons_json": "[]",
                        "root": f"/srv/models/{i}",
                        "created_at": now,
                        "created_by": "bench",
                    }
                )
                files.append(
                    {"record_id": record_id, "path": "m.gguf", "bytes": 1000 + i, "sha256": sha}
                )
                locations.append(
                    {
                        "record_id": record_id,
                        "url": f"file://build-1/srv/models/{i}",
                        "added_at": now,
                        "added_by": "bench",
                    }
                )
                # Fetchable is a recorded fact (the newest check of a location verified its
                # bytes), never a probe by the reader: each location checked once on its host,
                # as `locate --check` there records it.
                checks.append(
                    {
                        "record_id": record_id,
                        "url": f"file://build-1/srv/models/{i}",
                        "ok": True,
                        "host": "build-1",
                        "source": "check",
                        "at": now,
                        "actor": "bench",
                    }
                )
                events.append(
                    {
                        "at": now,
                        "actor": "bench",
                        "kind": "add",
                        "model_id": model,
                        "record_id": record_id,
                        "detail_json": "{}",
                    }
                )
            c.execute(insert(RecordRow), rows)
            c.execute(insert(RecordFileRow), files)
            c.execute(insert(RecordLocationRow), locations)
            c.execute(insert(LocationCheckRow), checks)
            c.execute(insert(EventRow), events)
        # The two newest records of each model: the older was production, the newer is.
        promotions, runs, verifications = [], [], []
        for m in range(MODELS):
            newest = [i for i in (records - 2 * MODELS + m, records - MODELS + m) if i >= 0]
            ids = [_record_id(template, i) for i in newest]
            for target in TARGETS:
                previous = None
                for record_id in ids:
                    promotions.append(
                        {
                            "model_id": f"bench/m{m}",
                            "target": target,
                            "record_id": record_id,
                            "previous_record_id": previous,
                            "action": "promote",
                            "at": now,
                            "actor": "bench",
                            "why": "release",
                        }
                    )
                    previous = record_id
                    run = uuid.uuid4().hex
                    runs.append(
                        {
                            "run_id": run,
                            "record_id": record_id,
                            "target": target,
                            "origin": "local",
                            "created_at": now,
                        }
                    )
                    verifications += [
                        {
                            "run_id": run,
                            "record_id": record_id,
                            "target": target,
                            "check": check,
                            "required": True,
                            "outcome": "pass",
                            "summary": "ok",
                            "evidence_json": "{}",
                            "host": "bench",
                            "started_at": now,
                            "finished_at": now,
                            "fingerprint_json": fingerprints[target],
                        }
                        for check in CHECKS
                    ]
        c.execute(insert(PromotionRow), promotions)
        c.execute(insert(RunRow), runs)
        c.execute(insert(VerificationRow), verifications)
    inserted = time.perf_counter()
    # The verdicts every reader reads are stored by the writes that change them (a verify, a
    # promotion); rows bulk-inserted around modelreg get theirs as `db check --quarantine`
    # derives them.
    with registry.store.write() as tx:
        settled = settle_everything(tx)
    assert settled == MODELS * len(TARGETS) * 2, settled
    settle_s = time.perf_counter() - inserted
    with registry.store.engine.begin() as c:  # committed: the planner keeps the statistics
        c.exec_driver_sql("ANALYZE")
    registry.store.engine.dispose()
    return {
        "records": records,
        "models": MODELS,
        "production_entries": MODELS * len(TARGETS),
        "verdicts_stored": settled,
        "populate_s": round(time.perf_counter() - started, 1),
        "settle_s": round(settle_s, 1),
    }


def _manifest_json(template: dict[str, Any], i: int) -> tuple[str, str]:
    """Record ``i``'s manifest (canonical JSON) and its digest: model ``i % MODELS``, one
    file with a digest of its own."""
    sha = hashlib.sha256(b"file %d" % i).hexdigest()
    manifest = template | {
        "model_id": f"bench/m{i % MODELS}",
        "source": f"pypi://bench=={i}",
        "files": [{"path": "m.gguf", "bytes": 1000 + i, "sha256": sha, "role": "weights"}],
    }
    manifest_json = json.dumps(manifest, sort_keys=True, separators=(",", ":"))
    return manifest_json, hashlib.sha256(manifest_json.encode()).hexdigest()


def _record_id(template: dict[str, Any], i: int) -> str:
    return "r_" + _manifest_json(template, i)[1][:12]


def _production_sha256(records: int, model: int) -> str:
    """The file digest of model ``model``'s production record (on every target): the newest
    of the two ``populate_ours`` promotes, record ``records - MODELS + model``."""
    return hashlib.sha256(b"file %d" % (records - MODELS + model)).hexdigest()


def _gate_path(records: int) -> str:
    m = random.randrange(MODELS)
    return (
        f"/api/v1/gate?model=bench/m{m}&target={random.choice(TARGETS)}"
        f"&sha256={_production_sha256(records, m)}"
    )


def bench_ours(args: argparse.Namespace) -> dict[str, Any]:
    base = (
        os.environ.get("MODELREG_TEST_POSTGRES_URL")
        or subprocess.run(
            ["bash", str(REPO / "scripts" / "start-postgres")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    url = _schema_url(base)
    data = populate_ours(url, args.records)
    port = free_port()
    env = os.environ | {"PYTHONPATH": str(REPO), "MODELREG_HOME": str(WORK / "ours-home")}
    argv = [
        sys.executable,
        "-c",
        "import sys; from modelreg.cli.main import run; sys.argv[0] = 'modelreg'; run()",
        "--db",
        url,
        "serve",
        "--port",
        str(port),
        "--public-read",
        "--workers",
        str(args.workers),
    ]
    server = start("modelreg", argv, port, "/api/v1/status?model=bench/m0", env)
    try:
        # The data is what it claims: every production entry deployable by the real rules.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status?model=bench/m0") as r:
            entries = json.load(r)["entries"]
        assert len(entries) == len(TARGETS), entries
        assert all(e["deployability"]["deployable"] for e in entries), entries

        def status_path() -> str:
            return f"/api/v1/status?model=bench/m{random.randrange(MODELS)}"

        result = measure(server, status_path, args)

        async def matrix() -> list[float]:
            connection = Connection("127.0.0.1", port)
            times = []
            for _ in range(5):
                started = time.perf_counter()
                status, body = await connection.get("/")
                assert status == 200 and b"of 1000" in body, status
                times.append(time.perf_counter() - started)
            connection.close()
            return times

        result["matrix_page_ms_median_of_5"] = round(
            statistics.median(asyncio.run(matrix())) * 1000, 1
        )
        # Ours' status response as measured above, for the ceiling to replay.
        response = capture(port, "/api/v1/status?model=bench/m0")
        assert response["status"] == 200, response
        # The deploy gate of a production record passes (200) on every target, before it is
        # measured: its bytes are at a location whose recorded check verified them.
        for target in TARGETS:
            gate = f"/api/v1/gate?model=bench/m0&target={target}&sha256="
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}{gate}{_production_sha256(args.records, 0)}"
            ) as r:
                assert r.status == 200 and json.load(r)["passed"] is True, target
        gate_response = capture(
            port,
            f"/api/v1/gate?model=bench/m0&target=cpu&sha256={_production_sha256(args.records, 0)}",
        )
        assert gate_response["status"] == 200, gate_response
        result[f"gate_closed_loop_{args.clients}_clients"] = measure_closed(
            server, lambda: _gate_path(args.records), args
        )
        if not getattr(args, "skip_metrics_overhead", False):
            result["metrics_overhead"] = _metrics_overhead(argv, env, status_path, args)
    finally:
        stop(server)
    # Ours is stopped: the ceiling has the machine as ours had it.
    result["ceiling"] = bench_ceiling(args, response, status_path)
    result["gate_ceiling"] = bench_ceiling(args, gate_response, lambda: _gate_path(args.records))
    return {"data": data | {"database": "PostgreSQL", "workers": args.workers}, **result}


def _metrics_overhead(
    argv: Sequence[str],
    env: dict[str, str],
    status_path: Callable[[], str],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The status closed loop on a fresh server like ours (every request counted and timed for
    /metrics) and on one started with --no-metrics: one warm-up pass each (discarded), then
    alternated five times (which goes first swaps each round), half the usual time each. The
    rows compare medians of requests/s and of the server's CPU time per request (2 cores
    shared with the load generator: one slow pass must not decide)."""
    ready = "/api/v1/status?model=bench/m0"
    port = free_port()
    bare_argv = [*argv, "--no-metrics"]
    bare_argv[bare_argv.index("--port") + 1] = str(port)
    bare = start("modelreg-no-metrics", bare_argv, port, ready, env)
    # A fresh server with metrics beside the fresh bare one: both the same age (ours has served
    # every row before; with 2 workers how the 50 connections fall between them moves
    # requests/s by 2×, and a long-running server's split is not a fresh one's).
    port = free_port()
    counted_argv = list(argv)
    counted_argv[counted_argv.index("--port") + 1] = str(port)
    server = start("modelreg-metrics", counted_argv, port, ready, env)
    half = argparse.Namespace(**(vars(args) | {"seconds": args.seconds / 2}))
    runs: dict[str, list[float]] = {k: [] for k in ("metrics", "no_metrics")}
    cpu: dict[str, list[float]] = {k: [] for k in ("metrics", "no_metrics")}
    pair = [("metrics", server), ("no_metrics", bare)]
    try:
        for _, which in pair:
            measure_closed(which, status_path, half)
        for round_ in range(5):
            for name, which in pair if round_ % 2 == 0 else pair[::-1]:
                measured = measure_closed(which, status_path, half)
                runs[name].append(measured["requests_per_s"])
                cpu[name].append(measured["server_cpu_ms_per_request"])
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics") as r:
            exposition = r.read().decode()
    finally:
        stop(bare)
        stop(server)
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith("modelreg_http_requests_total{")
    )
    return (
        runs
        | {f"{k}_cpu_ms_per_request": v for k, v in cpu.items()}
        | {"requests_counted": counted, "observe_us": observe_cost_us()}
    )


_OBSERVE = r"""
import sys, time
import modelreg
from modelreg.server.metrics import Metrics
metrics = Metrics(modelreg.open(sys.argv[1]))  # an empty registry: only requests are counted
n = 100_000
started = time.perf_counter()
for _ in range(n):
    metrics.observe("/api/v1/status", "GET", 200, 0.001)
print((time.perf_counter() - started) / n * 1e6)
"""


def observe_cost_us() -> float:
    """What ``serve`` does per request for /metrics (``Metrics.observe``: the counter and the
    histogram, prometheus-client's multiprocess mode as ``serve`` runs it), in process, µs."""
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as directory:
        counts = Path(directory) / "metrics"  # prometheus-client reads every file in it
        counts.mkdir()
        env = os.environ | {"PROMETHEUS_MULTIPROC_DIR": str(counts)}
        done = subprocess.run(
            [sys.executable, "-c", _OBSERVE, f"sqlite:///{directory}/registry.db"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    return round(float(done.stdout.strip()), 2)


# -- MLflow ------------------------------------------------------------------------------------

_MLFLOW_POPULATE = r"""
import sys, time
from mlflow import MlflowClient
uri, models, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
client = MlflowClient(tracking_uri=uri, registry_uri=uri)
started = time.perf_counter()
for m in range(models):
    client.create_registered_model(f"bench-m{m}")
versions = 0
while time.perf_counter() - started < budget:
    m = versions % models
    v = client.create_model_version(f"bench-m{m}", source=f"file:///srv/models/{versions}")
    versions += 1
for m in range(min(models, versions)):
    client.set_registered_model_alias(f"bench-m{m}", "production", "1")
print(versions, round(time.perf_counter() - started, 1))
"""


def bench_mlflow(args: argparse.Namespace) -> dict[str, Any]:
    python = MLFLOW_VENV / "bin" / "python"
    mlflow = MLFLOW_VENV / "bin" / "mlflow"
    if not mlflow.exists():
        raise SystemExit(
            f"MLflow is not installed in {MLFLOW_VENV}: python3 -m venv {MLFLOW_VENV} && "
            f"{MLFLOW_VENV}/bin/pip install mlflow==3.17.2"
        )
    version = subprocess.run(
        [str(python), "-c", "import mlflow; print(mlflow.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    home = WORK / "mlflow-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    uri = f"sqlite:///{home / 'mlflow.db'}"
    env = os.environ | {"MLFLOW_HOME": str(home), "HOME": str(home)}
    populated = subprocess.run(
        [str(python), "-c", _MLFLOW_POPULATE, uri, str(MODELS), str(args.mlflow_seconds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        check=True,
    ).stdout.split()
    versions, seconds = int(populated[-2]), float(populated[-1])
    port = free_port()
    argv = [
        str(mlflow),
        "server",
        "--backend-store-uri",
        uri,
        "--default-artifact-root",
        str(home / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    probe = "/api/2.0/mlflow/registered-models/alias?name=bench-m0&alias=production"
    server = start("mlflow", argv, port, probe, env)
    models = min(MODELS, versions)
    try:
        result = measure(
            server,
            lambda: (
                "/api/2.0/mlflow/registered-models/alias?name=bench-m"
                f"{random.randrange(models)}&alias=production"
            ),
            args,
        )
    finally:
        stop(server)
    data = {
        "mlflow": version,
        "database": "SQLite",
        "registered_models": MODELS,
        "model_versions": versions,
        "populated_in_s": seconds,
    }
    return {"data": data, **result}


def run(workers: int = 2, args: argparse.Namespace | None = None) -> list[dict[str, Any]]:
    """The rows of RESULTS.md (``make bench``): ours and MLflow, the default sizes, in one run.
    Without MLflow's virtualenv (``make bench`` creates it) its column is empty and no target
    that compares with it is met. ``args``: other sizes (smoke runs of the rows only)."""
    if args is None:
        args = argparse.Namespace(
            records=100_000, seconds=20.0, clients=50, rate=200.0, mlflow_seconds=120.0,
            workers=workers,
        )  # fmt: skip
    WORK.mkdir(parents=True, exist_ok=True)
    try:
        ours = bench_ours(args)
    except subprocess.CalledProcessError:  # no PostgreSQL here: the other rows still count
        print("bench_server: not measured (PostgreSQL could not be started)", file=sys.stderr)
        return [
            {
                "name": "serve: the team service vs MLflow (every serve and dashboard row)",
                "ours_s": None,
                "theirs_s": None,
                "ratio": None,
                "detail": "not measured: PostgreSQL could not be started on this machine",
                "target": "the serve rows' targets",
                "met": False,
            }
        ]
    theirs = bench_mlflow(args) if (MLFLOW_VENV / "bin" / "mlflow").exists() else None
    return rows(ours, theirs, args)


def rows(
    ours: dict[str, Any], theirs: dict[str, Any] | None, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """The rows of RESULTS.md from one run's figures (``theirs``: MLflow's, None when it was
    not measured)."""
    closed, opened = f"closed_loop_{args.clients}_clients", f"open_loop_{args.rate:g}_per_s"
    nan = float("nan")

    def of(result: dict[str, Any] | None, *keys: str) -> float | None:
        for key in keys:
            if result is None:
                return None
            result = result.get(key)
        return float(result) if result is not None else None  # type: ignore[arg-type]

    def ratio(a: float | None, b: float | None) -> float:
        return a / b if a is not None and b else nan

    o_rps, t_rps = of(ours, closed, "requests_per_s"), of(theirs, closed, "requests_per_s")
    o_p99, t_p99 = of(ours, closed, "p99_ms"), of(theirs, closed, "p99_ms")
    o_open, t_open = of(ours, opened, "p99_ms"), of(theirs, opened, "p99_ms")
    o_rss, t_rss = of(ours, "peak_rss_mb"), of(theirs, "peak_rss_mb")
    o_up, t_up = of(ours, "startup_s"), of(theirs, "startup_s")
    matrix = of(ours, "matrix_page_ms_median_of_5")
    gate = f"gate_closed_loop_{args.clients}_clients"
    g_rps = of(ours, gate, "requests_per_s")
    g_p99 = of(ours, gate, "p99_ms")
    ceiling = ours.get("ceiling")
    gate_ceiling = ours.get("gate_ceiling")
    gc_rps = of(gate_ceiling, closed, "requests_per_s")
    # Peak RSS of the server's tree under the status loads and under the gate's.
    o_rss_gate = of(ours, gate, "peak_rss_mb")
    if o_rss is not None and o_rss_gate is not None:
        o_rss = max(o_rss, o_rss_gate)
    overhead = ours.get("metrics_overhead") or {}
    m_on = statistics.median(overhead["metrics"]) if overhead.get("metrics") else None
    m_off = statistics.median(overhead["no_metrics"]) if overhead.get("no_metrics") else None
    m_on, m_off = (round(m_on, 1) if m_on else None), (round(m_off, 1) if m_off else None)
    cpu_on = overhead.get("metrics_cpu_ms_per_request")
    cpu_off = overhead.get("no_metrics_cpu_ms_per_request")
    cpu_on, cpu_off = (
        (statistics.median(cpu_on) if cpu_on else None),
        (statistics.median(cpu_off) if cpu_off else None),
    )
    c_rps = of(ceiling, closed, "requests_per_s")
    data = ours["data"]
    mlflow_data = theirs["data"] if theirs else {}
    size = (
        f"ours: {data['records']:,} records, {data['models']:,} models, PostgreSQL, "
        f"{data['workers']} worker processes; MLflow "
        + (
            f"{mlflow_data['mlflow']}: {mlflow_data['model_versions']:,} model versions "
            f"(populated in {mlflow_data['populated_in_s']} s), {mlflow_data['database']}"
            if theirs
            else "not installed (benchmarks/.work/mlflow-venv)"
        )
    )
    s = 1 / 1000
    return [
        {
            "name": f"serve: status?model= vs MLflow's alias lookup, {args.clients} closed-loop "
            "clients, requests/s",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(o_rps, t_rps),
            "target": "≥ 10× MLflow's requests/s",
            "met": ratio(o_rps, t_rps) >= 10,
            "detail": f"{o_rps} vs {t_rps} requests/s; errors {of(ours, closed, 'errors')} vs "
            f"{of(theirs, closed, 'errors')}; server CPU per request "
            f"{of(ours, closed, 'server_cpu_ms_per_request')} ms vs "
            f"{of(theirs, closed, 'server_cpu_ms_per_request')} ms; one sequential keep-alive "
            f"connection: p50 {of(ours, 'sequential_1_connection', 'p50_ms')} ms vs "
            f"{of(theirs, 'sequential_1_connection', 'p50_ms')} ms; {size}",
        },
        {
            "name": f"serve: status?model= vs a minimal ASGI app returning the same response "
            f"bytes under the same uvicorn settings (physical limit), {args.clients} "
            "closed-loop clients, requests/s",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(o_rps, c_rps),
            "target": "≥ 0.5× the ceiling's requests/s",
            "met": ratio(o_rps, c_rps) >= 0.5,
            "detail": f"{o_rps} vs {c_rps} requests/s; p50 {of(ours, closed, 'p50_ms')} ms vs "
            f"{of(ceiling, closed, 'p50_ms')} ms, p99 {of(ours, closed, 'p99_ms')} ms vs "
            f"{of(ceiling, closed, 'p99_ms')} ms; errors {of(ours, closed, 'errors')} vs "
            f"{of(ceiling, closed, 'errors')}; server CPU per request "
            f"{of(ours, closed, 'server_cpu_ms_per_request')} ms vs "
            f"{of(ceiling, closed, 'server_cpu_ms_per_request')} ms; the ceiling: a raw ASGI "
            "callable (benchmarks/ceiling_app.py) replaying one of ours' status responses "
            f"({ceiling['response_body_bytes'] if ceiling else '?'} bytes of body; headers "
            f"{', '.join(ceiling['response_headers']) if ceiling else '?'}) under "
            f"`modelreg serve`'s uvicorn configuration (h11 with TCP_NODELAY, asyncio, no "
            f"access log, {data['workers']} worker processes), measured after ours stopped, "
            "same generator and closed loop",
        },
        {
            "name": f"serve: status?model= with every request counted and timed for /metrics "
            f"vs the same server with --no-metrics, {args.clients} closed-loop clients, "
            "requests/s",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(m_on, m_off),
            "target": "/metrics costs ≤ 5 % of requests/s (ratio ≥ 0.95)",
            "met": ratio(m_on, m_off) >= 0.95,
            "detail": f"{m_on} vs {m_off} requests/s (median of 5 alternated runs of "
            f"{args.seconds / 2:g} s each: {overhead.get('metrics')} vs "
            f"{overhead.get('no_metrics')}); prometheus-client multiprocess mode over "
            f"{data['workers']} workers; {overhead.get('requests_counted', 0):,.0f} requests "
            "counted by /metrics at the end",
        },
        {
            "name": "serve: the same runs, the server's CPU time per request with /metrics vs "
            "--no-metrics",
            "ours_s": cpu_on * s if cpu_on else None,
            "theirs_s": cpu_off * s if cpu_off else None,
            "ratio": ratio(cpu_on, cpu_off),
            "target": "/metrics costs ≤ 5 % of the server's work per request (ratio ≤ 1.05)",
            "met": ratio(cpu_on, cpu_off) <= 1.05,
            "detail": f"median CPU ms per request of the 5 alternated runs: "
            f"{overhead.get('metrics_cpu_ms_per_request')} vs "
            f"{overhead.get('no_metrics_cpu_ms_per_request')} (the server's process tree, "
            "user + system); the load generator shares the 2 cores, so requests/s moves with "
            "it while CPU per request does not",
        },
        {
            "name": "serve: counting and timing one request for /metrics (Metrics.observe, "
            "multiprocess mode), in process",
            "ours_s": overhead["observe_us"] / 1e6 if overhead.get("observe_us") else None,
            "theirs_s": None,
            "ratio": nan,
            "target": "≤ 5 % of a status request's server CPU time",
            "met": bool(overhead.get("observe_us"))
            and cpu_off is not None
            and overhead["observe_us"] / 1000 <= 0.05 * cpu_off,
            "detail": f"{overhead.get('observe_us')} µs per request over 100,000 calls; a status "
            f"request costs the server {cpu_off} ms of CPU without metrics",
        },
        {
            "name": f"serve: gate?model=&target=&sha256= vs MLflow's alias lookup, "
            f"{args.clients} closed-loop clients, requests/s",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(g_rps, t_rps),
            "target": "≥ 10× MLflow's requests/s",
            "met": ratio(g_rps, t_rps) >= 10,
            "detail": f"{g_rps} vs {t_rps} requests/s; p50 {of(ours, gate, 'p50_ms')} ms vs "
            f"{of(theirs, closed, 'p50_ms')} ms, p99 {of(ours, gate, 'p99_ms')} ms vs "
            f"{of(theirs, closed, 'p99_ms')} ms; errors {of(ours, gate, 'errors')} vs "
            f"{of(theirs, closed, 'errors')}; server CPU per request "
            f"{of(ours, gate, 'server_cpu_ms_per_request')} ms vs "
            f"{of(theirs, closed, 'server_cpu_ms_per_request')} ms; ours: a random model's "
            "production record on a random target, its file's sha256 (every gate passes: "
            "200); MLflow: the same alias lookup as the status row",
        },
        {
            "name": f"serve: gate?model=&target=&sha256= vs a minimal ASGI app returning the "
            f"same response bytes under the same uvicorn settings (physical limit), "
            f"{args.clients} closed-loop clients, requests/s",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(g_rps, gc_rps),
            "target": "≥ 0.5× the ceiling's requests/s",
            "met": ratio(g_rps, gc_rps) >= 0.5,
            "detail": f"{g_rps} vs {gc_rps} requests/s; p50 {of(ours, gate, 'p50_ms')} ms vs "
            f"{of(gate_ceiling, closed, 'p50_ms')} ms, p99 {g_p99} ms vs "
            f"{of(gate_ceiling, closed, 'p99_ms')} ms; errors {of(ours, gate, 'errors')} vs "
            f"{of(gate_ceiling, closed, 'errors')}; server CPU per request "
            f"{of(ours, gate, 'server_cpu_ms_per_request')} ms vs "
            f"{of(gate_ceiling, closed, 'server_cpu_ms_per_request')} ms; the ceiling replays "
            "one of ours' gate responses (200, "
            f"{gate_ceiling['response_body_bytes'] if gate_ceiling else '?'} bytes of body) "
            "as the status row's does a status response",
        },
        {
            "name": f"serve: status?model=, same load, p99 latency ({args.clients} clients)",
            "ours_s": o_p99 * s if o_p99 is not None else None,
            "theirs_s": t_p99 * s if t_p99 is not None else None,
            "ratio": ratio(o_p99, t_p99),
            "target": "≤ 1/10 of MLflow's p99",
            "met": ratio(o_p99, t_p99) <= 0.1,
            "detail": f"p50 {of(ours, closed, 'p50_ms')} ms vs {of(theirs, closed, 'p50_ms')} ms",
        },
        {
            "name": f"serve: gate?model=&target=&sha256=, same load, p99 latency "
            f"({args.clients} clients)",
            "ours_s": g_p99 * s if g_p99 is not None else None,
            "theirs_s": t_p99 * s if t_p99 is not None else None,
            "ratio": ratio(g_p99, t_p99),
            "target": "≤ 1/10 of MLflow's p99",
            "met": ratio(g_p99, t_p99) <= 0.1,
            "detail": f"p50 {of(ours, gate, 'p50_ms')} ms vs {of(theirs, closed, 'p50_ms')} ms "
            "(MLflow: its alias lookup, as in the status row)",
        },
        {
            "name": f"serve: open loop at {args.rate:g} requests/s for {args.seconds:g} s, p99",
            "ours_s": o_open * s if o_open is not None else None,
            "theirs_s": t_open * s if t_open is not None else None,
            "ratio": ratio(o_open, t_open),
            "target": "≤ 50 ms",
            "met": o_open is not None and o_open <= 50,
            "detail": f"p50 {of(ours, opened, 'p50_ms')} ms vs {of(theirs, opened, 'p50_ms')} ms; "
            "latency from the scheduled send time (no coordinated omission)",
        },
        {
            "name": "serve: peak RSS of the server's process tree under that load",
            "ours_s": None,
            "theirs_s": None,
            "ratio": ratio(o_rss, t_rss),
            "target": "≤ 1/10 of MLflow's",
            "met": ratio(o_rss, t_rss) <= 0.1,
            "detail": f"{o_rss} MB vs {t_rss} MB (ours: the larger of the peaks under the "
            f"status loads, {of(ours, 'peak_rss_mb')} MB, and under the gate's, {o_rss_gate} MB; "
            f"{data['workers']} worker processes)",
        },
        {
            "name": "serve: start-up, spawn to the first 200",
            "ours_s": o_up,
            "theirs_s": t_up,
            "ratio": ratio(o_up, t_up),
            "target": "faster than MLflow's",
            "met": ratio(o_up, t_up) < 1,
            "detail": "ours opens the registry (schema check) before it listens",
        },
        {
            "name": "dashboard: the matrix page, 1,000 models × 5 targets",
            "ours_s": matrix * s if matrix is not None else None,
            "theirs_s": None,
            "ratio": None,
            "target": "≤ 200 ms server time",
            "met": matrix is not None and matrix <= 200,
            "detail": "median of 5, request sent to the whole response received, on loopback",
        },
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--mlflow-seconds", type=float, default=120.0)
    parser.add_argument("--skip-mlflow", action="store_true")
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument(
        "--skip-metrics-overhead",
        action="store_true",
        help="no /metrics vs --no-metrics comparison (its rows stay empty)",
    )
    parser.add_argument("--workers", type=int, default=1, help="modelreg serve --workers")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"host": f"{socket.gethostname()}, {os.cpu_count()} cpus"}
    if not args.skip_ours:
        results["modelreg"] = bench_ours(args)
        print(json.dumps({"modelreg": results["modelreg"]}, indent=2), flush=True)
    if not args.skip_mlflow:
        results["mlflow"] = bench_mlflow(args)
        print(json.dumps({"mlflow": results["mlflow"]}, indent=2), flush=True)
    out = WORK / "bench_server.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {out}")
    if "modelreg" in results:
        from benchmarks.run import render

        print(render(rows(results["modelreg"], results.get("mlflow"), args)))


if __name__ == "__main__":
    main()
