"""Who is asking, and may they: bearer tokens (``Authorization: Bearer <secret>``, or the
dashboard's login cookie) checked against the registry on every request, so a revoked token is
refused from its next request."""

from __future__ import annotations

from dataclasses import dataclass

from modelreg.api import Registry
from modelreg.errors import Forbidden, Unauthorized
from modelreg.steps import Step
from modelreg.tokens import ROLE_PERMISSIONS, Permission, Role

COOKIE = "modelreg_token"
ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Caller:
    """The actor of a request: a token's name and role, or anonymous (public reads)."""

    name: str
    role: Role | None

    @property
    def actor(self) -> str:
        return self.name


def bearer_secret(authorization: str | None) -> str | None:
    """The secret of an ``Authorization: Bearer …`` header (None without one)."""
    if authorization is None:
        return None
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Unauthorized(
            "the Authorization header must be 'Bearer <secret>'",
            step=Step("create_token", "create a token", name=None, role=None),
        )
    return secret.strip()


def authorize(
    registry: Registry, secret: str | None, permission: Permission, *, public_read: bool
) -> Caller:
    """The caller, if it may do ``permission``: ``Unauthorized`` (401) without a valid token
    (reads without one only when the server allows public reads), ``Forbidden`` (403) when
    the token's role does not allow it. A token that is given is always checked."""
    if secret is None:
        if permission is Permission.READ and public_read:
            return Caller(ANONYMOUS, None)
        raise Unauthorized(
            "this request needs a token"
            + ("" if permission is Permission.READ else f" allowed to {permission.value}"),
            "send 'Authorization: Bearer <secret>'",
            step=Step("create_token", "create a token", name=None, role=None),
        )
    token = registry.authenticate(secret)
    role = Role(token.role)
    if permission not in ROLE_PERMISSIONS[role]:
        allowed = sorted(r.value for r, perms in ROLE_PERMISSIONS.items() if permission in perms)
        raise Forbidden(
            f"token {token.name!r} has role {role.value}, which may not {permission.value}",
            f"use a token with role {' or '.join(allowed)}",
            role=role.value,
        )
    return Caller(token.name, role)
