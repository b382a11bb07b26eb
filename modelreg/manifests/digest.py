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

# 1 MiB: large enough for hashlib to run without the GIL, small enough that the second digest
# of a chunk reads it from cache, not memory.
CHUNK_BYTES = 1 << 20

ProgressCallback = Callable[[int], None]
"""Called with the number of bytes just hashed (from several threads at once)."""


def sha256_file(path: Path, progress: ProgressCallback | None = None) -> str:
    """Hex sha256 of ``path``, read in fixed-size chunks into one reused buffer."""
    return _hash(path, progress, None)[0]


def sha256_file_and_region(
    path: Path, region_start: int, progress: ProgressCallback | None = None
) -> tuple[str, str]:
    """sha256 of the whole file and of its bytes from ``region_start`` on, in one read.

    For GGUF the region is the tensor data: equal region digests with different file digests
    mean a metadata-only edit.
    """
    whole, region = _hash(path, progress, region_start)
    assert region is not None
    return whole, region


def _hash(
    path: Path, progress: ProgressCallback | None, region_start: int | None
) -> tuple[str, str | None]:
    """Read ``path`` once; hash all of it, and (when ``region_start`` is given) also the part
    from ``region_start`` on. The second digest runs on another core over the same chunk
    while this thread hashes it whole (hashlib releases the GIL); chunks are small enough to
    stay in cache for the second pass, so two digests cost little more than one."""
    digest = hashlib.sha256()
    region = hashlib.sha256() if region_start is not None else None
    buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)
    position = 0
    helper = ThreadPoolExecutor(max_workers=1) if region is not None else None
    try:
        with path.open("rb", buffering=0) as fh:
            while n := fh.readinto(buffer):
                pending = None
                if region is not None and region_start is not None:
                    skip = min(max(region_start - position, 0), n)
                    if skip < n:
                        assert helper is not None
                        pending = helper.submit(region.update, view[skip:n])
                digest.update(view[:n])
                if pending is not None:
                    pending.result()  # the buffer is reused: both hashes finish first
                position += n
                if progress:
                    progress(n)
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    except IsADirectoryError:
        raise InvalidArtifact(path, "is a directory, expected a file") from None
    except OSError as exc:
        raise InvalidArtifact(path, f"cannot read: {exc.strerror}") from None
    finally:
        if helper is not None:
            helper.shutdown()
    return digest.hexdigest(), region.hexdigest() if region is not None else None


def sha256_files(
    paths: Sequence[Path], progress: ProgressCallback | None = None, workers: int | None = None
) -> list[str]:
    """sha256 of each path, in order, hashed concurrently."""
    if len(paths) <= 1:
        return [sha256_file(p, progress) for p in paths]
    workers = workers or min(len(paths), os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sha256") as pool:
        return list(pool.map(lambda p: sha256_file(p, progress), paths))


def sha256_files_and_regions(
    paths: Sequence[Path],
    region_starts: Sequence[int],
    progress: ProgressCallback | None = None,
) -> list[tuple[str, str]]:
    """``sha256_file_and_region`` for each path, hashed concurrently."""
    pairs = list(zip(paths, region_starts, strict=True))
    if len(pairs) <= 1:
        return [sha256_file_and_region(p, s, progress) for p, s in pairs]
    with ThreadPoolExecutor(max_workers=min(len(pairs), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda ps: sha256_file_and_region(ps[0], ps[1], progress), pairs))
