from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from modelreg.errors import InvalidArtifact
from modelreg.manifests.digest import CHUNK_BYTES, sha256_file, sha256_files


def test_digest_matches_hashlib_across_chunk_boundaries(tmp_path: Path) -> None:
    data = bytes(range(256)) * ((CHUNK_BYTES * 2 + 1000) // 256)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_files_are_hashed_in_order_and_progress_counts_every_byte(tmp_path: Path) -> None:
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}"
        p.write_bytes(bytes([i]) * (100_000 * (i + 1)))
        paths.append(p)
    seen = []
    lock = threading.Lock()

    def progress(n: int) -> None:
        with lock:
            seen.append(n)

    digests = sha256_files(paths, progress)
    assert digests == [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert sum(seen) == sum(p.stat().st_size for p in paths)


def test_missing_file_is_an_artifact_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidArtifact, match="file not found"):
        sha256_file(tmp_path / "nope")
