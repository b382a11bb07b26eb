"""Builders for synthetic GGUF files: well-formed ones through gguf.GGUFWriter, hostile ones
byte by byte."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGUFWriter

from modelreg.bundled import SMOLLM2_BASE

# The bundled SmolLM2 file's base model at its revision, given the way users give it: without
# it a record of the quantized file is held (provenance_unknown).
SMOL_BASE = ("--base-model", SMOLLM2_BASE)


def write_gguf(
    path: Path,
    tensors: dict[str, tuple[int, ...]],
    *,
    arch: str = "llama",
    metadata: dict[str, object] | None = None,
    split_max_tensors: int = 0,
) -> Path:
    """A small F32 GGUF; ``tensors`` maps name -> numpy shape (outermost first)."""
    writer = GGUFWriter(path, arch, split_max_tensors=split_max_tensors)
    for key, value in (metadata or {}).items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        else:
            raise TypeError(key)
    for name, shape in tensors.items():
        writer.add_tensor(name, np.zeros(shape, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def gguf_string(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def raw_gguf(
    *,
    magic: bytes = b"GGUF",
    version: int = 3,
    kvs: Sequence[bytes] = (),
    kv_count: int | None = None,
    tensors: Sequence[bytes] = (),
    tensor_count: int | None = None,
    alignment: int = 32,
    data: bytes = b"",
) -> bytes:
    """Hand-assembled GGUF bytes; counts may lie on purpose."""
    head = magic + struct.pack(
        "<IQQ",
        version,
        len(tensors) if tensor_count is None else tensor_count,
        len(kvs) if kv_count is None else kv_count,
    )
    body = head + b"".join(kvs) + b"".join(tensors)
    pad = (-len(body)) % alignment
    return body + b"\0" * pad + data


def kv_u32(key: str | bytes, value: int) -> bytes:
    return gguf_string(key) + struct.pack("<II", 4, value)


def kv_str(key: str, value: str | bytes, declared_len: int | None = None) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    n = len(raw) if declared_len is None else declared_len
    return gguf_string(key) + struct.pack("<IQ", 8, n) + raw


def tensor_info(name: str, dims: Sequence[int], ggml_type: int = 0, offset: int = 0) -> bytes:
    return (
        gguf_string(name)
        + struct.pack("<I", len(dims))
        + b"".join(struct.pack("<Q", d) for d in dims)
        + struct.pack("<IQ", ggml_type, offset)
    )


def scale_token_embedding(src: Path, dst: Path, factor: float) -> Path:
    """Copy a GGUF whose token embedding is Q8_0, multiplying every block scale by ``factor``:
    the Gemma √hidden_size bug (embeddings at the wrong magnitude), reproduced on a real model."""
    import shutil

    from modelreg.manifests.gguf import read_gguf

    shutil.copyfile(src, dst)
    header = read_gguf(dst)
    tensor = next(t for t in header.tensors if t.name == "token_embd.weight")
    assert tensor.type_name == "Q8_0" and tensor.n_bytes is not None
    start = header.data_offsets[0] + tensor.offset
    data = np.memmap(dst, dtype=np.uint8, mode="r+", offset=start, shape=(tensor.n_bytes,))
    blocks = data.reshape(-1, 34)  # Q8_0 block: fp16 scale, then 32 int8 weights
    scales = blocks[:, :2].copy().view(np.float16).astype(np.float32) * factor
    blocks[:, :2] = scales.astype(np.float16).view(np.uint8).reshape(-1, 2)
    data.flush()
    del data
    return dst


def flip_byte(src: Path, dst: Path) -> Path:
    """Copy ``src`` with one byte in the middle inverted."""
    import shutil

    shutil.copyfile(src, dst)
    middle = dst.stat().st_size // 2
    with dst.open("r+b") as fh:
        fh.seek(middle)
        byte = fh.read(1)
        fh.seek(middle)
        fh.write(bytes([byte[0] ^ 0xFF]))
    return dst


def rewrite_chat_template(src: Path, dst: Path, template: str) -> Path:
    """Copy a GGUF with gguf's own reader and writer, changing only the chat template (the
    approach of gguf's gguf_new_metadata script): a metadata-only edit."""
    import gguf

    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch=arch)
    for f in reader.fields.values():
        if f.name == "general.architecture" or f.name.startswith("GGUF."):
            continue
        if f.name == "tokenizer.chat_template":
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), vtype, sub_type=sub)
    writer.add_chat_template(template)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data)
    writer.close()
    return dst


def kv_nested_array(key: str, depth: int, outer_length: int = 1) -> bytes:
    """``key`` = an array of arrays ``depth`` levels deep, holding one uint32 at the bottom."""
    arrays = struct.pack("<IIQ", 9, 9, outer_length) + struct.pack("<IQ", 9, 1) * (depth - 2)
    return gguf_string(key) + arrays + struct.pack("<IQI", 4, 1, 7)


# -- synthetic records and runs, for rule tests that need no runtime -------------------------


def synthetic_sha256(i: int) -> str:
    """The recorded sha256 of synthetic record ``i``'s one file (not of any real bytes: every
    one starts with zeros, so a prefix matches several)."""
    return f"{i:064x}"


def synthetic_manifest(i: int, model_id: str = "rules/alpha", **updates: object) -> Any:
    """A hashed one-file GGUF manifest with every fact known (so nothing holds it)."""
    from modelreg.schemas.manifest import (
        Count,
        FileEntry,
        License,
        Manifest,
        ParameterLedger,
        RuntimeRequirements,
    )

    manifest = Manifest(
        model_id=model_id,
        source=f"pypi://synthetic-model=={i}.0",
        license=License(id="mit", source="cli"),
        format="gguf",
        files=[FileEntry(path=f"m{i}.gguf", bytes=1000 + i, sha256=synthetic_sha256(i))],
        parameters=ParameterLedger(total=Count(value=1000 + i, provenance="tensors")),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
    )
    return Manifest.model_validate(manifest.model_dump() | updates) if updates else manifest


def synthetic_bytes() -> Path:
    """Where synthetic records' copies live: under this test's MODELREG_HOME (every test, and
    every example of the state machine, has its own), so that no other test — nor another
    test run on the same machine — can delete or change them under it."""
    import os

    home = os.environ.get("MODELREG_HOME")
    if home:
        return Path(home) / "synthetic-bytes"
    return Path(tempfile.gettempdir()) / f"modelreg-synthetic-bytes-{os.getpid()}"


def add_synthetic(
    registry: Any,
    i: int,
    model_id: str = "rules/alpha",
    *,
    fetchable: bool | None = None,
    **updates: object,
) -> str:
    """Add a synthetic record; ``fetchable``: its one file exists (at its recorded size) in a
    directory recorded as its ``file://`` location, with the check ``add`` records of the
    location it hashed (a rollback candidate and the gate need a verified copy; the synthetic
    digests are no real bytes', so the check is recorded as add records it, not read). By
    default only for the synthetic file: a test that gives its own ``files`` locates them."""
    from modelreg.locations import file_url

    manifest = synthetic_manifest(i, model_id, **updates)
    record, _ = registry.store.add(manifest, Path("/synthetic"), "tester")
    if fetchable if fetchable is not None else "files" not in updates:
        directory = synthetic_bytes() / record.id
        directory.mkdir(parents=True, exist_ok=True)
        for f in manifest.files:
            (directory / f.path).parent.mkdir(parents=True, exist_ok=True)
            (directory / f.path).write_bytes(b"\0" * (f.bytes or 0))
        located_as_added(registry, record, file_url(directory))
    return str(record.id)


def located_as_added(registry: Any, record: Any, url: str, actor: str = "tester") -> None:
    """``url`` recorded as the record's location with the check ``add`` records of the one it
    hashed (synthetic digests are no real bytes': the check is recorded, not read)."""
    with registry.store.locked(record.model_id) as tx:
        tx.add_locations(record, [url], actor)
        tx.record_location_check(
            record.id, url, True, "every sha256, hashed by add", "synthetic-host", "add", actor
        )


def record_of_files(registry: Any, files: dict[str, bytes], i: int = 1) -> str:
    """A synthetic record whose files are these bytes (no location: the test locates them)."""
    import hashlib

    entries = [
        {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for name, data in files.items()
    ]
    return add_synthetic(registry, i, files=entries)


PASSING = {"digest": "pass", "host-compat": "pass", "gguf-cpu-smoke": "pass"}


def record_run(
    registry: Any,
    record_id: str,
    target: str = "cpu",
    outcomes: dict[str, str] | None = None,
    evidence: dict[str, dict[str, Any]] | None = None,
    *,
    suite: Any = None,
) -> str:
    """Store a verify run with the given check outcomes (``evidence``: per check) through
    verify's own write (``Registry._record_results``: its fingerprint of this host, the
    runtime it reports, the one-off rule, the row, the event) — what ``verify`` stores after
    its checks ran. ``suite``: a suite file given for this run (a one-off unless in force)."""
    from datetime import UTC, datetime

    from modelreg.schemas.verification import CheckResult, Outcome
    from modelreg.targets import for_host

    record = registry.get(record_id)
    the_target = for_host(registry.target(target))
    now = datetime.now(UTC)
    results = [
        CheckResult(
            check=check,
            required=True,
            outcome=Outcome(outcome),
            summary=f"synthetic {outcome}",
            evidence=(evidence or {}).get(check, {}),
            started_at=now,
            finished_at=now,
        )
        for check, outcome in (outcomes or PASSING).items()
    ]
    with registry.store.read() as reads:
        attached = reads.model_suites([record.model_id]).get(record.model_id)
    plan = registry._verify._verify_plan(record, the_target, None, suite, attached, None, None)
    out = registry._verify._record_results(record, the_target, results, plan, "tester")
    return str(out.run_id)


def report_runtime(
    registry: Any, target: str = "cpu", runtime: str = "llama.cpp", **changes: str
) -> None:
    """A host of ``target`` reports running ``runtime`` with ``changes`` to what this host
    runs (e.g. ``**{"llama-cpp-python": "0.3.99"}``), through the store's write of a host
    report — what ``modelreg host report`` records on a host that was upgraded."""
    from modelreg.fingerprint import observed_runtime
    from modelreg.targets import for_host

    the_target = for_host(registry.target(target))
    observed = observed_runtime(the_target, runtime) | changes
    with registry.store.write() as tx:
        tx.record_runtime_report(target, runtime, "upgraded-host", observed, "report", "tester")


def key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """A fresh P-256 key pair as PEM files: (private, public)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


class Stored:
    """Assertions' reads: each call one read transaction of the store (``Store.read``)."""

    def __init__(self, registry_or_store: Any) -> None:
        self._store = getattr(registry_or_store, "store", registry_or_store)

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            with self._store.read() as reads:
                return getattr(reads, name)(*args, **kwargs)

        return call


def stored(registry_or_store: Any) -> Any:
    """``stored(registry).state(record_id)``: one read of the store, for a test's assertion."""
    return Stored(registry_or_store)


def add_locations(registry: Any, record: Any, urls: list[str], actor: str) -> list[str]:
    """Add locations to a record in its model's locked transaction (what ``locate`` does)."""
    with registry.store.locked(record.model_id) as tx:
        added: list[str] = tx.add_locations(record, urls, actor)
    return added


def suite_evidence(suite: Any, answers: dict[str, str]) -> dict[str, Any]:
    """A check's evidence as the smoke check stores it: ``suite`` judged by the real judge
    (``evaluate_suite``) over ``answers`` (case id -> output; a missing case answers "no
    idea"), the runtime aside."""
    from modelreg.schemas.suite import Generation
    from modelreg.validators.judge import evaluate_suite

    generations = {
        c.id: Generation(prompt=c.prompt, output=answers.get(c.id, "no idea"), chat=False)
        for c in suite.cases
    }
    return {"suite_result": evaluate_suite(suite, generations).model_dump(mode="json")}


# -- a webhook receiver: a real HTTP server on loopback ------------------------------------


class Receiver:
    """An HTTP server on 127.0.0.1 (a thread) that keeps every POST it gets — (headers,
    body) — and answers ``status`` after ``delay_s`` (both changeable while it runs)."""

    def __init__(self, status: int = 200, delay_s: float = 0.0, answer: bytes = b"ok") -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.status, self.delay_s, self.answer = status, delay_s, answer
        self.posts: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                import time

                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.posts.append((dict(self.headers.items()), body))
                time.sleep(receiver.delay_s)
                try:
                    self.send_response(receiver.status)
                    self.send_header("Content-Length", str(len(receiver.answer)))
                    self.end_headers()
                    self.wfile.write(receiver.answer)
                except OSError:  # the sender gave up waiting
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/modelreg"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens (connection refused)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks"


def open_with_targets(url: str, spec: Path) -> Any:
    """A registry at ``url`` with the targets file ``spec`` applied to it (``targets
    apply``): what a team does once, after which every host reads the same definitions."""
    import modelreg

    registry = modelreg.open(url)
    if spec.exists():
        registry.define_targets(spec, actor="tester")
    return registry
