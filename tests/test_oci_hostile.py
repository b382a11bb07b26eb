"""OCI locations against a hostile registry (``tests.hostile``): a manifest or index document
is read to its cap and no further, a blob to its recorded size, every request within a total
deadline however slowly the bytes come — when a location is checked (``check_location``, what
``modelreg locations check`` records) and when it is fetched. The honest path is
``tests/test_oci.py`` (Debian's docker-registry)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelreg import oci
from modelreg.errors import NotFetchable
from modelreg.locations import LocationCheck, WantedFile, check_location, fetch_files
from tests.hostile.server import (
    ENDLESS,
    MIB,
    Answer,
    HostileServer,
    Pattern,
    digest_of,
    oci_manifest_for,
)

pytest.importorskip("httpx")

REPO = "models/tiny"


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


def _check(server: HostileServer, digest: str, scratch: Path) -> LocationCheck:
    """``check_location`` of a one-file record (10 bytes) at the artifact ``digest``: what it
    found is not a verified copy, and nothing of it is left in ``scratch``."""
    wanted = WantedFile("model.gguf", 10, "a" * 64)
    checked = check_location([wanted], f"oci://{server.address}/{REPO}@{digest}", scratch)
    assert checked.ok is not True
    assert not scratch.exists() or list(scratch.iterdir()) == []
    return checked


def _manifest_path(digest: str) -> str:
    return f"/v2/{REPO}/manifests/{digest}"


def _serve_artifact(server: HostileServer, blob: Pattern, answer: Answer) -> tuple[str, str]:
    """A true manifest naming ``blob`` as model.gguf, whose blob is answered by ``answer``:
    (location URL, blob path)."""
    sha = blob.sha256()
    manifest = oci_manifest_for({"model.gguf": (blob.size, sha)})
    digest = digest_of(manifest)
    server.route("GET", _manifest_path(digest), Answer(200, manifest))
    blob_path = f"/v2/{REPO}/blobs/sha256:{sha}"
    server.route("GET", blob_path, answer)
    return f"oci://{server.address}/{REPO}@{digest}", blob_path


def test_an_oversized_manifest_is_refused_at_the_cap(
    hostile: HostileServer, tmp_path: Path
) -> None:
    """An 800 MB "manifest" costs the client 4 MiB: it is refused at the byte that passes the
    cap, whether its length is declared or it just never stops."""
    digest = "sha256:" + "1" * 64
    for length in ("auto", None):
        hostile.route("GET", _manifest_path(digest), Answer(200, Pattern(800 * MIB), length=length))
        problem = _check(hostile, digest, tmp_path / "scratch").detail
        assert f"is longer than {oci.MANIFEST_MAX_BYTES:,} bytes" in problem
    # Declared: refused on the header, before a byte of the body is read; not declared: read to
    # the cap (what the server wrote is that plus the sockets' buffers, far from 800 MB).
    assert hostile.sent[_manifest_path(digest)] < 64 * MIB


def test_an_endless_manifest_is_refused_at_the_cap(hostile: HostileServer, tmp_path: Path) -> None:
    digest = "sha256:" + "2" * 64
    hostile.route("GET", _manifest_path(digest), Answer(200, ENDLESS, length=None))
    assert "longer than 4,194,304 bytes" in _check(hostile, digest, tmp_path / "s").detail


def test_a_manifest_that_lies_about_its_digest_or_is_an_index_is_refused(
    hostile: HostileServer, tmp_path: Path
) -> None:
    true = oci_manifest_for({"model.gguf": (10, "a" * 64)})
    claimed = "sha256:" + "3" * 64
    hostile.route("GET", _manifest_path(claimed), Answer(200, true))
    problem = _check(hostile, claimed, tmp_path / "s").detail
    assert problem == f"the manifest's bytes do not hash to {claimed}; refused"

    index = (
        b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}'
    )
    hostile.route("GET", _manifest_path(digest_of(index)), Answer(200, index))
    assert "is an index of manifests" in _check(hostile, digest_of(index), tmp_path / "s").detail


@pytest.mark.parametrize("headers_too", [False, True])
def test_a_dripping_registry_costs_one_deadline(
    hostile: HostileServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, headers_too: bool
) -> None:
    """One byte every 0.3 s never trips a per-read timeout; the request's total deadline ends
    it — in the body, or already in the headers."""
    monkeypatch.setattr(oci, "REQUEST_DEADLINE_S", 1.5)
    manifest = oci_manifest_for({"model.gguf": (10, "a" * 64)})
    digest = digest_of(manifest)
    hostile.route(
        "GET", _manifest_path(digest), Answer(200, manifest, drip_s=0.3, drip_headers=headers_too)
    )
    started = time.monotonic()
    problem = _check(hostile, digest, tmp_path / "s").detail
    took = time.monotonic() - started
    assert problem == f"the registry {hostile.address}: no complete answer within 1.5 s"
    assert 1.4 < took < 3.0


def _fetch(location: str, blob: Pattern, to: Path) -> NotFetchable:
    wanted = WantedFile("model.gguf", blob.size, blob.sha256())
    with pytest.raises(NotFetchable) as caught:
        fetch_files([wanted], [location], to)
    assert not to.exists()
    assert [p.name for p in to.parent.iterdir() if p.name.startswith(f".{to.name}")] == []
    return caught.value


def test_an_endless_blob_is_cut_at_its_recorded_size(
    hostile: HostileServer, tmp_path: Path
) -> None:
    blob = Pattern(3 * MIB + 7)
    location, path = _serve_artifact(hostile, blob, Answer(200, ENDLESS, length=None))
    refused = _fetch(location, blob, tmp_path / "out")
    assert (
        "longer than the blob" in refused.message and "refused at byte 3,145,735" in refused.message
    )
    assert "short read" not in refused.message
    assert hostile.sent[path] < blob.size + 32 * MIB


def test_a_blob_declared_longer_than_recorded_is_refused_before_its_body(
    hostile: HostileServer, tmp_path: Path
) -> None:
    blob = Pattern(2 * MIB)
    location, path = _serve_artifact(hostile, blob, Answer(200, Pattern(200 * MIB, b"other")))
    refused = _fetch(location, blob, tmp_path / "out")
    assert "declares 209,715,200 bytes, longer than the 2,097,152 recorded" in refused.message
    assert hostile.sent[path] < 32 * MIB


def test_a_blob_with_other_bytes_of_the_same_size_is_a_mismatch(
    hostile: HostileServer, tmp_path: Path
) -> None:
    blob = Pattern(MIB)
    location, _ = _serve_artifact(hostile, blob, Answer(200, Pattern(MIB, b"other")))
    assert "MISMATCH" in _fetch(location, blob, tmp_path / "out").message


def test_a_dripping_blob_is_ended_by_its_total_deadline(
    hostile: HostileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oci, "REQUEST_DEADLINE_S", 1.0)
    blob = Pattern(1000)
    location, _ = _serve_artifact(hostile, blob, Answer(200, blob, drip_s=0.25))
    started = time.monotonic()
    refused = _fetch(location, blob, tmp_path / "out")
    assert time.monotonic() - started < 3.0
    # 1 s and 1000 bytes at the 1 MiB/s floor: the deadline is a little over a second.
    assert "no complete answer within 1.00095 s" in refused.message


def test_a_token_realm_that_never_ends_is_read_to_its_cap(
    hostile: HostileServer, tmp_path: Path
) -> None:
    digest = "sha256:" + "4" * 64
    challenge = f'Bearer realm="{hostile.url}/token",service="registry"'
    hostile.route(
        "GET", _manifest_path(digest), Answer(401, b"{}", {"WWW-Authenticate": challenge})
    )
    hostile.route("GET", "/token", Answer(200, ENDLESS, length=None))
    problem = _check(hostile, digest, tmp_path / "s").detail
    assert f"longer than {oci.ANSWER_MAX_BYTES:,} bytes" in problem
    assert hostile.sent["/token"] < 32 * MIB
