"""Bytes written to a file as they are hashed and counted: the one loop under every copy and
download a fetch makes (a local copy, an S3 range, an OCI blob), so each reports progress and
syncs to disk the same way."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import BinaryIO


class HashedWriter:
    """Write chunks to ``fh``, each hashed (sha256) and counted as it goes, and reported to
    ``progress``; ``seed`` hashes bytes already in the file (a resumed download) without
    writing or reporting them. ``written`` counts every byte, seeded ones included, so a
    failure can say how far the file got."""

    def __init__(self, fh: BinaryIO, progress: Callable[[int], None] | None = None) -> None:
        self.fh = fh
        self.progress = progress
        self.digest = hashlib.sha256()
        self.written = 0

    def seed(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.written += len(chunk)

    def write(self, chunk: bytes) -> None:
        self.fh.write(chunk)
        self.digest.update(chunk)
        self.written += len(chunk)
        if self.progress:
            self.progress(len(chunk))

    def sync(self) -> None:
        """What is written so far is on disk (before a rename, or to resume after a failure)."""
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def finish(self) -> tuple[int, str]:
        """Sync, then (size, sha256) of everything the file holds."""
        self.sync()
        return self.written, self.digest.hexdigest()
