"""The directory a fetch fills: its own, fresh and private, renamed into place only once every
file matched — so nothing planted beside the destination can end up in a "verified" copy.

A fetch used to fill ``.<to>.fetch-<hash of the files>`` beside ``to``, made with
``exist_ok``: a name anyone could compute, so a directory planted there (with an extra file)
was renamed into place with the fetched files, and a symlink planted there made ``to`` a
symlink to the planter's directory. Now:

- ``fresh`` makes a new directory with ``tempfile.mkdtemp`` (an unpredictable name, created
  with ``O_EXCL`` semantics, mode 0700): nothing that existed before is used.
- ``place`` renames it to ``to`` with ``rename(2)``, which never follows a symlink at ``to``
  and refuses a non-empty directory there: a destination planted meanwhile changes nothing.
- An interrupted S3 download keeps its staging directory (its name starts with
  ``.<to>.fetch-<hash of the files>-``). The next fetch of the same files into the same place
  ``adopt``\\ s what it holds into its own fresh directory — only from a directory that is
  not a symlink, owned by this user and closed to everyone else (so only this user can have
  written it), and only regular files of at most the recorded size at the recorded paths,
  each reached without following a symlink. The kept bytes are hashed again from disk with
  the rest (``s3.download`` seeds the hash with them), so whatever they are, a file is kept
  only if the whole of it has the recorded sha256.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def resume_prefix(to: Path, files: Sequence[tuple[str, str]]) -> str:
    """The name every staging directory of a fetch of these (path, sha256) into ``to``
    starts with."""
    wanted = hashlib.sha256("\n".join(f"{path}\0{sha}" for path, sha in files).encode())
    return f".{to.name}.fetch-{wanted.hexdigest()[:12]}-"


def fresh(to: Path, prefix: str) -> Path:
    """A new private directory beside ``to`` (mode 0700, a name nobody could have taken)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=to.parent))


def adopt(to: Path, prefix: str, staging: Path, paths: dict[str, int]) -> list[str]:
    """Move the kept bytes of an earlier fetch (path -> recorded size) from its staging
    directories beside ``to`` into ``staging``; remove those directories. Returns the paths
    adopted. Anything not provably this user's own is left where it is, unread."""
    adopted: list[str] = []
    for kept in _kept(to.parent, prefix, staging.name):
        with _opened(to.parent, kept) as root:
            if root is None:
                continue  # not this user's alone: neither read nor removed
            for path, size in paths.items():
                if path not in adopted and _move(root, path, size, staging):
                    adopted.append(path)
        shutil.rmtree(to.parent / kept, ignore_errors=True)  # rmtree never follows a symlink
    return adopted


def place(staging: Path, to: Path, mode: int) -> None:
    """Give ``staging`` ``mode`` and rename it to ``to`` (which must not exist, or be an empty
    directory). ``FileExistsError`` when something else is at ``to`` now."""
    os.chmod(staging, mode)
    try:
        os.rename(staging, to)  # never follows a symlink at ``to``; replaces only an empty dir
    except OSError as exc:
        raise FileExistsError(
            f"{to} appeared while the files were fetched: {exc.strerror}"
        ) from None


def _kept(parent: Path, prefix: str, mine: str) -> list[str]:
    try:
        return sorted(
            entry.name
            for entry in os.scandir(parent)
            if entry.name.startswith(prefix) and entry.name != mine
        )
    except OSError:
        return []


@contextlib.contextmanager
def _opened(parent: Path, name: str) -> Iterator[int | None]:
    """A descriptor of ``parent/name`` when it is a real directory of this user's that no one
    else may write (else None)."""
    try:
        fd = os.open(parent / name, _DIRECTORY)
    except OSError:
        yield None
        return
    try:
        found = os.fstat(fd)
        own = found.st_uid == os.geteuid() and not found.st_mode & 0o077
        yield fd if own else None
    finally:
        os.close(fd)


def _move(root: int, path: str, size: int, staging: Path) -> bool:
    """Rename ``root/path`` into ``staging/path`` when it is a regular file of this user's of
    at most ``size`` bytes, reached without following a symlink."""
    *directories, name = path.split("/")
    opened: list[int] = []
    try:
        at = root
        for directory in directories:
            at = os.open(directory, _DIRECTORY, dir_fd=at)
            opened.append(at)
        found = os.stat(name, dir_fd=at, follow_symlinks=False)
        if (
            not stat.S_ISREG(found.st_mode)
            or found.st_uid != os.geteuid()
            or found.st_nlink != 1
            or found.st_size > size
        ):
            return False
        destination = staging / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.rename(name, destination, src_dir_fd=at)
        return True
    except OSError:
        return False
    finally:
        for fd in opened:
            os.close(fd)
