"""Identity binding: is the model a server answers with the record's model?

A server's answers are only evidence for the record if the server serves the record's bytes.
What the server says about its model is read from ``/props`` (llama-server, ik_llama.cpp:
``model_path``), ``/v1/models`` (ids; llama-server's ``meta.size``) and the ``model`` field of
its answers:

1. A named model **file readable here**: its sha256 must be the sha256 of a file of the record.
   The file verify handed to the runtime (the same file, by device and inode) is bound by the
   digest check of the same run, and not hashed twice.
2. Otherwise **name and size**: a name (a file's base name, or the record's model id) and a
   size (a file's bytes, or llama-server's tensor bytes) must both match the record.
3. Anything less is ``unconfirmed``: the run says so, and it blocks unless the target sets
   ``require_identity: false``. A named file with other bytes or a reported size that fits no
   file of the record is a ``mismatch``, which always fails, naming both sides.

That is all a **remote** server can be judged by: its own report (``as_remote`` says so in the
verdict). A server on **this host** (a loopback endpoint, or a runtime verify launched) is
judged by the kernel instead (``bind_process``): the process listening on its port — and for a
launch, only a process verify started — or a process it started must have every weights file
of the record open or mapped, compared by device and inode with the file the digest check
hashed (or, for a file the staging copied, by the sha256 of the bytes the process has open).
What the server says about itself then decides only a ``mismatch``; it never confirms
(``on_this_host``): a fake server can name the record's path, it cannot map the file without
opening it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from modelreg.errors import InvalidArtifact
from modelreg.manifests.digest import sha256_file
from modelreg.record import Record
from modelreg.schemas.manifest import FileEntry
from modelreg.validators import procfs
from modelreg.validators.procfs import OpenFile, ProcUnreadable

WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth", ".neff", ".onnx")


@dataclass
class ServedModel:
    """What a server said about the model it serves."""

    model_ids: list[str] = field(default_factory=list)  # /v1/models
    answered_as: list[str] = field(default_factory=list)  # "model" of its completions
    model_path: str | None = None  # /props
    sizes: list[int] = field(default_factory=list)  # /v1/models meta.size (tensor bytes)
    n_params: list[int] = field(default_factory=list)

    def names(self) -> list[str]:
        """Every name it gave, the model path and what answered first."""
        ordered = [self.model_path] if self.model_path else []
        ordered += self.answered_as + self.model_ids
        return list(dict.fromkeys(n for n in ordered if n))


@dataclass(frozen=True)
class IdentityVerdict:
    status: Literal["confirmed", "mismatch", "unconfirmed"]
    message: str
    evidence: dict[str, Any]
    how: str = ""  # for a confirmed identity, in a few words: "by file sha256", …


def looks_like_file(name: str) -> bool:
    """Whether a served model name names a file (an absolute or relative path, or a weights
    file name) rather than an alias or a hub id."""
    return name.startswith(("/", "./", "../", "~")) or name.lower().endswith(WEIGHT_SUFFIXES)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _tensor_bytes(record: Record) -> int | None:
    quantization = record.manifest.quantization
    if quantization is None or not quantization.tensor_types:
        return None
    sizes = [stats.bytes for stats in quantization.tensor_types.values()]
    if any(size is None for size in sizes):
        return None
    return sum(size for size in sizes if size is not None)


def _short(sha: str | None) -> str:
    return f"sha256:{sha[:16]}…" if sha else "sha256 unknown"


def bind_identity(
    record: Record, files: dict[str, Path], served: ServedModel, *, remote: bool
) -> IdentityVerdict:
    """Decide whether ``served`` is the record's model (see the module docstring).

    ``files`` maps the record's manifest paths to where they are on this host (what the digest
    check hashes). ``remote``: the server is not on this host, so a path it names that happens
    to exist here is another machine's file and proves nothing.
    """
    entries = {f.path: f for f in record.manifest.files}
    record_files = ", ".join(f"{f.path} {_short(f.sha256)}" for f in entries.values())
    evidence: dict[str, Any] = {
        "served_names": served.names(),
        "served_sizes": served.sizes,
        "record_files": [
            {"path": f.path, "bytes": f.bytes, "sha256": f.sha256} for f in entries.values()
        ],
    }
    if served.n_params:
        evidence["served_n_params"] = served.n_params
    named_files = [n for n in served.names() if looks_like_file(n)]
    confirmed_by_file: list[str] = []
    for name in named_files if not remote else []:
        path = Path(name).expanduser()
        if not path.is_file() or not os.access(path, os.R_OK):
            continue
        handed = next((p for p, local in files.items() if _same_file(path, local)), None)
        if handed is not None:
            confirmed_by_file.append(
                f"the server names {name}, the record's file {handed} verify gave it "
                f"({_short(entries[handed].sha256)}, hashed by the digest check)"
            )
            evidence.setdefault("files", []).append({"named": name, "record_file": handed})
            continue
        try:
            sha = sha256_file(path)
        except InvalidArtifact:  # gone or unreadable since: it confirms nothing
            continue
        match = next((f for f in entries.values() if f.sha256 == sha), None)
        evidence.setdefault("files", []).append(
            {"named": name, "sha256": sha, "record_file": match.path if match else None}
        )
        if match is None:
            return IdentityVerdict(
                "mismatch",
                f"the server serves {name} (sha256:{sha}), which is not a file of record "
                f"{record.id} ({record_files})",
                evidence,
            )
        confirmed_by_file.append(f"the server names {name}, sha256 equal to {match.path}")
    if confirmed_by_file:
        how = "by the file it serves" if len(confirmed_by_file) == 1 else "by the files it serves"
        return IdentityVerdict("confirmed", "; ".join(confirmed_by_file), evidence, how)

    sizes = {f.bytes for f in entries.values() if f.bytes is not None}
    tensor_bytes = _tensor_bytes(record)
    if tensor_bytes is not None:
        sizes.add(tensor_bytes)
    size_match = [s for s in served.sizes if s in sizes]
    wrong_size = [s for s in served.sizes if s not in sizes]
    if wrong_size and not size_match:
        return IdentityVerdict(
            "mismatch",
            f"the server's model ({', '.join(served.names()) or 'unnamed'}) is {wrong_size[0]} "
            f"bytes; record {record.id} has {sorted(sizes)} ({record_files})",
            evidence,
        )
    basenames = {PurePosixPath(p).name for p in entries}
    name_match = [
        n
        for n in served.names()
        if PurePosixPath(n).name in basenames or n.casefold() == record.model_id.casefold()
    ]
    if name_match and size_match:
        return IdentityVerdict(
            "confirmed",
            f"name {name_match[0]!r} and size {size_match[0]} bytes match record {record.id}",
            evidence,
            "by name and size",
        )
    seen = ", ".join(repr(n) for n in served.names()) or "no model name"
    missing = []
    if not name_match:
        missing.append(
            f"no name it gives is a file name of the record or its model id {record.model_id!r}"
        )
    if not size_match:
        missing.append("it reports no size" if not served.sizes else "no size matches")
    where = (
        " (readable files it names are not looked at: the server is remote)"
        if (remote and named_files)
        else ""
    )
    return IdentityVerdict(
        "unconfirmed",
        f"cannot tell whether the server serves record {record.id}: it says {seen}; "
        + "; ".join(missing)
        + where,
        evidence,
    )


def model_ids(document: Any) -> tuple[list[str], list[int], list[int]]:
    """(ids, meta sizes, meta n_params) from a ``/v1/models`` answer."""
    ids: list[str] = []
    sizes: list[int] = []
    params: list[int] = []
    data = document.get("data") if isinstance(document, dict) else None
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("id"), str):
            ids.append(item["id"][:1000])
        meta = item.get("meta")
        if isinstance(meta, dict):
            size, n_params = meta.get("size"), meta.get("n_params")
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                sizes.append(size)
            if isinstance(n_params, int) and not isinstance(n_params, bool) and n_params > 0:
                params.append(n_params)
    return ids, sizes, params


def first_strings(values: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(v[:1000] for v in values if isinstance(v, str) and v))


# -- a server on this host: what the kernel says ------------------------------------------


@dataclass(frozen=True)
class ProcessBinding:
    """What ``/proc`` says about the process serving a port on this host."""

    confirmed: bool
    message: str  # how it was confirmed, or why it could not be
    evidence: dict[str, Any]


# Said when the serving process has none of the record's files: the usual innocent reason.
NO_MMAP_HINT = (
    "a runtime that reads the weights into memory and closes the file (--no-mmap) cannot be "
    "confirmed this way"
)


def required_files(record: Record) -> list[FileEntry]:
    """The files the serving process must have open or mapped: the record's weights (all of
    them: every shard), else every file of the record."""
    weights = [f for f in record.manifest.files if f.role == "weights"]
    return weights or list(record.manifest.files)


def _identity_of(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()  # through the staging's symbolic link, to the file itself
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _program(pid: int) -> str | None:
    """The base name of ``pid``'s program (argv[0]), None when it cannot be read."""
    argv = procfs.command_line(pid)
    return PurePosixPath(argv[0]).name if argv else None


def _name(pid: int) -> str:
    program = _program(pid)
    return f"pid {pid} ({program})" if program else f"pid {pid}"


@dataclass
class _Matcher:
    """Finds a record file among the files a process has open or mapped."""

    files: dict[str, Path]  # manifest path -> the file the digest check hashes
    hashed: dict[frozenset[tuple[int, int]], str | None] = field(default_factory=dict)

    def find(self, entry: FileEntry, found: list[OpenFile]) -> tuple[OpenFile, str] | None:
        """The open or mapped file that is ``entry`` and how that was told: the same device
        and inode as the file the digest check hashed, else (a file the staging copied, or a
        copy the server was given) a file of the same size whose bytes hash to its sha256."""
        local = self.files.get(entry.path)
        identity = _identity_of(local) if local is not None else None
        for candidate in found:
            if identity is not None and identity in candidate.identities:
                return candidate, "device and inode"
        for candidate in found:
            same_size = entry.bytes == candidate.size and candidate.read_via is not None
            if entry.sha256 and same_size and self._sha256(candidate) == entry.sha256:
                return candidate, "sha256"
        return None

    def _sha256(self, candidate: OpenFile) -> str | None:
        if candidate.identities not in self.hashed:
            try:
                assert candidate.read_via is not None
                self.hashed[candidate.identities] = sha256_file(Path(candidate.read_via))
            except (InvalidArtifact, OSError):
                self.hashed[candidate.identities] = None
        return self.hashed[candidate.identities]


def _listening_pids(
    host: str, port: int, evidence: dict[str, Any]
) -> tuple[dict[int, set[int]], str | None]:
    """(pid -> listening socket inodes it holds, why that is not the whole answer)."""
    where = f"{host}:{port}"
    listeners = [s for s in procfs.listening_sockets(port) if procfs.reaches(s.address, host)]
    evidence["listeners"] = [{"address": str(s.address), "inode": s.inode} for s in listeners]
    if not listeners:
        return {}, (
            f"no socket listens on {where} in this host's network namespace (a server in a "
            "container or behind a port forward cannot be checked from here)"
        )
    holders, unreadable = procfs.socket_holders({s.inode for s in listeners})
    held = set().union(*holders.values()) if holders else set()
    orphans = sorted(s.inode for s in listeners if s.inode not in held)
    if orphans:
        why = (
            f"held by no process verify can read ({len(unreadable)} processes' /proc/PID/fd "
            f"unreadable, e.g. {next(iter(unreadable.values()))}): run verify as the server's "
            "user or as root"
            if unreadable
            else "held by no process"
        )
        return holders, f"the socket listening on {where} (inode {orphans[0]}) is {why}"
    return holders, None


def _check_listener(
    pid: int, where: str, record: Record, matcher: _Matcher
) -> tuple[bool, str, dict[str, Any]]:
    """(confirmed, how or why not, evidence) for one listening process: it, or a process it
    started, must have every required file of the record open or mapped."""
    tree = [pid, *procfs.descendants(pid)]
    seen = procfs.open_files(tree)
    # Its program only: the rest of another's command line may hold a secret (--api_key).
    evidence: dict[str, Any] = {"pid": pid, "program": _program(pid)}
    if len(tree) > 1:
        evidence["descendants"] = tree[1:]
    if seen.unreadable:
        evidence["unreadable"] = seen.unreadable
    if pid in seen.unreadable:
        return False, seen.unreadable[pid], evidence
    matched, missing = [], []
    for entry in required_files(record):
        hit = matcher.find(entry, seen.files)
        if hit is None:
            missing.append(entry.path)
            continue
        found, by = hit
        owner = "" if found.pid == pid else f" (through pid {found.pid}, which it started)"
        matched.append(f"{entry.path} {found.how}{owner}")
        evidence.setdefault("record_files", []).append(
            {"path": entry.path, "pid": found.pid, "how": found.how, "as": found.path, "by": by}
        )
    listener = f"{_name(pid)} listening on {where}"
    if not matched:
        weights = sorted({f.path for f in seen.files if f.path.lower().endswith(WEIGHT_SUFFIXES)})
        has = f"; it has {', '.join(weights[:5])}" if weights else f"; {NO_MMAP_HINT}"
        return False, f"{listener} has no file of record {record.id} open or mapped{has}", evidence
    if missing:
        return (
            False,
            f"{listener} has {', '.join(matched)} but not {', '.join(missing)} open or mapped",
            evidence,
        )
    return True, f"{listener} has {', '.join(matched)}", evidence


def bind_process(
    record: Record,
    files: dict[str, Path],
    host: str,
    port: int,
    launched: Collection[int] | None = None,
) -> ProcessBinding:
    """Whether the process serving ``host:port`` here has the record's files open or mapped.

    Every process holding a socket that listens on the port (and reaches ``host``) must have
    every weights file of the record open or mapped, itself or through a process it started.
    ``launched``: the pids of the runtime verify started; a listener outside them is not the
    runtime verify launched. ``files`` maps manifest paths to the files the digest check hashes.
    """
    where = f"{host}:{port}"
    evidence: dict[str, Any] = {"port": port}
    try:
        holders, problem = _listening_pids(host, port, evidence)
        if problem is not None:
            return ProcessBinding(False, problem, evidence)
        strangers = sorted(set(holders) - set(launched)) if launched is not None else []
        if strangers:
            return ProcessBinding(
                False,
                f"{_name(strangers[0])} listens on {where}, not a process of the runtime "
                "verify launched",
                evidence,
            )
        matcher = _Matcher(files)
        confirmed = []
        for pid in sorted(holders):
            ok, message, seen = _check_listener(pid, where, record, matcher)
            evidence.setdefault("processes", []).append(seen)
            if not ok:
                return ProcessBinding(False, message, evidence)
            confirmed.append(message)
    except ProcUnreadable as exc:
        return ProcessBinding(False, str(exc), evidence)
    return ProcessBinding(True, "; ".join(confirmed), evidence)


def on_this_host(claimed: IdentityVerdict, process: ProcessBinding) -> IdentityVerdict:
    """The identity of a server on this host: confirmed only by ``/proc``; what the server
    says about itself (``claimed``) can still make it a mismatch, never a confirmation."""
    evidence = claimed.evidence | {
        "basis": "/proc: the process serving the port",
        "claimed": {"status": claimed.status, "message": claimed.message},
        "process": process.evidence | {"confirmed": process.confirmed, "message": process.message},
    }
    if claimed.status == "mismatch":
        return IdentityVerdict("mismatch", claimed.message, evidence)
    if process.confirmed:
        return IdentityVerdict(
            "confirmed", process.message, evidence, f"by /proc: {process.message}"
        )
    if claimed.status == "confirmed":
        said = f" (the server's own report — {claimed.how} — is not proof on this host)"
    else:
        said = f"; by its own report: {claimed.message}"
    return IdentityVerdict(
        "unconfirmed", f"identity unconfirmed: {process.message}{said}", evidence
    )


def as_remote(claimed: IdentityVerdict) -> IdentityVerdict:
    """The identity of a remote server: its own report, and the verdict says so."""
    evidence = claimed.evidence | {
        "basis": "the server's own report (remote: its process cannot be checked from here)"
    }
    how = f"{claimed.how}, as the remote server reports it (its process is not checked)"
    return IdentityVerdict(claimed.status, claimed.message, evidence, how if claimed.how else "")
