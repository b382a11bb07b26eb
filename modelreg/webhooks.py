"""Webhooks: who is told when production changes, how a delivery is signed and sent.

A delivery is a POST of JSON (``payload``) with three headers, built as MLflow 3's webhooks
build theirs (under this tool's name), so a receiver written for one checks the other:

- ``X-Modelreg-Delivery-Id``: a UUID, the same on every retry of one delivery (drop repeats);
- ``X-Modelreg-Timestamp``: Unix seconds when this attempt was signed (refuse old ones);
- ``X-Modelreg-Signature``: ``v1,`` + base64 of HMAC-SHA256 with the webhook's secret over
  ``"{delivery_id}.{timestamp}.{body}"`` (the raw body bytes).

``verify_signature`` is that check, for receivers written in Python. Sending uses only the
standard library (``http.client``): a deploy host that runs ``webhooks deliver`` needs no
extra package. Redirects are not followed (a 3xx is a failed attempt).

An attempt has a total deadline (``remote.Deadline``: connect, send and the answer's status
line and headers together, however slowly a receiver drips them), and only the answer's
status is kept: its body is never read or shown. A URL whose host is, or resolves to, an
address that is not public (loopback, link-local, private, reserved…) is refused — when it is
added and again at every attempt, on every address the name resolves to, and the attempt
connects to an address it checked — unless the registry allows the host by name
(``registry.settings``: ``webhooks.allowed_hosts``). A releaser could otherwise use the
sender to probe the internal network it runs in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import ipaddress
import json
import secrets
import socket
import ssl
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from modelreg.errors import InvalidInput
from modelreg.steps import Step
from modelreg.textsafe import for_terminal
from modelreg.urls import redact_text

# The event kinds a webhook can be sent (the kinds of ``history`` that change what is
# deployable or where; ``add`` and ``upload-run`` too, for a CI that reacts to new records).
EVENTS = ("add", "verify", "upload-run", "promote", "rollback", "hold", "release", "retire")
DEFAULT_EVENTS = ("promote", "rollback", "hold", "release", "retire", "verify")
SIGNATURE_HEADER = "X-Modelreg-Signature"
TIMESTAMP_HEADER = "X-Modelreg-Timestamp"
DELIVERY_HEADER = "X-Modelreg-Delivery-Id"
EVENT_HEADER = "X-Modelreg-Event"
# Attempts per delivery, and the wait after the n-th failed one: BACKOFF_S * 2**(n-1), at
# most MAX_BACKOFF_S (5 s, 10 s, 20 s … ≈ 10 min in all before a delivery is given up).
MAX_ATTEMPTS = 8
BACKOFF_S = 5.0
MAX_BACKOFF_S = 600.0
TIMEOUT_S = 10.0  # an attempt's total time: connect, send, and the answer's status


def one_line(text: str, limit: int = 200) -> str:
    """``text`` as one printable line of at most ``limit`` characters, secrets in URLs
    hidden (a receiver's answer, an exception, a bad value quoted back)."""
    return for_terminal(redact_text(text))[:limit]


def parse_url(url: str) -> str:
    """A webhook URL: http or https, with a host, no credentials in it (the secret signs
    deliveries; a password in the URL would be stored and shown)."""
    shown = one_line(url, 200)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as e:
        raise InvalidInput(f"webhook URL {shown!r} does not parse: {e}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(
            f"webhook URL {shown!r} is not http(s)",
            "give an http:// or https:// URL, e.g. https://ci.example/hooks/modelreg",
        )
    if not parts.hostname:
        raise InvalidInput(f"webhook URL {shown!r} has no host")
    if "@" in parts.netloc:
        raise InvalidInput(
            f"webhook URL {one_line(parts.scheme + '://' + parts.netloc.rpartition('@')[2])!r} "
            "carries credentials",
            "leave them out: every delivery is signed with the webhook's secret",
        )
    if parts.fragment or any(c.isspace() for c in url) or len(url) > 2000:
        raise InvalidInput(f"webhook URL {shown!r} has a fragment, a space or is too long")
    return url


def parse_events(events: Iterable[str]) -> tuple[str, ...]:
    """Event kinds, each one of ``EVENTS`` (comma-separated values are split)."""
    kinds = [k.strip() for value in events for k in value.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in EVENTS]
    if unknown:
        raise InvalidInput(
            f"unknown webhook event {one_line(unknown[0], 60)!r}",
            f"choose from: {', '.join(EVENTS)}",
        )
    if not kinds:
        raise InvalidInput("no webhook events given", f"choose from: {', '.join(EVENTS)}")
    return tuple(dict.fromkeys(kinds))


def parse_secret(secret: str) -> str:
    """A secret given by the caller (a receiver that already has one): 16-200 printable
    ASCII characters, no spaces."""
    if not (16 <= len(secret) <= 200) or not all(33 <= ord(c) < 127 for c in secret):
        raise InvalidInput(
            "a webhook secret is 16-200 printable ASCII characters without spaces",
            "leave it out and one is made for you",
        )
    return secret


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(secret: str, delivery_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{delivery_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def verify_signature(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: float = 300.0,
    now: float | None = None,
) -> bool:
    """True when ``headers`` (case-insensitive names) sign ``body`` with ``secret`` and the
    timestamp is within ``tolerance_s`` of now: what a receiver checks before it acts."""
    lower = {k.lower(): v for k, v in headers.items()}
    delivery = lower.get(DELIVERY_HEADER.lower())
    stamp = lower.get(TIMESTAMP_HEADER.lower())
    given = lower.get(SIGNATURE_HEADER.lower())
    if not delivery or not stamp or not given or not stamp.isdigit():
        return False
    if abs((time.time() if now is None else now) - int(stamp)) > tolerance_s:
        return False
    expected = signature(secret, delivery, int(stamp), body)
    return any(hmac.compare_digest(expected, s.strip()) for s in given.split(" "))


def payload(event: Any, delivery_id: str) -> bytes:
    """The body of a delivery of ``event`` (a ``registry.store.Event``)."""
    body = {
        "delivery_id": delivery_id,
        "event": event.kind,
        "event_id": event.id,
        "at": event.at.isoformat(),
        "actor": event.actor,
        "model_id": event.model_id,
        "record_id": event.record_id,
        "target": event.target,
        "why": event.why,
        "detail": event.detail,
    }
    return json.dumps(body, sort_keys=True, default=str, separators=(",", ":")).encode()


def backoff_s(attempts: int, base_s: float = BACKOFF_S) -> float:
    """The wait after the ``attempts``-th failed attempt."""
    return float(min(MAX_BACKOFF_S, base_s * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Attempt:
    """One POST's outcome: the HTTP status (None when none came back) and, unless it was a
    2xx, why it failed (one line)."""

    status: int | None
    error: str | None

    @property
    def delivered(self) -> bool:
        return self.error is None


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DestinationRefused(InvalidInput):
    """A webhook URL whose host is, or resolves to, an address that is not public."""


def parse_host(host: str) -> str:
    """A host name or IP literal as webhook URLs name it (lower case, IPv6 without brackets),
    for the registry's list of allowed hosts."""
    name = host.strip().lower().strip("[]")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    labels = name.rstrip(".").split(".")
    if (
        not name
        or len(name) > 253
        or not all(
            0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
            for label in labels
        )
    ):
        raise InvalidInput(
            f"{one_line(host, 80)!r} is not a host name or IP address",
            "give a host as written in the webhook URL, e.g. ci.internal or 10.0.0.7",
        )
    return name


def _kind(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination (None: it is one)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if embedded is not None:
            return _kind(embedded)
    if address.is_unspecified:
        return "unspecified"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_private:
        return "private"
    if not address.is_global or address.is_multicast:
        return "non-public"
    return None


def destination(url: str, allowed: Sequence[str]) -> list[str]:
    """The addresses a delivery to ``url`` may connect to: every address its host resolves
    to, each checked to be public unless the host is in ``allowed``. ``DestinationRefused``
    names the first that is not; ``InvalidInput`` when the host does not resolve."""
    parts = urlsplit(url)
    host = parse_host(parts.hostname or "")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise InvalidInput(
            f"webhook host {host!r} does not resolve: {one_line(str(e), 120)}"
        ) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    if host in allowed:
        return addresses
    for address in addresses:
        kind = _kind(ipaddress.ip_address(address.split("%", 1)[0]))
        if kind is not None:
            shown = host if host == address else f"{host} ({address})"
            raise DestinationRefused(
                f"webhook host {shown} is a {kind} address; deliveries to it are refused",
                step=Step("allow_webhook_hosts", "permit it by name if it is meant", hosts=[host]),
            )
    return addresses


def check_url(url: str, allowed: Sequence[str]) -> None:
    """At ``webhooks add``: refuse a URL whose host is, or resolves to, a non-public address
    (not allowed by name). A name that does not resolve here is accepted: every attempt
    resolves and checks it again."""
    try:
        destination(url, allowed)
    except DestinationRefused:
        raise
    except InvalidInput:
        pass


class _Pinned(http.client.HTTPConnection):
    """A connection to one checked address, whatever the name resolves to meanwhile, whose
    socket is shut down at ``deadline``; the Host header (and TLS's server name) is the
    URL's host."""

    def __init__(
        self, host: str, port: int | None, address: str, deadline: Any, tls: ssl.SSLContext | None
    ) -> None:
        super().__init__(host, port, timeout=max(0.01, deadline.remaining()))
        self.address, self.deadline, self.tls = address, deadline, tls

    def connect(self) -> None:
        sock = socket.create_connection(
            (self.address, self.port), timeout=max(0.01, self.deadline.remaining())
        )
        self.deadline.attach(sock)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host) if self.tls else sock


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
    allowed: Sequence[str] = (),
) -> Attempt:
    """POST ``body`` to ``url`` within ``timeout_s`` in all; never raises (a refused
    destination or connection, a deadline passed or a non-2xx answer is an ``Attempt`` with
    its error). Only the answer's status is read."""
    from modelreg.remote import Deadline

    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    https = parts.scheme == "https"
    with Deadline(timeout_s, "webhook") as deadline:
        try:
            addresses = destination(url, allowed)
        except InvalidInput as e:
            return Attempt(None, e.message)
        problem = "no address to connect to"
        for address in addresses:
            connection = _Pinned(
                parts.hostname or "",
                parts.port or (443 if https else 80),
                address,
                deadline,
                ssl.create_default_context() if https else None,
            )
            try:
                try:
                    connection.connect()
                except OSError as e:
                    if deadline.expired or isinstance(e, TimeoutError):
                        return Attempt(None, f"timed out after {timeout_s:g} s")
                    problem = one_line(f"{type(e).__name__}: {e}", 300)
                    continue  # nothing was sent: the next address of the name
                connection.request("POST", target, body=body, headers=dict(headers))
                status = connection.getresponse().status
            except (OSError, http.client.HTTPException) as e:
                if deadline.expired or isinstance(e, TimeoutError):
                    return Attempt(None, f"timed out after {timeout_s:g} s")
                return Attempt(None, one_line(f"{type(e).__name__}: {e}", 300))
            finally:
                connection.close()
            if 200 <= status < 300:
                return Attempt(status, None)
            return Attempt(status, f"HTTP {status}")
        return Attempt(None, problem)


def headers_for(secret: str, kind: str, delivery_id: str, body: bytes) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "Content-Type": "application/json",
        "User-Agent": "modelreg-webhooks",
        EVENT_HEADER: kind,
        DELIVERY_HEADER: delivery_id,
        TIMESTAMP_HEADER: str(stamp),
        SIGNATURE_HEADER: signature(secret, delivery_id, stamp, body),
    }
