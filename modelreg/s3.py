"""S3 locations: fetching a record's copy with the sha256 checked as it arrives.

A location ``s3://bucket/prefix`` holds a record's files under the prefix (``prefix/PATH``);
for a one-file record it may also name the object itself. Credentials come only from the
standard AWS chain (environment, shared config and credentials files, SSO, the instance or
task role): nothing is stored or printed. ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``)
points at an S3-compatible store; path-style addressing is used for it.

A file is downloaded in ranges fetched in parallel and consumed in order — written and hashed
as each range arrives, a bounded window of ranges in memory — so peak memory does not grow with
the file. A range's answer is read as it arrives and refused at the byte that makes it longer
than asked (a lying or broken store costs one range, not its whole answer), and each request
has a total deadline (``modelreg.remote``: its socket is shut down when the time passes,
whatever botocore's per-read timeout says).

Every range asks for the object's ETag as first seen (``If-Match``): an object
replaced mid-download fails instead of mixing two objects' bytes. A range that fails (a
throttled or dropped request) is retried; when it still fails, the bytes written so far are a
prefix of the object and are kept, and the next fetch resumes from there (the prefix is hashed
again from disk: the digest always covers every byte).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelreg.hashedfile import HashedWriter
from modelreg.remote import Deadline, DeadlineExceeded, current

PART_BYTES = 8 << 20
WORKERS = 4
WINDOW = WORKERS + 2  # ranges in flight or waiting to be written: bounded memory
RANGE_ATTEMPTS = 4
RANGE_BACKOFF_S = 0.2  # before attempt k: this × 2**k, at most 2 s
# The total time of one request: a HEAD, or one range (PART_BYTES at RANGE_MIN_BYTES_PER_S
# at the least). A range that misses it is not asked again: the store is too slow or lying.
HEAD_DEADLINE_S = 30.0
RANGE_DEADLINE_S = 30.0
RANGE_MIN_BYTES_PER_S = 256 << 10
_READ_BYTES = 1 << 20

ProgressCallback = Callable[[int], None]
NO_CREDENTIALS = (
    "no AWS credentials on this host (the standard chain: AWS_ACCESS_KEY_ID / "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE and ~/.aws, or an instance role)"
)


class Unavailable(Exception):
    """This location cannot give the file; ``reason`` says why (one line, no credentials)."""

    def __init__(self, reason: str, *, partial: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.partial = partial  # bytes were kept for a resume


@dataclass(frozen=True)
class S3Object:
    key: str
    size: int
    etag: str


_client_lock = threading.Lock()
_clients: dict[tuple[str | None, str | None], Any] = {}


def reset() -> None:
    """Forget this process's clients (after the AWS environment changed: a test, a
    long-lived process rotating credentials)."""
    with _client_lock:
        _clients.clear()


def endpoint_url() -> str | None:
    """The S3-compatible endpoint this host is configured for, if any."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _client() -> Any:
    """One boto3 S3 client per endpoint and profile for this process (thread-safe; creating
    one resolves credentials, which can mean a metadata-service round trip)."""
    key = (endpoint_url(), os.environ.get("AWS_PROFILE"))
    with _client_lock:
        client = _clients.get(key)
        if client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise Unavailable(
                    "boto3 is not installed on this host (pip install 'modelreg[s3]')"
                ) from None
            config = Config(
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=5,
                read_timeout=60,
                max_pool_connections=WORKERS * 4,
                s3={"addressing_style": "path"} if key[0] else None,
            )
            client = boto3.session.Session().client("s3", endpoint_url=key[0], config=config)
            _attach_requests_to_deadlines(client)
            _clients[key] = client
        return client


def _attach_requests_to_deadlines(client: Any) -> None:
    """Each request's socket attached to its thread's ``remote.current()`` deadline while its
    answer is awaited and read. botocore pools its connections, so the socket is attached per
    request (when the answer is awaited), not per connect; its per-read timeout alone would
    let a store that drips its headers hold a request for hours. The pool classes are
    botocore's own, subclassed; a botocore without that attribute keeps only the per-chunk
    deadline check of ``_get_range``."""
    from botocore.awsrequest import (
        AWSHTTPConnection,
        AWSHTTPConnectionPool,
        AWSHTTPSConnection,
        AWSHTTPSConnectionPool,
    )

    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    pools = getattr(session, "_pool_classes_by_scheme", None)
    if not isinstance(pools, dict):
        return

    class Connection(AWSHTTPConnection):  # type: ignore[misc]
        def getresponse(self, *args: Any, **kwargs: Any) -> Any:
            if (deadline := current()) is not None:
                deadline.attach(self.sock)
            return super().getresponse(*args, **kwargs)

    class SecureConnection(AWSHTTPSConnection):  # type: ignore[misc]
        def getresponse(self, *args: Any, **kwargs: Any) -> Any:
            if (deadline := current()) is not None:
                deadline.attach(self.sock)
            return super().getresponse(*args, **kwargs)

    class Pool(AWSHTTPConnectionPool):  # type: ignore[misc]
        ConnectionCls = Connection

    class SecurePool(AWSHTTPSConnectionPool):  # type: ignore[misc]
        ConnectionCls = SecureConnection

    pools.update(http=Pool, https=SecurePool)


def _why(exc: BaseException) -> str:
    """A one-line reason for an S3 failure: the service's error code, never a credential."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    if isinstance(exc, DeadlineExceeded):
        return str(exc)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return NO_CREDENTIALS
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach S3 at {exc.kwargs.get('endpoint_url', endpoint_url() or 'AWS')}"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = error.get("Code") or status
        return f"S3 answered {code}" + (f" ({status})" if status and str(status) != code else "")
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _is_missing(exc: BaseException) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(exc, ClientError) and _code(exc) in ("404", "NoSuchKey", "NotFound")


def keys_for(prefix: str, path: str, *, single: bool) -> list[str]:
    """The keys a file may have under a location's prefix: ``prefix/path``, and for a one-file
    record the prefix itself (a location naming the object)."""
    joined = f"{prefix.rstrip('/')}/{path}" if prefix else path
    keys = [joined]
    if single and prefix and not prefix.endswith("/") and prefix != joined:
        keys.append(prefix)
    return keys


def head(bucket: str, prefix: str, path: str, *, single: bool) -> S3Object:
    """The object holding ``path`` at ``s3://bucket/prefix``; ``Unavailable`` when there is
    none (or S3 cannot be asked)."""
    problems: list[str] = []
    try:
        client = _client()
        for key in keys_for(prefix, path, single=single):
            try:
                with Deadline(HEAD_DEADLINE_S, f"HEAD s3://{bucket}/{key}") as deadline:
                    try:
                        found = client.head_object(Bucket=bucket, Key=key)
                    except Exception:
                        if deadline.expired:
                            raise deadline.exceeded() from None
                        raise
            except Exception as exc:
                if _is_missing(exc):
                    problems.append(f"no object s3://{bucket}/{key}")
                    continue
                raise
            return S3Object(key, int(found["ContentLength"]), str(found.get("ETag", "")))
    except Unavailable:
        raise
    except Exception as exc:
        raise Unavailable(f"{path}: {_why(exc)}") from None
    raise Unavailable(f"{path}: " + "; ".join(problems))


def range_deadline_s(size: int) -> float:
    return RANGE_DEADLINE_S + size / RANGE_MIN_BYTES_PER_S


class _Refused(Exception):
    """An answer that is not the range asked for: asking again would not change it."""


def _get_range(bucket: str, obj: S3Object, start: int, end: int) -> bytes:
    """Bytes ``start..end`` (inclusive) of the object, retried on a failed or short read;
    refused (not retried) when the answer is longer than asked or misses its deadline."""
    client = _client()
    asked = end - start + 1
    what = f"{obj.key} bytes {start}-{end}"
    last: BaseException | None = None
    for attempt in range(RANGE_ATTEMPTS):
        if attempt:
            time.sleep(min(RANGE_BACKOFF_S * 2**attempt, 2.0))
        try:
            with Deadline(range_deadline_s(asked), what) as deadline:
                try:
                    data = _read_range(client, bucket, obj, start, end, deadline)
                except (_Refused, DeadlineExceeded):
                    raise
                except Exception:
                    if deadline.expired:
                        raise deadline.exceeded() from None
                    raise
        except _Refused as exc:
            raise Unavailable(str(exc)) from None
        except DeadlineExceeded as exc:
            raise Unavailable(str(exc)) from None
        except Exception as exc:
            from botocore.exceptions import ClientError

            if isinstance(exc, ClientError) and _code(exc) == "PreconditionFailed":
                raise Unavailable(f"{obj.key} changed while it was fetched") from None
            last = exc
            continue
        if len(data) == asked:
            return data
        last = OSError(f"short read: {len(data)} of {asked} bytes")
    assert last is not None
    raise Unavailable(_why(last))


def _read_range(
    client: Any, bucket: str, obj: S3Object, start: int, end: int, deadline: Deadline
) -> bytes:
    """The answer to one ranged GET, read as it arrives and refused at the byte past the
    range (or on a declared length past it)."""
    asked = end - start + 1
    answer = client.get_object(
        Bucket=bucket, Key=obj.key, Range=f"bytes={start}-{end}", IfMatch=obj.etag
    )
    body = answer["Body"]
    try:
        declared = answer.get("ContentLength")
        if isinstance(declared, int) and declared > asked:
            raise _Refused(
                f"{obj.key}: the answer to bytes {start}-{end} declares {declared:,} bytes, "
                f"longer than the {asked:,} asked; refused"
            )
        parts: list[bytes] = []
        got = 0
        while chunk := body.read(min(_READ_BYTES, asked + 1 - got)):
            deadline.check()
            got += len(chunk)
            if got > asked:
                raise _Refused(
                    f"{obj.key}: the answer to bytes {start}-{end} is longer than the "
                    f"{asked:,} asked; refused at byte {start + asked:,}"
                )
            parts.append(chunk)
        deadline.check()
        return b"".join(parts)
    except BaseException:
        body.close()  # the connection is not reused with an answer half read
        raise


def download(
    bucket: str,
    obj: S3Object,
    part: Path,
    progress: ProgressCallback | None = None,
) -> tuple[int, str]:
    """Fetch ``obj`` into ``part``, resuming after the bytes already there; return (size,
    sha256) of the whole file. Raises ``Unavailable(partial=True)`` when a range failed after
    its retries: ``part`` then holds a prefix of the object for the next fetch to resume."""
    have = part.stat().st_size if part.exists() else 0
    if have > obj.size:
        part.unlink()
        have = 0
    with part.open("ab" if have else "xb") as fh, part.open("rb") as back:
        out = HashedWriter(fh, progress)
        while out.written < have:  # the kept prefix, hashed again: the digest covers it
            chunk = back.read(min(PART_BYTES, have - out.written))
            if not chunk:
                raise Unavailable(f"{part.name}: the kept bytes shrank while they were read")
            out.seed(chunk)
        starts = range(have, obj.size, PART_BYTES)
        with ThreadPoolExecutor(WORKERS, thread_name_prefix="s3-range") as pool:
            pending: deque[Future[bytes]] = deque()
            upcoming = iter(starts)

            def submit() -> None:
                start = next(upcoming, None)
                if start is not None:
                    end = min(start + PART_BYTES, obj.size) - 1
                    pending.append(pool.submit(_get_range, bucket, obj, start, end))

            for _ in range(WINDOW):
                submit()
            try:
                while pending:
                    out.write(pending.popleft().result())
                    submit()
            except Unavailable as exc:
                for future in pending:
                    future.cancel()
                out.sync()
                raise Unavailable(
                    f"{exc.reason} at byte {out.written:,} of {obj.size:,}",
                    partial=out.written > 0,
                ) from None
        return out.finish()
