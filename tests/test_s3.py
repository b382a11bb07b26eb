"""S3 locations against a real S3 API server on loopback (moto's standalone server), reached
through a small proxy that can throttle a range or cut a response short — the faults a real
fetch meets. Every sha256 is checked as the bytes arrive; nothing reaches ``--to`` unless every
file matched, and a download cut short resumes from the bytes it kept."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from modelreg import Registry
from modelreg.errors import InvalidInput, NotFetchable
from tests.helpers import record_of_files

boto3 = pytest.importorskip("boto3")

MIB = 1 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Faults:
    """What the proxy does to requests: ``throttle`` answers 503 SlowDown once to a GET of
    (path, range start); ``cut_from[path] = N`` sends half the body of every GET whose range
    starts at or after byte N, then drops the connection."""

    throttle: set[tuple[str, int]] = field(default_factory=set)
    cut_from: dict[str, int] = field(default_factory=dict)
    log: list[tuple[str, str, int | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ranges(self, path: str) -> list[int]:
        with self.lock:
            return sorted(s for m, p, s in self.log if m == "GET" and p == path and s is not None)


def _proxy(upstream: int, faults: Faults) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            path = urlsplit(self.path).path
            wanted = self.headers.get("Range")
            start = int(wanted.split("=", 1)[1].split("-", 1)[0]) if wanted else None
            with faults.lock:
                faults.log.append((self.command, path, start))
                throttled = (path, start) in faults.throttle
                faults.throttle.discard((path, start))  # type: ignore[arg-type]
                cut = faults.cut_from.get(path)
            if throttled and self.command == "GET":
                error = b"<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            connection.close()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() in ("transfer-encoding", "connection", "date", "server"):
                    continue
                if name.lower() == "content-length" and self.command != "HEAD":
                    continue
                self.send_header(name, value)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if cut is not None and start is not None and start >= cut and self.command == "GET":
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(data)

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def moto_server() -> Iterator[int]:
    """moto's standalone S3 API server on a loopback port, for this module."""
    port = _free_port()
    executable = Path(sys.executable).with_name("moto_server")
    process = subprocess.Popen(
        [str(executable), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.1)
    yield port
    process.terminate()
    process.wait(10)


@dataclass
class S3:
    bucket: str
    client: Any  # straight to the server, for the test's own puts
    faults: Faults

    def put(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def path(self, key: str) -> str:
        return f"/{self.bucket}/{key}"


@pytest.fixture
def s3(moto_server: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    """A fresh bucket; modelreg reaches the server through the fault proxy, with credentials
    from the standard environment variables."""
    from modelreg import s3 as s3_module

    faults = Faults()
    proxy = _proxy(moto_server, faults)
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{proxy.server_address[1]}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    s3_module.reset()
    monkeypatch.setattr(s3_module, "RANGE_BACKOFF_S", 0.01)  # the retries, not their waits
    client = boto3.client(
        "s3",
        endpoint_url=f"http://127.0.0.1:{moto_server}",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    bucket = f"models-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)
    yield S3(bucket, client, faults)
    s3_module.reset()
    proxy.shutdown()
    proxy.server_close()


def _files() -> dict[str, bytes]:
    # A file of several ranges (8 MiB each) and a small one under a directory.
    big = hashlib.shake_256(b"modelreg s3 test").digest(20 * MIB + 12345)
    return {"model.gguf": big, "tokenizer/config.json": b'{"vocab": 49152}'}


def _upload(s3: S3, prefix: str, files: dict[str, bytes]) -> str:
    for name, data in files.items():
        s3.put(f"{prefix}/{name}", data)
    return f"s3://{s3.bucket}/{prefix}/"


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if "out" in p.name)


def test_fetch_streams_every_file_in_ranges_and_checks_each_sha256(
    registry: Registry, s3: S3, tmp_path: Path
) -> None:
    files = _files()
    record = record_of_files(registry, files)
    url = _upload(s3, "smollm2/v1", files)
    registry.locate(record, [url], check_added=False)
    seen: list[int] = []
    fetched = registry.fetch(record, tmp_path / "out", progress=seen.append)
    assert {f.path: f.source for f in fetched.files} == dict.fromkeys(files, url)
    for name, data in files.items():
        assert (tmp_path / "out" / name).read_bytes() == data
    assert sum(seen) == sum(map(len, files.values()))
    # The large file came in 8 MiB ranges (parallel requests), the small one in one.
    assert s3.faults.ranges(s3.path("smollm2/v1/model.gguf")) == [0, 8 * MIB, 16 * MIB]
    assert _leftovers(tmp_path) == ["out"]


def test_a_corrupted_object_is_refused_and_leaves_nothing(
    registry: Registry, s3: S3, tmp_path: Path
) -> None:
    files = _files()
    record = record_of_files(registry, files)
    tampered = bytearray(files["model.gguf"])
    tampered[15 * MIB] ^= 0xFF  # same size: only the sha256 can tell
    url = _upload(s3, "bad", files | {"model.gguf": bytes(tampered)})
    registry.locate(record, [url], check_added=False)
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    message = caught.value.message
    assert message.startswith("model.gguf: no location has it with sha256 ")
    assert f"{url}: model.gguf: MISMATCH — sha256 " in message and "resumes" not in message
    assert _leftovers(tmp_path) == []  # no destination, no staging, no partial file


def test_a_missing_object_names_the_key_and_the_next_location_serves(
    registry: Registry, s3: S3, tmp_path: Path
) -> None:
    files = {"a.gguf": b"a" * 1000, "b.json": b"{}"}
    record = record_of_files(registry, files)
    partial = _upload(s3, "partial", {"a.gguf": files["a.gguf"]})
    registry.locate(record, [partial], check_added=False)
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    assert f"no object s3://{s3.bucket}/partial/b.json" in caught.value.message
    assert _leftovers(tmp_path) == []
    whole = _upload(s3, "whole", files)
    registry.locate(record, [whole], check_added=False)
    # The copy the first fetch found wanting is tried last now: the whole one serves.
    (partial_state,) = [loc for loc in registry.locations(record).locations if loc.url == partial]
    assert partial_state.checked is not None and not partial_state.checked.ok
    fetched = registry.fetch(record, tmp_path / "out")
    assert {f.path: f.source for f in fetched.files} == {"a.gguf": whole, "b.json": whole}
    assert registry.locations(record).fetch_from == whole


def test_a_throttled_range_is_retried(registry: Registry, s3: S3, tmp_path: Path) -> None:
    files = _files()
    record = record_of_files(registry, files)
    registry.locate(record, [_upload(s3, "slow", files)], check_added=False)
    key = s3.path("slow/model.gguf")
    s3.faults.throttle.add((key, 8 * MIB))
    registry.fetch(record, tmp_path / "out")
    assert (tmp_path / "out" / "model.gguf").read_bytes() == files["model.gguf"]
    assert s3.faults.ranges(key) == [0, 8 * MIB, 8 * MIB, 16 * MIB]  # the 503, then again


def test_a_download_cut_short_keeps_its_bytes_and_the_next_fetch_resumes(
    registry: Registry, s3: S3, tmp_path: Path
) -> None:
    files = _files()
    record = record_of_files(registry, files)
    registry.locate(record, [_upload(s3, "flaky", files)], check_added=False)
    key = s3.path("flaky/model.gguf")
    s3.faults.cut_from[key] = 8 * MIB  # the first range arrives, every later one is cut
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    message = caught.value.message
    assert "at byte 8,388,608 of 20,983,865" in message and "resumes from them" in message
    assert not (tmp_path / "out").exists()
    (staging,) = (p for p in tmp_path.iterdir() if p.name.startswith(".out.fetch-"))
    assert (staging / "model.gguf").stat().st_size == 8 * MIB

    s3.faults.cut_from.clear()
    s3.faults.log.clear()
    fetched = registry.fetch(record, tmp_path / "out")
    assert s3.faults.ranges(key) == [8 * MIB, 16 * MIB]  # the kept prefix is not asked again
    assert (tmp_path / "out" / "model.gguf").read_bytes() == files["model.gguf"]
    assert [f.sha256 for f in fetched.files] == [
        hashlib.sha256(d).hexdigest() for d in files.values()
    ]
    assert _leftovers(tmp_path) == ["out"]


def test_a_prefix_from_another_object_is_caught_by_the_digest(
    registry: Registry, s3: S3, tmp_path: Path
) -> None:
    """A kept prefix is hashed again from disk with the rest: if the object changed between
    the two fetches, the whole file's sha256 says so and nothing is left."""
    files = _files()
    record = record_of_files(registry, files)
    url = _upload(s3, "moving", files)
    registry.locate(record, [url], check_added=False)
    key = s3.path("moving/model.gguf")
    s3.faults.cut_from[key] = 8 * MIB
    with pytest.raises(NotFetchable):
        registry.fetch(record, tmp_path / "out")
    (staging,) = (p for p in tmp_path.iterdir() if p.name.startswith(".out.fetch-"))
    with (staging / "model.gguf").open("r+b") as kept:
        kept.write(b"X")  # the kept bytes are no longer the object's
    s3.faults.cut_from.clear()
    with pytest.raises(NotFetchable, match="MISMATCH"):
        registry.fetch(record, tmp_path / "out")
    assert _leftovers(tmp_path) == []


def test_a_check_reads_every_byte_and_records_what_it_found(registry: Registry, s3: S3) -> None:
    files = {"m.gguf": b"w" * 100}
    record = record_of_files(registry, files)
    url = _upload(s3, "here", files)
    gone = f"s3://{s3.bucket}/nowhere/"
    other = _upload(s3, "other", {"m.gguf": b"x" * 100})
    found = registry.locate(record, [url, gone, other])
    checked = {c.url: (c.ok, c.detail) for c in found.checked}
    assert checked[url] == (True, "every sha256 (1 file(s))")
    assert checked[gone][0] is False and "no object" in checked[gone][1]
    assert checked[other][0] is False and "recorded" in checked[other][1]
    assert found.fetch_from == url
    assert {m for m, _, _ in s3.faults.log} >= {"GET"}  # the bytes were read, not a HEAD


def test_cli_add_locate_and_fetch_with_json_progress(cli, s3: S3, tmp_path: Path) -> None:
    from tests.helpers import write_gguf

    gguf = write_gguf(tmp_path / "tiny.gguf", {"token_embd.weight": (64, 4096)})
    url = _upload(s3, "tiny", {"tiny.gguf": gguf.read_bytes()})
    code, out, err = cli(
        "add",
        gguf,
        "--model-id",
        "tiny/one",
        "--source",
        "pypi://tiny==1",
        "--license",
        "mit",
        "--location",
        url,
    )
    assert code == 0, err
    record = out.strip().splitlines()[-1].split()[0]
    gguf.unlink()  # only the S3 copy is left
    code, out, _ = cli("locate", record)
    assert code == 0 and f"{url}  never checked\n" in out
    code, out, err = cli("fetch", record, "--to", tmp_path / "out", "--json", "--progress", "json")
    assert code == 0, err
    result = json.loads(out)
    assert [(f["path"], f["source"]) for f in result["files"]] == [("tiny.gguf", url)]
    events = [json.loads(line) for line in err.splitlines()]
    assert all(isinstance(e.pop("at_s"), float) for e in events)
    assert events[0] == {
        "event": "start",
        "record_id": result["record_id"],
        "files": 1,
        "bytes": result["files"][0]["bytes"],
    }
    assert events[-1]["event"] == "done" and events[-1]["bytes"] == result["files"][0]["bytes"]
    assert all(e["event"] == "progress" for e in events[1:-1])
    # What the fetch read is recorded for everyone: the S3 copy verified, the file gone.
    code, out, _ = cli("locate", record)
    lines = out.splitlines()
    assert "NOT THERE" in lines[0] and lines[1].startswith(f"{url}  verified by fetch on ")


def test_fetch_destinations_that_cannot_be_filled_are_exit_2(
    cli, registry: Registry, s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"m.gguf": b"w" * 100}
    record = record_of_files(registry, files)
    registry.locate(record, [_upload(s3, "d", files)], check_added=False)
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    code, out, err = cli("fetch", record, "--to", a_file)
    assert code == 2 and out == "" and err.count("\n") == 1 and "is not an empty directory" in err
    assert a_file.read_text() == "mine"
    code, _, err = cli("fetch", record, "--to", a_file / "below")
    assert code == 2 and err.count("\n") == 1 and "cannot create" in err
    code, _, err = cli("locate", record, "--add", "s3://Not_A_Bucket/x")
    assert code == 2 and "not an S3 bucket and prefix" in err
    assert not any(m == "GET" for m, _, _ in s3.faults.log)  # nothing was downloaded


def test_no_credentials_is_a_reason_not_a_crash(
    registry: Registry, s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelreg import s3 as s3_module

    files = {"m.gguf": b"w" * 100}
    record = record_of_files(registry, files)
    registry.locate(record, [_upload(s3, "c", files)], check_added=False)
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    s3_module.reset()
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    assert "no AWS credentials on this host" in caught.value.message
    assert "testing" not in caught.value.message
    assert _leftovers(tmp_path) == []
    with pytest.raises(InvalidInput):
        registry.locate(record, ["s3://x/"], check_added=False)  # a bucket name of one character
