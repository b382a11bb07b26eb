"""A private staging view of exactly a record's files, so that the digest check and the
runtime check see the same bytes, and nothing the record does not list.

``stage(files)`` makes a fresh private directory (mode 0700) holding one entry per recorded
file, under its recorded name:

- a **private copy** of a small file (config, tokenizer, chat template: its content is then
  frozen for the whole run);
- a **symbolic link** to a large one (weights are not copied).

The identity of every staged entry's bytes — device, inode, size, mtime and ctime, read
through the link — is taken when it is staged, and ``changes()`` compares it after the checks
ran. Replacing the original path shows as another inode; writing into the file in place
changes its mtime and ctime, and an unprivileged writer cannot set a ctime back. So a file
changed at any moment during verify — before it was hashed, while the runtime read it, or
between the two — is caught, and verify fails rather than pass on either version. (Links
leave the original inode alone: a concurrent verify of the same files does not disturb this
one.)

Only recorded files are staged: a weight file under a name the loader prefers, or Python code
a loader would import, that sits beside the record's files is never seen by the runtime, and
``manifests.hf.unrecorded_runtime_files`` names it so verify can fail on it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Files smaller than this are copied into the staging directory (their content is then
# frozen); larger ones are linked.
COPY_BELOW_BYTES = 64 << 20


@dataclass(frozen=True)
class _Identity:
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> _Identity:
        st = path.stat()
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class StagedView:
    """The staging directory and, per recorded path, the staged file and how it was staged."""

    directory: Path
    files: dict[str, Path]
    how: dict[str, str]  # "copy" or "symbolic link"
    identities: dict[str, _Identity]
    missing: dict[str, str]  # recorded path -> why it is not staged

    def changes(self) -> list[str]:
        """Recorded paths whose staged bytes may have changed since staging, with what moved."""
        changed = []
        for name, before in self.identities.items():
            try:
                after = _Identity.of(self.files[name])
            except OSError as exc:
                changed.append(f"{name}: vanished during verify ({exc.strerror})")
                continue
            if after != before:
                what = [
                    field
                    for field in ("inode", "size", "mtime_ns", "ctime_ns")
                    if getattr(before, field) != getattr(after, field)
                ]
                changed.append(f"{name}: changed during verify ({', '.join(what)})")
        return changed


def _stage_one(source: Path, target: Path, size: int) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    if size < COPY_BELOW_BYTES:
        shutil.copyfile(source, target)
        return "copy"
    target.symlink_to(source.resolve())
    return "symbolic link"


@contextlib.contextmanager
def stage(files: dict[str, Path]) -> Iterator[StagedView]:
    """Stage ``files`` (recorded path -> where it is on this host); removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="modelreg-stage-"))
    view = StagedView(directory, {}, {}, {}, {})
    try:
        for name, source in files.items():
            target = directory / name
            try:
                if not source.is_file():
                    view.missing[name] = f"missing at {source}"
                    continue
                view.how[name] = _stage_one(source, target, source.stat().st_size)
            except OSError as exc:
                view.missing[name] = f"cannot be staged from {source}: {exc.strerror}"
                continue
            view.files[name] = target
            view.identities[name] = _Identity.of(target)
        yield view
    finally:
        shutil.rmtree(directory, ignore_errors=True)
