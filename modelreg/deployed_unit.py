"""The deployed unit: what a target runs besides the record's bytes — a pinned container image,
the command that launches the runtime (with its flags), the flags it must never get, the build
flags it must have, and the endpoint it serves on.

A record verified under one unit is not known to work under another (seed 004: the same Q8_0
file computed garbage on an AVX1 Xeon with ik_llama.cpp's ``--run-time-repack`` on, and was
fine without it), so ``deployed_unit(target)`` is part of what makes evidence stale, and
``status``, ``rollback`` and ``show`` name it beside the record.

This module also validates the target fields that declare the unit (``endpoint``,
``token_env``, ``require_identity``, ``launch``, ``forbidden_flags``,
``required_build_flags``, ``image``); ``modelreg.targets`` turns a problem into one
``InvalidInput`` line naming the target and the field. Standard library only: the targets file
is read by commands that must start fast.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from modelreg.targets import Target

# What a launch command may ask verify to fill in.
PLACEHOLDERS = {
    "model": "the record's model file (a GGUF's first file; else the directory holding them)",
    "port": "a free TCP port on 127.0.0.1 that verify chose",
    "image": "the target's pinned image reference (only when the target declares image)",
}
MAX_LAUNCH_ARGS = 256
MAX_ARG_CHARS = 4096
MAX_URL_CHARS = 2000
MAX_FLAGS = 100

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_BUILD_FLAG = re.compile(r"([A-Za-z_][A-Za-z0-9_]{0,127})(?:=([A-Za-z0-9_.+-]{1,64}))?")
# The Docker / OCI reference grammar (distribution/reference): an optional registry host (with
# a port), path components of lowercase letters and digits joined by '.', '_', '__' or '-',
# an optional tag, and a digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"(?:{_LABEL}(?:\.{_LABEL})*(?::[0-9]+)?/)"
_IMAGE = re.compile(
    rf"(?P<name>{_DOMAIN}?{_COMPONENT}(?:/{_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z0-9_+.-]+:[A-Za-z0-9=_-]+))?"
)
_SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


# Prefixes of well-known API tokens (OpenAI, Hugging Face, GitHub, GitLab, Slack, AWS,
# modelreg's own) — a token_env that starts with one is the token, not a variable name.
_TOKEN_PREFIX = re.compile(
    r"(?:sk|pk|rk)[-_][A-Za-z0-9]|hf_|gh[pousr]_|github_pat_|glpat-|xox[abpr]-|AKIA[0-9A-Z]{12}|mr_"
)


def looks_like_token(value: str) -> bool:
    """Whether ``value``, though it could name an environment variable, is a token: a known
    token prefix (``hf_``, ``ghp_``, ``sk_``, ``mr_``…) and 20 characters or more in all, or 32
    or more characters mixing lowercase, uppercase and digits (variable names are written in
    one case)."""
    if _TOKEN_PREFIX.match(value) and len(value) >= 20:
        return True
    return (
        len(value) >= 32
        and any(ch.islower() for ch in value)
        and any(ch.isupper() for ch in value)
        and any(ch.isdigit() for ch in value)
    )


class UnitFieldError(ValueError):
    """A deployed-unit field of a target is not acceptable: which field, why, what to do."""

    def __init__(self, field: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class RuntimeFields:
    """The deployed-unit fields of one target, validated and normalised."""

    endpoint: str | None = None
    token_env: str | None = None
    require_identity: bool = True
    launch: tuple[str, ...] = ()
    forbidden_flags: tuple[str, ...] = ()
    required_build_flags: tuple[str, ...] = ()
    image: str | None = None


def _shown(value: str, limit: int = 80) -> str:
    from modelreg.textsafe import for_terminal

    value = for_terminal(value)
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


def check_endpoint(url: str) -> str:
    """An OpenAI-compatible base URL: http(s), a host, no credentials, no query or fragment.
    Returned without a trailing ``/`` or ``/v1`` (verify adds ``/v1/...`` itself)."""
    from modelreg.urls import redact_url

    shown = _shown(redact_url(url))
    if len(url) > MAX_URL_CHARS:
        raise UnitFieldError("endpoint", f"{shown} is longer than {MAX_URL_CHARS} characters")
    if not url.isprintable() or any(ch.isspace() for ch in url):
        raise UnitFieldError("endpoint", f"{shown} contains spaces or control characters")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 — raises ValueError on a port out of range
    except ValueError as exc:
        raise UnitFieldError("endpoint", f"{shown} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise UnitFieldError(
            "endpoint",
            f"{shown} is not an http:// or https:// URL",
            "give the server's base URL, e.g. http://10.0.0.5:8080",
        )
    if "@" in parts.netloc or redact_url(url) != url:
        raise UnitFieldError(
            "endpoint",
            f"credentials inside the URL {shown}",
            "remove them and name an environment variable holding the bearer token in token_env",
        )
    if not parts.hostname:
        raise UnitFieldError("endpoint", f"{shown} has no host")
    if parts.query or parts.fragment:
        raise UnitFieldError(
            "endpoint",
            f"{shown} has a query or fragment; a base URL takes neither",
            "give the server's base URL, e.g. https://llm.example.com",
        )
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base


def check_image(ref: str) -> str:
    """``registry/repo@sha256:<64 hex>`` (a tag before the digest is allowed and ignored by
    the digest); a tag alone moves and is refused, with the pinned form shown."""
    match = _IMAGE.fullmatch(ref)
    if match is None:
        raise UnitFieldError(
            "image",
            f"{_shown(ref)} is not an image reference",
            "give registry/repo@sha256:<64 hex>",
        )
    name, digest = match.group("name"), match.group("digest")
    pinned = f"{name}@sha256:<64 hex>"
    if digest is None:
        moving = f"tag {match.group('tag')!r}" if match.group("tag") else "no tag or digest"
        raise UnitFieldError(
            "image",
            f"{_shown(ref)} is not pinned ({moving}: it can point at other bytes tomorrow)",
            f"pin it by digest: {pinned} (docker buildx imagetools inspect {_shown(ref)[1:-1]} "
            "prints the digest)",
        )
    if not _SHA256_DIGEST.fullmatch(digest):
        raise UnitFieldError(
            "image",
            f"{_shown(ref)} has digest {_shown(digest)}, not sha256 and 64 lowercase hex",
            f"give {pinned}",
        )
    return ref


def placeholders(arg: str) -> list[str]:
    """The placeholder names in one launch argument; ``ValueError`` when the braces are
    malformed (``{{`` and ``}}`` are literal braces)."""
    names = []
    for _literal, field_name, spec, conversion in string.Formatter().parse(arg):
        if field_name is None:
            continue
        if spec or conversion:
            raise ValueError(f"{{{field_name}}} takes no format spec or conversion")
        names.append(field_name)
    return names


def check_launch(argv: Sequence[str], has_image: bool) -> tuple[str, ...]:
    """A launch command: a non-empty list of strings; placeholders only ``{model}``,
    ``{port}`` (both required) and ``{image}`` (with an image); none in the command itself."""
    if not argv:
        raise UnitFieldError(
            "launch",
            "is empty",
            "give [command, args…], e.g. [llama-server, --model, '{model}', --port, '{port}']",
        )
    if len(argv) > MAX_LAUNCH_ARGS:
        raise UnitFieldError("launch", f"has {len(argv)} arguments; at most {MAX_LAUNCH_ARGS}")
    used: set[str] = set()
    for position, arg in enumerate(argv):
        where = f"argument {position} {_shown(arg)}"
        if not arg or len(arg) > MAX_ARG_CHARS or "\0" in arg:
            raise UnitFieldError(
                "launch", f"{where} is empty, longer than {MAX_ARG_CHARS} characters or has NUL"
            )
        try:
            names = placeholders(arg)
        except ValueError as exc:
            raise UnitFieldError(
                "launch",
                f"{where}: malformed placeholder ({exc})",
                "placeholders are {model} and {port}; write a literal brace as {{ or }}",
            ) from None
        for name in names:
            if name not in PLACEHOLDERS or (name == "image" and not has_image):
                known = ", ".join("{" + n + "}" for n in PLACEHOLDERS if n != "image" or has_image)
                raise UnitFieldError(
                    "launch", f"{where}: unknown placeholder {{{name}}}", f"known: {known}"
                )
        if position == 0 and names:
            raise UnitFieldError("launch", f"the command {where} cannot be a placeholder")
        used.update(names)
    missing = [name for name in ("model", "port") if name not in used]
    if missing:
        raise UnitFieldError(
            "launch",
            "has no " + " and no ".join("{" + m + "}" for m in missing) + " placeholder",
            "verify starts the runtime with the record's file ({model}) on a free port ({port})",
        )
    return tuple(argv)


def check_flags(field: str, flags: Sequence[str]) -> tuple[str, ...]:
    if len(flags) > MAX_FLAGS:
        raise UnitFieldError(field, f"has {len(flags)} entries; at most {MAX_FLAGS}")
    for flag in flags:
        if not _FLAG.fullmatch(flag):
            raise UnitFieldError(
                field, f"{_shown(flag)} is not a command-line flag", "e.g. --run-time-repack"
            )
    return tuple(dict.fromkeys(flags))


def check_build_flags(flags: Sequence[str]) -> tuple[str, ...]:
    if len(flags) > MAX_FLAGS:
        raise UnitFieldError(
            "required_build_flags", f"has {len(flags)} entries; at most {MAX_FLAGS}"
        )
    for flag in flags:
        if not _BUILD_FLAG.fullmatch(flag):
            raise UnitFieldError(
                "required_build_flags",
                f"{_shown(flag)} is not NAME or NAME=VALUE",
                "e.g. GGML_USE_IQK_MULMAT=OFF or AVX2=0",
            )
    return tuple(dict.fromkeys(flags))


def check_runtime_fields(
    *,
    endpoint: str | None = None,
    token_env: str | None = None,
    require_identity: bool | None = None,
    launch: Sequence[str] | None = None,
    forbidden_flags: Sequence[str] | None = None,
    required_build_flags: Sequence[str] | None = None,
    image: str | None = None,
) -> RuntimeFields:
    """Validate a target's deployed-unit fields together; raises ``UnitFieldError``."""
    checked_image = check_image(image) if image is not None else None
    checked_launch = check_launch(launch, checked_image is not None) if launch is not None else ()
    base = check_endpoint(endpoint) if endpoint is not None else None
    if base is not None and checked_launch:
        raise UnitFieldError(
            "endpoint",
            "a target declares launch (verify starts the runtime here) or endpoint (verify "
            "checks a running server), not both",
        )
    if token_env is not None:
        # The usual mistake is the token itself in token_env: the value is never quoted.
        if not _ENV_NAME.fullmatch(token_env):
            raise UnitFieldError(
                "token_env",
                f"its value ({len(token_env)} characters, not shown: it may be the token "
                "itself) is not an environment variable name (letters, digits and '_', not "
                "starting with a digit)",
                "name the variable that holds the token, e.g. LLM_API_TOKEN — never the token",
            )
        if looks_like_token(token_env):
            raise UnitFieldError(
                "token_env",
                f"its value ({len(token_env)} characters, not shown) looks like a token, not "
                "the name of the environment variable that holds one",
                "name the variable that holds the token, e.g. LLM_API_TOKEN — never the token",
            )
        if base is None:
            raise UnitFieldError("token_env", "applies to an endpoint; declare endpoint too")
    if require_identity is not None and base is None and not checked_launch:
        raise UnitFieldError("require_identity", "applies to an endpoint or a launch")
    for field, value in (
        ("forbidden_flags", forbidden_flags),
        ("required_build_flags", required_build_flags),
    ):
        if value and not checked_launch:
            raise UnitFieldError(
                field, "applies to a launch (verify checks the runtime it starts); declare launch"
            )
    return RuntimeFields(
        endpoint=base,
        token_env=token_env,
        require_identity=True if require_identity is None else require_identity,
        launch=checked_launch,
        forbidden_flags=check_flags("forbidden_flags", forbidden_flags or ()),
        required_build_flags=check_build_flags(required_build_flags or ()),
        image=checked_image,
    )


def serves_own_runtime(target: Target) -> bool:
    """Whether the target names the runtime that serves (a launch or an endpoint): then that
    runtime is what the generation check judges, not a runtime bundled with modelreg."""
    return bool(target.launch) or target.endpoint is not None


def deployed_unit(target: Target) -> dict[str, str]:
    """What the target runs besides the record's bytes, as fingerprint entries: exactly the
    fields whose change must make evidence gathered on the target stale. Empty for a target
    that declares none (so existing evidence stays current)."""
    unit: dict[str, str] = {}
    if target.image is not None:
        unit["image"] = target.image
    if target.launch:
        unit["launch"] = shlex.join(target.launch)
    if target.forbidden_flags:
        unit["forbidden flags"] = " ".join(sorted(target.forbidden_flags))
    if target.required_build_flags:
        unit["required build flags"] = " ".join(sorted(target.required_build_flags))
    if target.endpoint is not None:
        unit["endpoint"] = target.endpoint
    if serves_own_runtime(target) and not target.require_identity:
        unit["require identity"] = "false"
    return unit
