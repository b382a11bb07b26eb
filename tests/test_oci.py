"""OCI locations against Debian's ``docker-registry`` (the CNCF distribution server) started on
loopback: a record pushed as an OCI artifact whose layer digests are its files' sha256, located
by the manifest's digest, fetched back with every sha256 checked — and a blob changed on the
registry's disk is refused."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelreg import Registry
from modelreg.errors import InvalidInput, NotFetchable
from modelreg.locations import file_url
from tests.helpers import record_of_files

REGISTRY_BINARY = shutil.which("docker-registry")
pytestmark = pytest.mark.skipif(
    REGISTRY_BINARY is None, reason="docker-registry is not installed (.ci/run installs it)"
)
FILES = {"model.gguf": b"weights " * 40_000, "tokenizer/tokenizer.json": b'{"model": {}}'}


@pytest.fixture(scope="module")
def oci_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(host:port, storage root) of a registry on loopback, for this module."""
    root = tmp_path_factory.mktemp("oci-registry")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}, delete: {{enabled: true}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
        "log: {level: error}\n"
    )
    assert REGISTRY_BINARY is not None
    process = subprocess.Popen(
        [REGISTRY_BINARY, "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("docker-registry did not start")
        time.sleep(0.1)
    yield f"127.0.0.1:{port}", root / "data"
    process.terminate()
    process.wait(10)


def _record_here(registry: Registry, tmp_path: Path, files: dict[str, bytes] = FILES) -> str:
    record = record_of_files(registry, files)
    for name, data in files.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
    registry.locate(record, [file_url(tmp_path / "src")])
    return record


def test_push_then_fetch_by_digest(
    registry: Registry, oci_registry: tuple[str, Path], tmp_path: Path
) -> None:
    host, _ = oci_registry
    record = _record_here(registry, tmp_path)
    pushed = registry.push(record, f"oci://{host}/models/tiny:v1")
    digest = pushed.manifest_digest
    assert pushed.location == f"oci://{host}/models/tiny:v1@{digest}"
    assert [f.uploaded for f in pushed.files] == [True, True]
    assert pushed.location in [loc.url for loc in registry.locations(record).locations]

    # The registry's own addressing agrees: the tag resolves to this digest, and each layer is
    # the file's sha256 with its path as the title.
    answer = httpx.get(
        f"http://{host}/v2/models/tiny/manifests/v1",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    assert answer.headers["docker-content-digest"] == digest
    layers = {
        layer["annotations"]["org.opencontainers.image.title"]: layer["digest"]
        for layer in json.loads(answer.content)["layers"]
    }
    assert layers == {n: "sha256:" + hashlib.sha256(d).hexdigest() for n, d in FILES.items()}

    shutil.rmtree(tmp_path / "src")  # only the registry has the bytes now
    fetched = registry.fetch(record, tmp_path / "out")
    assert {f.source for f in fetched.files} == {pushed.location}
    for name, data in FILES.items():
        assert (tmp_path / "out" / name).read_bytes() == data

    # Pushing again uploads nothing the registry has; the location is already known.
    (tmp_path / "src").mkdir()
    for name, data in FILES.items():
        (tmp_path / "src" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / name).write_bytes(data)
    time.sleep(1.1)  # a later push (its clock's second has changed) is the same manifest
    again = registry.push(record, f"oci://{host}/models/tiny:v1")
    assert again.manifest_digest == digest and not any(f.uploaded for f in again.files)


def test_a_blob_changed_on_the_registrys_disk_is_refused(
    registry: Registry, oci_registry: tuple[str, Path], tmp_path: Path
) -> None:
    host, storage = oci_registry
    files = {"weights.gguf": b"A" * 100_000}
    record = _record_here(registry, tmp_path, files)
    pushed = registry.push(record, f"oci://{host}/models/changed:v1")
    shutil.rmtree(tmp_path / "src")
    sha = hashlib.sha256(files["weights.gguf"]).hexdigest()
    blob = storage / "docker/registry/v2/blobs/sha256" / sha[:2] / sha / "data"
    blob.write_bytes(b"B" * 100_000)  # same size: only the digest can tell
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    assert f"{pushed.location}: weights.gguf: MISMATCH" in caught.value.message
    assert [p.name for p in tmp_path.iterdir() if "out" in p.name] == []


def test_an_unknown_digest_is_not_a_copy(
    registry: Registry, oci_registry: tuple[str, Path], tmp_path: Path
) -> None:
    host, _ = oci_registry
    record = _record_here(registry, tmp_path)
    shutil.rmtree(tmp_path / "src")
    nowhere = f"oci://{host}/models/none@sha256:{'0' * 64}"
    registry.locate(record, [nowhere])
    with pytest.raises(NotFetchable) as caught:
        registry.fetch(record, tmp_path / "out")
    assert f"{nowhere}: no manifest sha256:{'0' * 64}" in caught.value.message


def test_push_bad_input_is_exit_2(
    cli, registry: Registry, oci_registry: tuple[str, Path], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    host, _ = oci_registry
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    record = _record_here(registry, tmp_path)
    for bad in ("oci://Upper/Case:v1", "s3://bucket/x", f"oci://{host}/models/x@sha256:abc"):
        code, out, err = cli("push", record, bad)
        assert code == 2 and out == "" and err.count("\n") == 1, (bad, err)
    shutil.rmtree(tmp_path / "src")
    code, _, err = cli("push", record, f"oci://{host}/models/gone:v1")
    assert code == 1 and "no copy of its files on this host" in err
    with pytest.raises(InvalidInput):
        registry.push(record, "oci://registry/only-a-repo@sha256:" + "1" * 64)
