"""Webhook secrets sealed with a key that is not in the registry database.

A webhook's secret signs its deliveries (HMAC-SHA256, the MLflow 3 scheme its receiver checks),
so the sender needs the secret itself: a one-way hash would not sign. What it is kept from is
everyone else who reads the database — every fleet host and laptop with the registry's
credentials (one registry, many readers), and every backup and dump of it — any of whom could
otherwise sign a forged "promote" that a receiver acts on. So the secret is stored sealed
(AES-256-GCM, ``cryptography``'s AESGCM) with a key that only the hosts which send deliveries
hold:

- ``$MODELREG_WEBHOOK_KEY`` (32 bytes, base64), the way to give every sender (each ``serve``
  worker, each ``webhooks deliver`` host) the same key; else
- ``MODELREG_HOME/webhook.key``, made on the first ``webhooks add`` of a host that has no key
  (mode 0600; a key file that others may read or that is not a regular file of this user's is
  refused).

The sealed value names the key it was sealed with (``k_`` + 16 hex of its hash), so a sender
with another key says which one it needs instead of sending a bad signature. The webhook's URL
is the associated data: a sealed secret copied onto another webhook's row (another URL) does
not open. Secrets of webhooks added before sealing (migration 0011) are stored as they were
given and are sealed by the first sender that holds a key.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

PREFIX = "aesgcm1"
KEY_ENV = "MODELREG_WEBHOOK_KEY"
KEY_FILE = "webhook.key"


class NoKey(Exception):
    """This host cannot open (or seal) a webhook secret; the message says what it needs."""


def key_path() -> Path:
    from modelreg import config

    return config.home() / KEY_FILE


def key_id(key: bytes) -> str:
    return "k_" + hashlib.sha256(b"modelreg-webhook-key\0" + key).hexdigest()[:16]


def _decode(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise NoKey(f"{where} is not a webhook key (32 bytes, base64)")
    return key


def host_key(*, create: bool = False) -> bytes:
    """This host's webhook key: ``$MODELREG_WEBHOOK_KEY``, else the key file (made now when
    ``create`` and there is none). ``NoKey`` when there is none or it is unusable."""
    given = os.environ.get(KEY_ENV)
    if given:
        return _decode(given, f"${KEY_ENV}")
    path = key_path()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if not create:
            raise NoKey(
                f"this host has no webhook key (${KEY_ENV}, or {path})",
            ) from None
        return _create(path)
    except OSError as exc:
        raise NoKey(f"cannot read the webhook key {path}: {exc.strerror}") from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            raise NoKey(f"{path} is not a regular file of this user's; refused as a key")
        if found.st_mode & 0o077:
            raise NoKey(f"{path} may be read by others (chmod 600 it); refused as a key")
        return _decode(os.read(fd, 4096).decode("ascii", "replace"), str(path))
    finally:
        os.close(fd)


def _create(path: Path) -> bytes:
    key = secrets.token_bytes(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return host_key()
    try:
        os.write(fd, base64.b64encode(key) + b"\n")
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    finally:
        os.close(fd)
    return key


def _aad(url: str) -> bytes:
    return b"modelreg-webhook\0" + url.encode()


def seal(secret: str, url: str, key: bytes) -> str:
    """``secret`` sealed for the webhook at ``url``: ``aesgcm1:<key id>:<base64>``."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = secrets.token_bytes(12)
    box = AESGCM(key).encrypt(nonce, secret.encode(), _aad(url))
    return f"{PREFIX}:{key_id(key)}:{base64.b64encode(nonce + box).decode()}"


def sealed_with(stored: str) -> str:
    """The id of the key ``stored`` was sealed with."""
    return stored.split(":", 2)[1]


def open_sealed(stored: str, url: str, key: bytes) -> str:
    """The secret of a sealed value; ``NoKey`` when ``key`` is not the one it was sealed with
    or the value (or its URL) was changed."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        prefix, wanted, packed = stored.split(":", 2)
        raw = base64.b64decode(packed, validate=True)
    except ValueError:
        raise NoKey("the stored webhook secret is not a sealed value") from None
    if prefix != PREFIX:
        raise NoKey(f"the stored webhook secret is sealed as {prefix!r}, not {PREFIX!r}")
    if wanted != key_id(key):
        raise NoKey(f"the webhook secret is sealed with key {wanted}; this host has {key_id(key)}")
    try:
        return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(url)).decode()
    except (InvalidTag, ValueError):
        raise NoKey("the sealed webhook secret does not open for this URL (changed?)") from None
