"""OCI registries: a record's files pushed as an OCI artifact, fetched back by digest.

The artifact is an OCI image manifest (``artifactType`` ``application/vnd.modelreg.record.v1+json``,
the empty config) whose layers are the record's files: each layer's digest is the file's
sha256, so the registry's own content addressing agrees with the record (a registry refuses
an upload whose bytes do not hash to the digest). A layer's path is its
``org.opencontainers.image.title`` annotation. The location recorded is the manifest's digest
(``oci://host/repo[:tag]@sha256:…``): the tag is a convenience, the digest is the location.

Spoken over the distribution API directly (``/v2/…``, httpx): HEAD before each blob upload
(the registry may have it), a monolithic upload streamed from the file, the manifest PUT by tag;
fetching reads the manifest by digest (its own sha256 checked), then each wanted blob by its
digest, streamed, hashed as it arrives. Credentials come from Docker's config
(``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``: ``auths.HOST.auth``), with the
registry's token flow on a 401; none are stored or printed. A loopback registry is spoken to over
plain HTTP, any other over HTTPS (``MODELREG_OCI_PLAIN_HTTP=host:port,…`` names others that are
plain HTTP, e.g. a registry on a private network).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelreg.hashedfile import HashedWriter
from modelreg.remote import Deadline, TooLong, read_capped
from modelreg.s3 import Unavailable
from modelreg.textsafe import for_terminal

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
ARTIFACT_TYPE = "application/vnd.modelreg.record.v1+json"
LAYER_TYPE = "application/vnd.modelreg.file.v1"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY).hexdigest()
TITLE = "org.opencontainers.image.title"
_CHUNK = 4 << 20
# What a registry's answer may cost. A manifest or index document is read to at most
# MANIFEST_MAX_BYTES (a record of thousands of files is well under 1 MiB), any other answer but
# a blob (a token, an error) to ANSWER_MAX_BYTES, a blob to its recorded size. Every request
# has a total deadline: REQUEST_DEADLINE_S, and for a blob that plus its size at
# BLOB_MIN_BYTES_PER_S (a 26.8 GB neff: about 7.5 h). READ_TIMEOUT_S is httpx's own, per read.
MANIFEST_MAX_BYTES = 4 << 20
ANSWER_MAX_BYTES = 1 << 20
REQUEST_DEADLINE_S = 60.0
BLOB_MIN_BYTES_PER_S = 1 << 20
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0

Progress = Callable[[int], None] | None


@dataclass(frozen=True)
class Reference:
    registry: str  # host[:port]
    repository: str
    tag: str | None
    digest: str | None  # "sha256:…"

    def url(self, digest: str | None = None) -> str:
        tag = f":{self.tag}" if self.tag else ""
        pinned = digest or self.digest
        return f"oci://{self.registry}/{self.repository}{tag}" + (f"@{pinned}" if pinned else "")


_REF_RE = re.compile(
    r"oci://(?P<registry>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)"
    r"/(?P<repository>[a-z0-9]+(?:(?:[._]|__|-+|/)[a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)


def parse_reference(url: str) -> Reference | None:
    """``oci://host/repo[:tag][@sha256:…]``; None when it is not one."""
    found = _REF_RE.fullmatch(url)
    if found is None:
        return None
    return Reference(found["registry"], found["repository"], found["tag"], found["digest"])


def _plain_http(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0] if not registry.startswith("[") else registry
    listed = {h.strip() for h in os.environ.get("MODELREG_OCI_PLAIN_HTTP", "").split(",")}
    return host in ("localhost", "::1") or host.startswith("127.") or registry in listed


def _basic(registry: str) -> str | None:
    """``user:password`` base64 for ``registry`` from Docker's config, if it has one."""
    directory = os.environ.get("DOCKER_CONFIG") or str(Path.home() / ".docker")
    try:
        config = json.loads((Path(directory) / "config.json").read_text())
        auth = config.get("auths", {}).get(registry, {}).get("auth")
    except (OSError, ValueError, AttributeError):
        return None
    return auth if isinstance(auth, str) and auth else None


@dataclass(frozen=True)
class Answer:
    """A registry's answer to anything but a blob: its status, headers and body (read to a
    cap as it arrived)."""

    status_code: int
    headers: Any  # httpx.Headers: case-insensitive
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


class Client:
    """The distribution API of one registry (httpx), with Docker-config credentials.

    Every request has a total deadline (``remote.Deadline``: the sockets it opens are shut
    down when it passes, whatever a read's own timeout says) and every answer but a blob is
    read to a cap as it arrives. Connections are not kept alive between requests, so each
    request's socket is its own to shut down."""

    def __init__(self, registry: str) -> None:
        try:
            import httpx
        except ImportError:
            raise Unavailable(
                "httpx is not installed on this host (pip install 'modelreg[oci]')"
            ) from None
        self.registry = registry
        scheme = "http" if _plain_http(registry) else "https"
        self.base = f"{scheme}://{registry}"
        self.http = httpx.Client(
            timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
            follow_redirects=True,
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"Accept-Encoding": "identity"},  # a body's size is its size on the wire
        )
        self._token: str | None = None

    def close(self) -> None:
        self.http.close()

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        elif (basic := _basic(self.registry)) is not None:
            headers["Authorization"] = f"Basic {basic}"
        return headers

    def _authenticate(self, challenge: str) -> bool:
        """The token flow of a ``WWW-Authenticate: Bearer realm=…`` challenge."""
        if not challenge.lower().startswith("bearer "):
            return False
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge[:4096]))
        realm = fields.pop("realm", None)
        if not realm or not realm.startswith(("https://", "http://")):
            return False
        headers = {}
        if (basic := _basic(self.registry)) is not None:
            headers["Authorization"] = f"Basic {basic}"
        answer = self._exchange("GET", realm, ANSWER_MAX_BYTES, params=fields, headers=headers)
        if answer.status_code != 200:
            return False
        try:
            body = answer.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            return False
        self._token = token if isinstance(token, str) and len(token) < 16_384 else None
        return bool(self._token)

    def _exchange(self, method: str, url: str, cap: int, **kwargs: Any) -> Answer:
        """One request within ``REQUEST_DEADLINE_S`` (``deadline_s`` to say otherwise), its
        body read to ``cap`` bytes; ``Unavailable`` when it is longer, late or unreachable."""
        seconds = kwargs.pop("deadline_s", REQUEST_DEADLINE_S)
        what = f"{method} {url.split('?', 1)[0]}"
        with Deadline(seconds, f"the registry {self.registry}") as deadline:
            try:
                with self.http.stream(
                    method, url, extensions={"trace": _attach_to(deadline)}, **kwargs
                ) as answer:
                    declared = answer.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > cap:
                        raise TooLong(f"the answer to {what}", cap)
                    _identity(answer, what)
                    content = read_capped(
                        _until(deadline, answer.iter_raw()), cap, f"the answer to {what}"
                    )
                    return Answer(answer.status_code, answer.headers, content)
            except TooLong as exc:
                raise Unavailable(f"{exc}") from None
            except Unavailable:
                raise
            except Exception as exc:  # connection refused, TLS, timeout: one line
                if deadline.expired:
                    raise Unavailable(str(deadline.exceeded())) from None
                raise Unavailable(
                    f"cannot reach the registry {self.registry}: {_why(exc)}"
                ) from None

    def request(
        self, method: str, path: str, *, cap: int = ANSWER_MAX_BYTES, **kwargs: Any
    ) -> Answer:
        url = path if path.startswith("http") else f"{self.base}{path}"
        headers = kwargs.pop("headers", None)
        answer = self._exchange(method, url, cap, headers=self._headers(headers), **kwargs)
        if answer.status_code == 401 and self._authenticate(
            answer.headers.get("www-authenticate", "")
        ):
            answer = self._exchange(method, url, cap, headers=self._headers(headers), **kwargs)
        return answer

    @contextmanager
    def stream(self, path: str, deadline: Deadline) -> Iterator[Any]:
        """A GET whose body the caller reads (a blob), its sockets attached to ``deadline``."""
        with self.http.stream(
            "GET",
            f"{self.base}{path}",
            headers=self._headers(),
            extensions={"trace": _attach_to(deadline)},
        ) as answer:
            yield answer


def _identity(answer: Any, what: str) -> None:
    encoding = answer.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise Unavailable(
            f"the answer to {what} is encoded ({for_terminal(encoding)[:40]}), "
            "though asked for as it is; refused"
        )


def blob_deadline_s(size: int) -> float:
    """The total time a blob of ``size`` bytes may take, up or down."""
    return REQUEST_DEADLINE_S + size / BLOB_MIN_BYTES_PER_S


def _attach_to(deadline: Deadline) -> Callable[[str, dict[str, Any]], None]:
    """httpx's ``trace`` callback: each socket a request connects is shut at ``deadline``."""

    def trace(event: str, info: dict[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            if stream is not None:
                deadline.attach(stream.get_extra_info("socket"))

    return trace


def _until(deadline: Deadline, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """``chunks`` while ``deadline`` has not passed."""
    for chunk in chunks:
        deadline.check()
        yield chunk
    deadline.check()


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:160]}" if str(exc) else type(exc).__name__


def _refusal(answer: Answer, what: str) -> Unavailable:
    try:
        errors = answer.json().get("errors") or []
        detail = "; ".join(
            f"{e.get('code')}: {e.get('message')}" for e in errors[:3] if isinstance(e, dict)
        )
    except (ValueError, AttributeError, TypeError):
        detail = ""
    detail = for_terminal(detail)[:300]
    return Unavailable(
        f"{what}: the registry answered {answer.status_code}" + (f" ({detail})" if detail else "")
    )


def _blob_chunks(path: Path, progress: Progress) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            if progress:
                progress(len(chunk))
            yield chunk


@dataclass(frozen=True)
class PushedFile:
    path: str
    bytes: int
    sha256: str
    uploaded: bool  # False: the registry had the blob already


def push(
    reference: Reference,
    files: Sequence[tuple[str, int, str, Path]],
    annotations: dict[str, str],
    progress: Progress = None,
) -> tuple[str, list[PushedFile]]:
    """Upload each (path, bytes, sha256, local file) as a blob named by its sha256 (the
    registry refuses bytes that do not hash to it), then the manifest under the tag (or by
    digest). Returns the manifest's digest and what was uploaded. Raises ``Unavailable``."""
    client = Client(reference.registry)
    repo = reference.repository
    pushed: list[PushedFile] = []
    try:

        def upload(digest: str, size: int, content: Any) -> bool:
            head = client.request("HEAD", f"/v2/{repo}/blobs/{digest}")
            if head.status_code == 200:
                return False
            started = client.request("POST", f"/v2/{repo}/blobs/uploads/")
            if started.status_code != 202 or "location" not in started.headers:
                raise _refusal(started, f"starting the upload of {digest}")
            location = started.headers["location"]
            if not location.startswith("http"):
                location = f"{client.base}{location}"
            separator = "&" if "?" in location else "?"
            done = client.request(
                "PUT",
                f"{location}{separator}digest={digest}",
                content=content,
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
                deadline_s=blob_deadline_s(size),
            )
            if done.status_code != 201:
                raise _refusal(done, f"uploading {digest}")
            return True

        upload(EMPTY_DIGEST, len(EMPTY), EMPTY)
        layers = []
        for path, size, sha256, local in files:
            digest = f"sha256:{sha256}"
            fresh = upload(digest, size, _blob_chunks(local, progress))
            pushed.append(PushedFile(path, size, sha256, fresh))
            layers.append(
                {
                    "mediaType": LAYER_TYPE,
                    "digest": digest,
                    "size": size,
                    "annotations": {TITLE: path},
                }
            )
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "artifactType": ARTIFACT_TYPE,
            "config": {"mediaType": EMPTY_TYPE, "digest": EMPTY_DIGEST, "size": len(EMPTY)},
            "layers": layers,
            "annotations": annotations,
        }
        body = json.dumps(manifest, separators=(",", ":"), sort_keys=True).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        answer = client.request(
            "PUT",
            f"/v2/{repo}/manifests/{reference.tag or digest}",
            content=body,
            headers={"Content-Type": MANIFEST_TYPE},
        )
        if answer.status_code != 201:
            raise _refusal(answer, "putting the manifest")
        said = answer.headers.get("docker-content-digest")
        if said and said != digest:
            raise Unavailable(f"the registry named the manifest {said}, its bytes are {digest}")
        return digest, pushed
    finally:
        client.close()


def _manifest(client: Client, reference: Reference) -> dict[str, Any]:
    """The manifest by its digest, read to ``MANIFEST_MAX_BYTES`` as it arrives and its sha256
    checked against the digest. An index document (a list of manifests) is no artifact of a
    record: it is refused by its media type, after the same checks."""
    assert reference.digest is not None
    answer = client.request(
        "GET",
        f"/v2/{reference.repository}/manifests/{reference.digest}",
        headers={"Accept": MANIFEST_TYPE},
        cap=MANIFEST_MAX_BYTES,
    )
    if answer.status_code == 404:
        raise Unavailable(f"no manifest {reference.digest} in {reference.repository}")
    if answer.status_code != 200:
        raise _refusal(answer, f"reading the manifest {reference.digest}")
    if "sha256:" + hashlib.sha256(answer.content).hexdigest() != reference.digest:
        raise Unavailable(f"the manifest's bytes do not hash to {reference.digest}; refused")
    try:
        manifest = json.loads(answer.content)
    except ValueError:
        raise Unavailable(f"the manifest {reference.digest} is not JSON") from None
    if not isinstance(manifest, dict):
        raise Unavailable(f"the manifest {reference.digest} is not a JSON object")
    if manifest.get("mediaType") == INDEX_TYPE or "manifests" in manifest:
        raise Unavailable(
            f"{reference.digest} is an index of manifests, not a record's artifact; refused"
        )
    return manifest


def _layers(manifest: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """path -> (digest, size) of an artifact's layers."""
    found: dict[str, tuple[str, int]] = {}
    layers = manifest.get("layers")
    for layer in layers if isinstance(layers, list) else []:
        if not isinstance(layer, dict):
            continue
        annotations = layer.get("annotations")
        title = annotations.get(TITLE) if isinstance(annotations, dict) else None
        size = layer.get("size")
        if isinstance(title, str) and isinstance(size, int) and size >= 0:
            found[title] = (str(layer.get("digest")), size)
    return found


def download(
    reference: Reference, path: str, sha256: str, size: int, part: Path, progress: Progress
) -> tuple[int, str]:
    """The blob of ``path`` (named in the artifact by ``sha256``) into ``part``, hashed as it
    arrives: (bytes, sha256). A blob is read to its recorded ``size`` and no further (an answer
    that declares or sends more is refused at that byte), within ``blob_deadline_s(size)``.
    Raises ``Unavailable`` (nothing kept: a blob starts over)."""
    client = Client(reference.registry)
    try:
        layers = _layers(_manifest(client, reference))
        if layers.get(path) != (f"sha256:{sha256}", size):
            raise Unavailable(f"{path}: not in the artifact with sha256 {sha256}")
        out: HashedWriter | None = None
        blob = f"/v2/{reference.repository}/blobs/sha256:{sha256}"
        with Deadline(blob_deadline_s(size), f"{path} from {reference.registry}") as deadline:
            try:
                with client.stream(blob, deadline) as answer, part.open("xb") as fh:
                    if answer.status_code != 200:
                        raise _refusal(
                            Answer(answer.status_code, answer.headers, b""), f"reading {path}"
                        )
                    declared = answer.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) != size:
                        longer = int(declared) > size
                        raise Unavailable(
                            f"{path}: the registry declares {int(declared):,} bytes, "
                            f"{'longer' if longer else 'shorter'} than the {size:,} recorded; "
                            "refused"
                        )
                    _identity(answer, f"GET {blob}")
                    out = HashedWriter(fh, progress)
                    for chunk in _until(deadline, answer.iter_raw(_CHUNK)):
                        if out.written + len(chunk) > size:
                            raise Unavailable(
                                f"{path}: the registry sent more than the {size:,} bytes "
                                f"recorded (longer than the blob); refused at byte {size:,}"
                            )
                        out.write(chunk)
                    if out.written != size:
                        raise Unavailable(
                            f"{path}: the registry sent {out.written:,} of {size:,} bytes"
                        )
                    return out.finish()
            except Unavailable:
                raise
            except Exception as exc:
                at = out.written if out else 0
                why = str(deadline.exceeded()) if deadline.expired else _why(exc)
                raise Unavailable(f"{path}: {why} at byte {at:,} of {size:,}") from None
    finally:
        client.close()
