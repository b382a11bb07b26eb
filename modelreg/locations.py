"""Where a record's bytes can be fetched, and fetching them with every sha256 checked.

A location is a URL naming a copy of a record's files:

- ``file://HOST/absolute/dir`` — a directory (or, for a one-file record, the file) on HOST;
  the path is percent-encoded like any URL path. ``add`` records its own host's path.
- ``hf://org/name@<40-hex commit>`` — a pinned Hugging Face revision.
- ``s3://bucket/prefix`` — an S3 prefix holding the files.
- ``oci://registry/repository[:tag]@sha256:<64 hex>`` — an OCI artifact, by digest.

Locations never carry credentials: user:password@, and query strings (presigned URLs carry
their signature there), are refused. ``fetch`` reads file locations on this host and the local
Hugging Face cache; S3 and OCI are listed as not supported yet.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from modelreg import host
from modelreg.errors import InvalidInput, ModelregError, NotFetchable

MAX_URL_CHARS = 2000
SCHEMES = ("file", "hf", "s3", "oci")
FETCHABLE = ("file", "hf")
_CHUNK = 4 << 20

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


def _source_dir(location: Location) -> tuple[Path | None, str | None]:
    """Where a location's files are on this host, or why it cannot be read from here."""
    if location.scheme not in FETCHABLE:
        return None, f"{location.scheme}:// fetching is not supported yet"
    if location.scheme == "file":
        me = host.hostname()
        if location.where not in (me, "localhost"):
            return None, f"on host {location.where}, not this one ({me})"
        return Path(location.path), None
    from modelreg.manifests.hf import resolve_hub_source

    try:
        resolution = resolve_hub_source(location.url)
    except ModelregError as exc:
        return None, f"not in the local Hugging Face cache ({exc.message})"
    return resolution.snapshot, None


def fetchable_copy(
    files: Sequence[tuple[str, int]], urls: Sequence[str]
) -> tuple[str | None, str | None]:
    """The first location that holds every file (path, bytes) with its recorded size — a
    cheap check by ``stat``; ``fetch`` checks every sha256 as it copies — or None and why
    none does. What a rollback candidate and the deploy gate need: bytes someone can get."""
    problems: list[str] = []
    for url in urls:
        try:
            location = parse_location(url)
        except ModelregError as exc:
            problems.append(f"{url}: {exc.message}")
            continue
        directory, why = _source_dir(location)
        if directory is None:
            problems.append(f"{url}: {why}")
            continue
        problem = None
        for path, size in files:
            candidate = directory / path
            if len(files) == 1 and directory.is_file():
                candidate = directory  # a one-file record located by its file
            try:
                found = candidate.stat()
            except OSError:
                problem = f"{path} is not there"
                break
            if not candidate.is_file() or found.st_size != size:
                problem = f"{path} is {found.st_size} bytes, recorded {size}"
                break
        if problem is None:
            return url, None
        problems.append(f"{url}: {problem}")
    return None, "; ".join(problems) or "no location recorded"


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


def _copy_hashed(source: Path, destination: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    destination.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as src, destination.open("xb") as dst:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            dst.write(chunk)
            size += len(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return size, digest.hexdigest()


def fetch_files(
    files: Sequence[WantedFile], locations: Sequence[str], to: Path
) -> tuple[list[Fetched], list[Skipped]]:
    """Copy every file of a record from the first location that has it with the right size
    and sha256 into the new directory ``to``.

    The files are written to a temporary directory beside ``to`` and renamed into place only
    when every one of them matched: a mismatch, a missing file or an interruption leaves
    nothing at ``to``. Raises ``NotFetchable`` (with every location's problem) when some file
    could not be fetched, ``InvalidInput`` when ``to`` exists and is not an empty directory.
    """
    to = to.expanduser().absolute()
    if to.exists() and not (to.is_dir() and not any(to.iterdir())):
        raise InvalidInput(f"--to {to}: exists and is not an empty directory", "give a new one")
    to.parent.mkdir(parents=True, exist_ok=True)
    parsed = [parse_location(url) for url in locations]
    sources: list[tuple[str, Path]] = []
    skipped: list[Skipped] = []
    for location in parsed:
        directory, why = _source_dir(location)
        if directory is None:
            skipped.append(Skipped(location.url, why or "unreadable"))
        else:
            sources.append((location.url, directory))
    staging = to.parent / f".{to.name}.fetch-{secrets.token_hex(4)}"
    staging.mkdir(mode=0o700)
    fetched: list[Fetched] = []
    try:
        for wanted in files:
            got = _fetch_one(wanted, sources, staging, skipped, single=len(files) == 1)
            if got is None:
                problems = "; ".join(f"{s.url}: {s.reason}" for s in skipped) or "none recorded"
                raise NotFetchable(
                    f"{wanted.path}: no location has it with sha256 {wanted.sha256} "
                    f"({wanted.bytes} bytes); nothing was written to {to}. Locations: {problems}",
                    "add a location that holds the files: modelreg locate RECORD --add URL",
                )
            fetched.append(got)
        # Private while it fills; once every file matched, the mode a new directory gets here.
        os.chmod(staging, 0o777 & ~_umask())
        if to.exists():
            to.rmdir()  # an empty directory given as the destination
        os.rename(staging, to)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return fetched, skipped


def _fetch_one(
    wanted: WantedFile,
    sources: Sequence[tuple[str, Path]],
    staging: Path,
    skipped: list[Skipped],
    *,
    single: bool,
) -> Fetched | None:
    destination = staging / wanted.path
    if not destination.resolve().is_relative_to(staging.resolve()):
        raise InvalidInput(f"file path {wanted.path!r} leaves the destination")
    for url, directory in sources:
        candidate = directory / wanted.path
        if single and directory.is_file():
            candidate = directory  # a one-file record located by its file
        if not candidate.is_file():
            skipped.append(Skipped(url, f"{wanted.path}: not found at {candidate}"))
            continue
        try:
            size, sha256 = _copy_hashed(candidate, destination)
        except OSError as exc:
            destination.unlink(missing_ok=True)
            skipped.append(Skipped(url, f"{wanted.path}: cannot read: {exc.strerror}"))
            continue
        if size == wanted.bytes and sha256 == wanted.sha256:
            return Fetched(wanted.path, size, sha256, url)
        destination.unlink()
        skipped.append(
            Skipped(
                url,
                f"{wanted.path}: MISMATCH — sha256 {sha256} ({size} bytes), recorded "
                f"{wanted.sha256} ({wanted.bytes} bytes); refused",
            )
        )
    return None
