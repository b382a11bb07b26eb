"""The issue's reproductions of remote bytes that cost memory, each run as a fetch in a child
process under a 1 GiB address-space limit (``RLIMIT_AS``) against the hostile server: an 800 MB
OCI manifest, an endless OCI blob for a 98,362,432-byte file, and an S3 range answered 100 MB
longer than asked. Each is refused with what it did ("longer than"), and the child's peak
resident memory stays flat — a few tens of MiB above what importing the clients costs — where
main read 1.64 GB, 600 MB and 925 MB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile.server import (
    ENDLESS,
    MIB,
    Answer,
    HostileServer,
    Pattern,
    digest_of,
    oci_manifest_for,
    s3_object,
)

pytest.importorskip("httpx")
pytest.importorskip("boto3")

ROOT = Path(__file__).resolve().parents[1]
FILE_BYTES = 98_362_432
LIMIT = 1 << 30

CHILD = """
import json, resource, sys
limit = int(sys.argv[5])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pathlib import Path
import boto3, httpx  # what the clients cost, before the fetch
from modelreg.errors import NotFetchable
from modelreg.locations import WantedFile, fetch_files
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
url, size, sha, to = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
try:
    fetch_files([WantedFile("model.gguf", size, sha)], [url], to)
    said = "fetched"
except NotFetchable as exc:
    said = exc.message
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"said": said, "base_kib": base, "peak_kib": peak}))
"""


def _fetch_in_child(url: str, size: int, sha: str, to: Path, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(size), sha, str(to), str(LIMIT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict = json.loads(done.stdout.strip().splitlines()[-1])
    assert not to.exists()
    return found


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


def _grew_mib(found: dict) -> float:
    return (found["peak_kib"] - found["base_kib"]) / 1024


def test_an_800_mb_manifest_costs_its_cap(hostile: HostileServer, tmp_path: Path) -> None:
    digest = "sha256:" + "5" * 64
    path = f"/v2/models/big/manifests/{digest}"
    hostile.route("GET", path, Answer(200, Pattern(800 * 1000 * 1000), length=None))
    found = _fetch_in_child(
        f"oci://{hostile.address}/models/big@{digest}", 10, "a" * 64, tmp_path / "out", {}
    )
    assert "is longer than 4,194,304 bytes; refused" in found["said"], found
    assert _grew_mib(found) < 64, found
    assert hostile.sent[path] < 64 * MIB


def test_an_endless_blob_is_cut_at_the_files_size(hostile: HostileServer, tmp_path: Path) -> None:
    sha = "b" * 64
    manifest = oci_manifest_for({"model.gguf": (FILE_BYTES, sha)})
    digest = digest_of(manifest)
    hostile.route("GET", f"/v2/models/big/manifests/{digest}", Answer(200, manifest))
    blob = f"/v2/models/big/blobs/sha256:{sha}"
    hostile.route("GET", blob, Answer(200, ENDLESS, length=None))
    found = _fetch_in_child(
        f"oci://{hostile.address}/models/big@{digest}", FILE_BYTES, sha, tmp_path / "out", {}
    )
    assert "sent more than the 98,362,432 bytes recorded (longer than the blob)" in found["said"]
    assert _grew_mib(found) < 64, found
    # What left the server: the file's size, and what the sockets' buffers held.
    assert hostile.sent[blob] < FILE_BYTES + 32 * MIB


def test_an_s3_range_100_mb_too_long_costs_one_range(
    hostile: HostileServer, tmp_path: Path
) -> None:
    data = Pattern(FILE_BYTES)
    key = "/models/m/model.gguf"
    hostile.route("HEAD", key, s3_object(data))
    hostile.route("GET", key, s3_object(data, longer_by=100 * 1000 * 1000, declared=False))
    env = {
        "AWS_ENDPOINT_URL": hostile.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    found = _fetch_in_child("s3://models/m/", FILE_BYTES, "c" * 64, tmp_path / "out", env)
    assert "is longer than the 8,388,608 asked; refused at byte" in found["said"], found
    assert "short read" not in found["said"]
    assert _grew_mib(found) < 128, found
