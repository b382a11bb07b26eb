"""Where a record's bytes can be fetched, and fetching them with every sha256 checked.

A location is a URL naming a copy of a record's files:

- ``file://HOST/absolute/dir`` — a directory (or, for a one-file record, the file) on HOST;
  the path is percent-encoded like any URL path. ``add`` records its own host's path.
- ``hf://org/name@<40-hex commit>`` — a pinned Hugging Face revision.
- ``s3://bucket/prefix`` — an S3 prefix holding the files.
- ``oci://registry/repository[:tag]@sha256:<64 hex>`` — an OCI artifact, by digest.

Locations never carry credentials: user:password@, and query strings (presigned URLs carry
their signature there), are refused. ``fetch`` reads file locations on this host, the local
Hugging Face cache, S3 (``modelreg.s3``: the standard AWS credential chain) and OCI artifacts
by digest (``modelreg.oci``: Docker's credentials).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from modelreg import host
from modelreg.errors import InvalidInput, ModelregError, NotFetchable
from modelreg.steps import Step

MAX_URL_CHARS = 2000
SCHEMES = ("file", "hf", "s3", "oci")
FETCHABLE = SCHEMES
_CHUNK = 4 << 20
Progress = Callable[[int], None] | None

_HOSTNAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")
_HF_RE = re.compile(
    r"hf://(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)@(?P<commit>[0-9a-f]{40})"
)
_S3_RE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<key>[^\s]*))?")
_OCI_RE = re.compile(
    r"oci://(?P<registry>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)"
    r"/(?P<repository>[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
    r"@sha256:(?P<digest>[0-9a-f]{64})"
)
_FORMS = (
    "file://HOST/absolute/path, hf://org/name@<40-hex commit>, s3://bucket/prefix or "
    "oci://registry/repository@sha256:<64 hex>"
)


@dataclass(frozen=True)
class Location:
    """A parsed location URL. ``where``: the host (file), repo (hf), bucket (s3) or registry
    (oci); ``path``: the decoded path (file), commit (hf), key prefix (s3) or repository@digest
    (oci)."""

    url: str
    scheme: str
    where: str
    path: str


def _bad(url: str, reason: str, hint: str | None = None) -> InvalidInput:
    shown = url if len(url) <= 120 else url[:117] + "..."
    return InvalidInput(f"location {shown!r}: {reason}", hint or f"give {_FORMS}")


def parse_location(url: str) -> Location:
    """Validate a location URL; raises ``InvalidInput`` (one line, exit 2) when it is
    malformed, of an unknown scheme, or carries credentials."""
    if len(url) > MAX_URL_CHARS:
        raise _bad(url, f"longer than {MAX_URL_CHARS} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise _bad(url, "contains whitespace or control characters", "percent-encode them")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise _bad(url, f"scheme must be one of {', '.join(s + '://' for s in SCHEMES)}")
    if "?" in rest or "#" in rest:
        raise _bad(
            url,
            "query strings and fragments are not allowed (a presigned URL's query is a credential)",
            "record the plain location; credentials come from the fetching host's environment",
        )
    if scheme == "hf":
        hf = _HF_RE.fullmatch(url)
        if hf is None:
            raise _bad(url, "not a pinned revision", "give hf://org/name@<40-hex commit>")
        return Location(url, scheme, hf["repo"], hf["commit"])
    authority = rest.split("/", 1)[0]
    if "@" in authority:
        raise _bad(
            url,
            "carries credentials (user@ or user:password@)",
            "remove them; credentials never go into the registry",
        )
    if scheme == "file":
        return _parse_file(url, rest)
    if scheme == "s3":
        s3 = _S3_RE.fullmatch(url)
        if s3 is None:
            raise _bad(url, "not an S3 bucket and prefix", "give s3://bucket/prefix")
        return Location(url, scheme, s3["bucket"], s3["key"] or "")
    oci = _OCI_RE.fullmatch(url)
    if oci is None:
        raise _bad(
            url,
            "not an OCI reference pinned by digest",
            "give oci://registry/repository[:tag]@sha256:<64 hex>",
        )
    return Location(url, scheme, oci["registry"], f"{oci['repository']}@sha256:{oci['digest']}")


def _parse_file(url: str, rest: str) -> Location:
    hostname, slash, encoded = rest.partition("/")
    if not hostname:
        raise _bad(
            url,
            "a file location names its host",
            f"give file://HOST/path (this host: file://{host.hostname()}/…)",
        )
    if not _HOSTNAME_RE.fullmatch(hostname):
        raise _bad(url, f"host {hostname!r} is not a hostname")
    path = unquote("/" + encoded) if slash else ""
    if not path or path == "/":
        raise _bad(url, "a file location needs an absolute path after the host")
    if "\x00" in path or any(ord(c) < 0x20 for c in path):
        raise _bad(url, "the path contains control characters")
    if ".." in path.split("/"):
        raise _bad(url, "the path must not contain '..'")
    return Location(url, "file", hostname, path)


def file_url(path: Path, hostname: str | None = None) -> str:
    """The ``file://`` location of ``path`` (absolute) on ``hostname`` (default: this host)."""
    return f"file://{hostname or host.hostname()}{quote(str(path.resolve()))}"


# -- fetching ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WantedFile:
    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class Fetched:
    path: str
    bytes: int
    sha256: str
    source: str  # the location URL it came from


@dataclass(frozen=True)
class Skipped:
    url: str
    reason: str


class _Source:
    """A location this host can read: a directory here (file://, the local Hugging Face
    cache) or an S3 prefix."""

    remote = False

    def __init__(self, url: str) -> None:
        self.url = url

    def fetch(
        self, wanted: WantedFile, destination: Path, *, single: bool, progress: Progress
    ) -> tuple[int, str]:
        """Write the file to ``destination``; its (size, sha256). Raises ``Unavailable``."""
        raise NotImplementedError


class _Directory(_Source):
    def __init__(self, url: str, directory: Path) -> None:
        super().__init__(url)
        self.directory = directory

    def _file(self, path: str, single: bool) -> Path:
        if single and self.directory.is_file():
            return self.directory  # a one-file record located by its file
        return self.directory / path

    def problem(self, files: Sequence[tuple[str, int]]) -> str | None:
        """None when every file (path, bytes) is here with its recorded size, else why not."""
        for path, size in files:
            candidate = self._file(path, len(files) == 1)
            try:
                found = candidate.stat()
            except OSError:
                return f"{path} is not there"
            if not candidate.is_file() or found.st_size != size:
                return f"{path} is {found.st_size} bytes, recorded {size}"
        return None

    def fetch(
        self, wanted: WantedFile, destination: Path, *, single: bool, progress: Progress
    ) -> tuple[int, str]:
        from modelreg.s3 import Unavailable

        candidate = self._file(wanted.path, single)
        if not candidate.is_file():
            raise Unavailable(f"{wanted.path}: not found at {candidate}")
        destination.unlink(missing_ok=True)  # a local copy is never resumed: it is re-read
        try:
            return _copy_hashed(candidate, destination, progress)
        except OSError as exc:
            destination.unlink(missing_ok=True)
            raise Unavailable(f"{wanted.path}: cannot read: {exc.strerror}") from None


class _S3Prefix(_Source):
    remote = True

    def __init__(self, url: str, bucket: str, prefix: str) -> None:
        super().__init__(url)
        self.bucket = bucket
        self.prefix = prefix

    def fetch(
        self, wanted: WantedFile, destination: Path, *, single: bool, progress: Progress
    ) -> tuple[int, str]:
        from modelreg import s3

        found = s3.head(self.bucket, self.prefix, wanted.path, single=single)
        if found.size != wanted.bytes:
            # Nothing is downloaded: the size alone says these are not the recorded bytes.
            raise s3.Unavailable(
                f"{wanted.path}: MISMATCH — s3://{self.bucket}/{found.key} is "
                f"{found.size} bytes, recorded {wanted.bytes}; refused"
            )
        return s3.download(self.bucket, found, destination, progress)


class _OciArtifact(_Source):
    remote = True

    def __init__(self, url: str) -> None:
        from modelreg import oci

        super().__init__(url)
        reference = oci.parse_reference(url)
        assert reference is not None and reference.digest is not None  # parse_location's
        self.reference = reference

    def fetch(
        self, wanted: WantedFile, destination: Path, *, single: bool, progress: Progress
    ) -> tuple[int, str]:
        from modelreg import oci

        destination.unlink(missing_ok=True)  # a blob starts over
        return oci.download(
            self.reference, wanted.path, wanted.sha256, wanted.bytes, destination, progress
        )


def local_copy(files: Sequence[tuple[str, int]], urls: Sequence[str]) -> dict[str, Path] | None:
    """Each file's path on this host from the first file:// or Hugging Face cache location
    holding every file at its recorded size (what ``push`` uploads; the registry checks each
    sha256 as it arrives), or None."""
    for url in urls:
        try:
            source, _ = _source(parse_location(url))
        except ModelregError:
            continue
        if isinstance(source, _Directory) and source.problem(files) is None:
            single = len(files) == 1
            return {path: source._file(path, single) for path, _ in files}
    return None


def _source(location: Location) -> tuple[_Source | None, str | None]:
    """The source a location is on this host, or why it cannot be read from here."""
    if location.scheme not in FETCHABLE:
        return None, f"{location.scheme}:// fetching is not supported yet"
    if location.scheme == "s3":
        return _S3Prefix(location.url, location.where, location.path), None
    if location.scheme == "oci":
        return _OciArtifact(location.url), None
    if location.scheme == "file":
        me = host.hostname()
        if location.where not in (me, "localhost"):
            return None, f"on host {location.where}, not this one ({me})"
        return _Directory(location.url, Path(location.path)), None
    from modelreg.manifests.hf import resolve_hub_source

    try:
        resolution = resolve_hub_source(location.url)
    except ModelregError as exc:
        return None, f"not in the local Hugging Face cache ({exc.message})"
    return _Directory(location.url, resolution.snapshot), None


def _umask() -> int:
    """This process's umask, read without changing it (Linux: /proc/self/status)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # elsewhere: read it the only portable way, and put it back
    os.umask(old)
    return old


def _copy_hashed(source: Path, destination: Path, progress: Progress) -> tuple[int, str]:
    from modelreg.hashedfile import HashedWriter

    with source.open("rb") as src, destination.open("xb") as dst:
        out = HashedWriter(dst, progress)
        while chunk := src.read(_CHUNK):
            out.write(chunk)
        return out.finish()


def fetch_files(
    files: Sequence[WantedFile],
    locations: Sequence[str],
    to: Path,
    progress: Progress = None,
) -> tuple[list[Fetched], list[Skipped]]:
    """Copy every file of a record from the first location that has it with the right size
    and sha256 into the new directory ``to``; files are fetched in parallel.

    The files fill a fresh private directory beside ``to`` (``modelreg.fetchdir``: nothing
    that existed before is used), renamed into place only when every one of them matched: a
    mismatch, a missing file or an interruption leaves nothing at ``to``, and a file whose
    bytes did not match is deleted. Bytes an S3 download got before it failed are kept there
    (a prefix of the object) and the same fetch again resumes from them, hashing them again
    with the rest. Raises ``NotFetchable`` (with every location's problem) when some file
    could not be fetched, ``InvalidInput`` when ``to`` exists and is not an empty directory
    (a symlink is refused, whatever it points to) or something else filled it meanwhile.
    ``progress`` is called with each count of bytes written.
    """
    from modelreg import fetchdir

    to = to.expanduser().absolute()
    try:
        found = os.lstat(to)
    except (FileNotFoundError, NotADirectoryError):  # the parent's check says which
        found = None
    except OSError as exc:
        raise InvalidInput(f"--to {to}: {exc.strerror}") from None
    if found is not None and not (stat.S_ISDIR(found.st_mode) and not any(to.iterdir())):
        what = "is a symbolic link" if stat.S_ISLNK(found.st_mode) else "exists"
        raise InvalidInput(f"--to {to}: {what} and is not an empty directory", "give a new one")
    try:
        to.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(f"--to {to}: cannot create {to.parent}: {exc.strerror}") from None
    if not os.access(to.parent, os.W_OK | os.X_OK):
        raise InvalidInput(f"--to {to}: {to.parent} is not writable")
    parsed = [parse_location(url) for url in locations]
    sources: list[_Source] = []
    skipped: list[Skipped] = []
    for location in parsed:
        source, why = _source(location)
        if source is None:
            skipped.append(Skipped(location.url, why or "unreadable"))
        else:
            sources.append(source)
    for wanted in files:
        destination = (to / wanted.path).resolve()
        if not destination.is_relative_to(to.resolve()) or wanted.path.startswith("."):
            raise InvalidInput(f"file path {wanted.path!r} leaves the destination")
    prefix = fetchdir.resume_prefix(to, [(f.path, f.sha256) for f in files])
    staging = fetchdir.fresh(to, prefix)
    keep = False  # bytes an S3 download received before failing: the next fetch resumes
    try:
        fetchdir.adopt(to, prefix, staging, {f.path: f.bytes for f in files})
        outcomes = _fetch_all(files, sources, staging, progress)
        for _, problems in outcomes:
            skipped += problems
        keep = any(p.partial for got, problems in outcomes if got is None for p in problems)
        for wanted, (got, _) in zip(files, outcomes, strict=True):
            if got is None:
                problems_text = (
                    "; ".join(f"{s.url}: {s.reason}" for s in skipped) or "none recorded"
                )
                resume = (
                    f"; the bytes received so far are kept in {staging} and the same fetch "
                    "again resumes from them"
                    if keep
                    else ""
                )
                refused = NotFetchable(
                    f"{wanted.path}: no location has it with sha256 {wanted.sha256} "
                    f"({wanted.bytes} bytes); nothing was written to {to}{resume}. "
                    f"Locations: {problems_text}",
                    step=Step("locate", "add a location that holds the files", ref=None, add=None),
                )
                refused.problems = list(skipped)  # what each location gave: recorded by fetch
                raise refused
        fetched = [got for got, _ in outcomes if got is not None]
        # Private while it fills; once every file matched, the mode a new directory gets here.
        try:
            fetchdir.place(staging, to, 0o777 & ~_umask())
        except FileExistsError as exc:
            raise InvalidInput(f"--to {to}: {exc}", "give a new one") from None
    except KeyboardInterrupt:
        keep = True  # what arrived is kept for the next fetch to resume
        raise
    finally:
        if not keep and staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return fetched, skipped


def _fetch_all(
    files: Sequence[WantedFile],
    sources: Sequence[_Source],
    staging: Path,
    progress: Progress,
) -> list[tuple[Fetched | None, list[_Problem]]]:
    """Each file from the first source that gives it with the recorded bytes, in parallel."""
    from concurrent.futures import ThreadPoolExecutor

    single = len(files) == 1

    def one(wanted: WantedFile) -> tuple[Fetched | None, list[_Problem]]:
        return _fetch_one(wanted, sources, staging, single=single, progress=progress)

    if len(files) <= 1:
        return [one(f) for f in files]
    with ThreadPoolExecutor(min(len(files), 4), thread_name_prefix="fetch") as pool:
        return list(pool.map(one, files))


@dataclass(frozen=True)
class _Problem(Skipped):
    partial: bool = False


def _fetch_one(
    wanted: WantedFile,
    sources: Sequence[_Source],
    staging: Path,
    *,
    single: bool,
    progress: Progress,
) -> tuple[Fetched | None, list[_Problem]]:
    from modelreg.s3 import Unavailable

    destination = staging / wanted.path
    destination.parent.mkdir(parents=True, exist_ok=True)
    problems: list[_Problem] = []
    for source in sources:
        try:
            size, sha256 = source.fetch(wanted, destination, single=single, progress=progress)
        except Unavailable as exc:
            if not exc.partial:
                destination.unlink(missing_ok=True)
            problems.append(_Problem(source.url, exc.reason, exc.partial))
            if exc.partial:
                break  # resumed next time from this source; another one starts from zero
            continue
        if size == wanted.bytes and sha256 == wanted.sha256:
            return Fetched(wanted.path, size, sha256, source.url), problems
        destination.unlink()
        problems.append(
            _Problem(
                source.url,
                f"{wanted.path}: MISMATCH — sha256 {sha256} ({size} bytes), recorded "
                f"{wanted.sha256} ({wanted.bytes} bytes); refused",
            )
        )
    return None, problems


# -- checking a location: every sha256 read there, recorded as a fact -------------------------

_GONE = (
    "no object",
    "no such",
    "not found",
    "not there",
    "nosuchkey",
    "404",
    "manifest_unknown",
    "blob_unknown",
    "mismatch",
)


def says_gone(reason: str) -> bool:
    """Whether a location's refusal says the bytes are not there or are other bytes (rather
    than that this host could not ask: no client, no credentials, the network)."""
    return any(word in reason.lower() for word in _GONE)


@dataclass(frozen=True)
class LocationCheck:
    """What reading every byte of a record's files at one location found: ``ok`` True (every
    sha256 matched), False (a file is missing or is other bytes), or None (this host could not
    read it: no client, another host's path, the network — a note, never a fact about the
    bytes)."""

    url: str
    ok: bool | None
    detail: str


def _hash_file(path: Path, progress: Progress) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            if progress is not None:
                progress(len(chunk))
    return size, digest.hexdigest()


def check_location(
    files: Sequence[WantedFile], url: str, scratch: Path, progress: Progress = None
) -> LocationCheck:
    """Read every file of a record at ``url`` and compare each sha256 (a directory here is
    hashed in place; a remote copy is downloaded into ``scratch``, checked and deleted)."""
    try:
        source, why = _source(parse_location(url))
    except ModelregError as exc:
        return LocationCheck(url, None, exc.message)
    if source is None:
        return LocationCheck(url, None, why or "this host cannot read it")
    single = len(files) == 1
    if isinstance(source, _Directory):
        problem = source.problem([(f.path, f.bytes) for f in files])
        if problem is not None:
            return LocationCheck(url, False, problem)
        for wanted in files:
            try:
                size, sha256 = _hash_file(source._file(wanted.path, single), progress)
            except OSError as exc:
                return LocationCheck(url, None, f"{wanted.path}: cannot read: {exc.strerror}")
            if (size, sha256) != (wanted.bytes, wanted.sha256):
                return LocationCheck(
                    url,
                    False,
                    f"{wanted.path}: sha256 {sha256[:16]}…, recorded {wanted.sha256[:16]}…",
                )
        return LocationCheck(url, True, f"every sha256 ({len(files)} file(s))")
    import tempfile

    from modelreg.s3 import Unavailable

    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="check-") as where:
        for wanted in files:
            destination = Path(where) / "file"
            try:
                size, sha256 = source.fetch(wanted, destination, single=single, progress=progress)
            except Unavailable as exc:
                return LocationCheck(url, False if says_gone(exc.reason) else None, exc.reason)
            finally:
                destination.unlink(missing_ok=True)
            if (size, sha256) != (wanted.bytes, wanted.sha256):
                return LocationCheck(
                    url,
                    False,
                    f"{wanted.path}: sha256 {sha256[:16]}…, recorded {wanted.sha256[:16]}…",
                )
    return LocationCheck(url, True, f"every sha256 ({len(files)} file(s))")
