"""Streaming sha256 of artifact files: constant memory, files hashed in parallel threads.

``hashlib`` (OpenSSL) releases the GIL while hashing, so one thread per file keeps every core
busy; each thread reuses one fixed buffer, so memory does not grow with file size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from modelreg.errors import InvalidArtifact

CHUNK_BYTES = 4 << 20

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes just hashed (from several threads at once)."""


def sha256_file(path: Path, progress: ProgressCallback | None = None) -> str:
    """Hex sha256 of ``path``, read in fixed-size chunks into one reused buffer."""
    digest = hashlib.sha256()
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    try:
        with path.open("rb", buffering=0) as fh:
            while n := fh.readinto(buffer):
                digest.update(view[:n])
                if progress:
                    progress(n)
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    except IsADirectoryError:
        raise InvalidArtifact(path, "is a directory, expected a file") from None
    except OSError as exc:
        raise InvalidArtifact(path, f"cannot read: {exc.strerror}") from None
    return digest.hexdigest()


def sha256_files(
    paths: Sequence[Path], progress: ProgressCallback | None = None, workers: int | None = None
) -> list[str]:
    """sha256 of each path, in order, hashed concurrently."""
    if len(paths) <= 1:
        return [sha256_file(p, progress) for p in paths]
    workers = workers or min(len(paths), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
        return list(pool.map(lambda p: sha256_file(p, progress), paths))
