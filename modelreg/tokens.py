"""API tokens of ``modelreg serve``: roles, what each may do, secrets and their digests.

A token is a random 32-byte secret shown once at ``modelreg token create``; the registry keeps
only its sha256. A token's name is the actor of every event it causes.

Roles (not a ladder — a releaser does not produce evidence, a verifier does not move
production):

- ``reader``: every read (status, records, history, diff, fit, targets, rollback plans, gate).
- ``verifier``: reads, adding manifests and locations, uploading verification runs.
- ``releaser``: reads, adding manifests and locations, promote, rollback, hold, release, retire.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from enum import StrEnum

from modelreg.errors import InvalidInput

SECRET_PREFIX = "mr_"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")


class Role(StrEnum):
    READER = "reader"
    VERIFIER = "verifier"
    RELEASER = "releaser"


class Permission(StrEnum):
    READ = "read"
    ADD = "add"  # manifests and locations
    UPLOAD_RUN = "upload-run"
    DECIDE = "decide"  # promote, rollback, hold, release, retire


ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.READER: frozenset({Permission.READ}),
    Role.VERIFIER: frozenset({Permission.READ, Permission.ADD, Permission.UPLOAD_RUN}),
    Role.RELEASER: frozenset({Permission.READ, Permission.ADD, Permission.DECIDE}),
}


def parse_role(role: str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidInput(
            f"role {role!r} is not a role", f"give one of: {', '.join(r.value for r in Role)}"
        ) from None


def parse_token_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"token name {name[:120]!r} must be 1-100 letters, digits, '.', '_', '@' or '-'",
            "name it after who or what uses it, e.g. deploy-pipeline or alice",
        )
    return name


def new_secret() -> str:
    """A fresh token secret: ``mr_`` and 32 random bytes, base64url."""
    raw = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    return SECRET_PREFIX + raw


def secret_digest(secret: str) -> str:
    """What the registry stores and looks tokens up by: the secret's sha256 (hex)."""
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()
