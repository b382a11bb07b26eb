"""Reading a file that came from outside, with a size limit enforced while reading."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from modelreg.errors import InvalidArtifact


def read_bounded(path: Path, *, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    The limit is enforced while reading, so a file that grows meanwhile cannot exhaust memory,
    and a FIFO or device is refused before any read can block. Anything else (missing, a
    directory, unreadable, too large) is one ``InvalidArtifact`` line naming the file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InvalidArtifact(path, f"{what} not found") from None
    except OSError as exc:
        raise InvalidArtifact(path, f"cannot open the {what}: {exc.strerror}") from None
    except ValueError:  # a NUL byte in the path: no file can have that name
        raise InvalidArtifact(repr(str(path)), f"is not a {what} path") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InvalidArtifact(path, f"is a directory, expected a {what}")
        if not stat.S_ISREG(mode):
            raise InvalidArtifact(path, f"is not a regular file, expected a {what}")
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    except OSError as exc:
        raise InvalidArtifact(path, f"cannot read the {what}: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InvalidArtifact(path, f"{what} larger than {max_bytes} bytes")
    return data
