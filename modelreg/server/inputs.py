"""What the JSON API accepts: the bodies (each a pydantic model that refuses unknown fields)
and the query and path parameters, each with the bounds the library enforces stated — from
the constants the library checks against (``modelreg.limits`` and the modules beside it), so
that the OpenAPI document says what the handlers do and cannot drift from it
(tests/server/test_conformance.py checks both)."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, cast

from fastapi import Path, Query
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SkipValidation, WithJsonSchema

from modelreg.limits import (
    ACTOR_MAX,
    HANDLE_MAX,
    HOST_MAX,
    LABEL_MAX,
    MAX_LIMITATIONS,
    MODEL_ID_MAX,
    RECORD_REF_MAX,
    TARGET_NAME_MAX,
    WHY_MAX,
)
from modelreg.locations import MAX_URL_CHARS
from modelreg.manifests.fit import MAX_CONTEXT, MAX_SEQUENCES, MAX_WHAT_IF_BITS
from modelreg.schemas.manifest import HANDLE, LABEL, Manifest
from modelreg.schemas.verification import CheckResult
from modelreg.server.http import _RECORD_REF_RE
from modelreg.webhooks import DEFAULT_EVENTS

log = logging.getLogger("modelreg.server")

# Patterns that mean the same to pydantic (Rust's regex), to Python's re and to ECMA-262, the
# JSON Schema dialect (each class spelled out: the engines differ on what ``\s`` holds).
#
# No NUL: PostgreSQL refuses it in text, and it is refused before anything is stored or
# looked up (registry/boundary.py).
NO_NUL = r"^[^\x00]*$"
# A statement (a reason, an owner, a limitation): no NUL, and something other than the white
# space ``str.strip()`` removes.
SAID = r"^[^\x00]*[^\s\x00\x1c-\x1f][^\x00]*$"
RECORD_REF = _RECORD_REF_RE.pattern.join(("^(", ")$"))
# Or a model's handle (``acme/chat@v3``, ``acme/chat@release-14``), where a slash can go: a
# query or a body.
RECORD_OR_HANDLE = "^(" + _RECORD_REF_RE.pattern + "|" + HANDLE + ")$"
SHA256 = r"^[0-9a-fA-F]{64}$"
# What search can find: a record id or a sha256, or a prefix of either, or a part of a model
# id (browse.SEARCH_MIN): the model id grammar's characters.
SEARCH = r"^[A-Za-z0-9._/-]{4,193}$"
# An age before now (``90m``, ``12h``, ``7d``; at most 99,999 of them: ~270 years).
AGE = r"^[0-9]{1,5}[mhd]$"
# URLs: the scheme is stated; the rest of their grammar is checked by the library, whose
# refusal names the part that is wrong (webhooks.parse_url, locations.parse_location).
WEBHOOK_URL = r"^[Hh][Tt][Tt][Pp][Ss]?://"
LOCATION_URL = r"^(file|hf|s3|oci)://"
# The KV cache types fit knows (manifests/fit.py KV_BYTES_PER_ELEMENT).
KVType = Literal["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
WebhookEvent = Literal[
    "add", "verify", "upload-run", "promote", "rollback", "hold", "release", "retire"
]

# -- query and path parameters ---------------------------------------------------------------

ModelQuery = Annotated[
    str,
    Query(min_length=1, max_length=MODEL_ID_MAX, pattern=NO_NUL, description="A model id."),
]
TargetQuery = Annotated[
    str,
    Query(min_length=1, max_length=TARGET_NAME_MAX, pattern=NO_NUL, description="A target."),
]
# Stated here, checked by ``http.record_ref`` (the same pattern), whose refusal says what to give.
_RECORD_REF_SCHEMA = {
    "type": "string",
    "maxLength": HANDLE_MAX,
    "pattern": RECORD_OR_HANDLE,
}
RecordQuery = Annotated[
    str,
    WithJsonSchema(_RECORD_REF_SCHEMA),
    Query(
        description="A record id (r_ and 12 hex digits), a unique prefix of its hex, or the "
        "model's handle: a version (acme/chat@v3) or a promotion's label (acme/chat@release-14)."
    ),
]
RecordPath = Annotated[
    str,
    Path(
        max_length=RECORD_REF_MAX,
        pattern=RECORD_REF,
        description="A record id (r_ and 12 hex digits) or a unique prefix of its hex.",
    ),
]
Sha256Query = Annotated[
    str, Query(min_length=64, max_length=64, pattern=SHA256, description="A file's sha256.")
]
SearchQuery = Annotated[
    str,
    Query(
        min_length=4,
        max_length=MODEL_ID_MAX,
        pattern=SEARCH,
        description="A record id or a file's sha256, or a prefix of either (4 hex digits or "
        "more; 8 or more to match a sha256), or a part of a model id (case-insensitive).",
    ),
]


def _since(value: object) -> object:
    """An RFC 3339 date or date-time (a datetime; a day is its start, UTC) or an age (kept
    as text, for the library's ``parse_since``); refused otherwise, as the schema says."""
    import re

    if not isinstance(value, str):
        return value
    if re.fullmatch(AGE, value):
        return value
    text = value.upper()
    if re.fullmatch(_RFC3339_DATE, text):
        day = date.fromisoformat(text)  # ValueError (a 422) for a day the month has not
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if re.fullmatch(_RFC3339_DATE_TIME, text):
        # A leap second is RFC 3339's; Python's datetime has none: its second before.
        return datetime.fromisoformat(re.sub(r"(T\d\d:\d\d):60", r"\1:59", text))
    raise ValueError("give an RFC 3339 date (2026-11-30) or date-time, or an age (90m, 12h, 7d)")


_RFC3339_DATE = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
_RFC3339_DATE_TIME = (
    _RFC3339_DATE + r"T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})"
)
SinceQuery = Annotated[
    datetime | str,
    BeforeValidator(_since),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date-time"},
                {"type": "string", "format": "date"},
                {"type": "string", "pattern": AGE},
            ],
            "description": "An RFC 3339 date or date-time, or an age: 90m, 12h, 7d.",
        }
    ),
    Query(),
]
ContainsQuery = Annotated[
    str,
    Query(
        min_length=1,
        max_length=MODEL_ID_MAX,
        pattern=NO_NUL,
        description="Models whose id contains it.",
    ),
]
QUANT_NAME_MAX = 16  # the longest llama.cpp type name is 8 (IQ4_NL_4_4 style names: 10)
# webhooks.id is an INTEGER: PostgreSQL refuses a larger value in a query (a 500, not a 404).
WEBHOOK_ID_MAX = 2**31 - 1
WebhookId = Annotated[int, Path(ge=1, le=WEBHOOK_ID_MAX, description="A webhook's id.")]
ReasonQuery = Annotated[str, Query(max_length=WHY_MAX, pattern=NO_NUL, description="Why.")]
ContextQuery = Annotated[
    int, Query(ge=1, le=MAX_CONTEXT, description="Tokens of context per sequence.")
]
ConcurrencyQuery = Annotated[
    int, Query(ge=1, le=MAX_SEQUENCES, description="Sequences served at once.")
]
BitsQuery = Annotated[
    float,
    Query(
        gt=0,
        le=MAX_WHAT_IF_BITS,
        allow_inf_nan=False,
        description="What-if: weights at this many bits per weight, from the parameter "
        "ledger (total × bits ÷ 8), not the artifact's tensors.",
    ),
]
QuantQuery = Annotated[
    str,
    Query(
        max_length=QUANT_NAME_MAX,
        pattern=r"^[A-Za-z0-9_]+$",
        description="What-if: weights at the width of this llama.cpp type (Q4_K_M: 4.5 bits).",
    ),
]


# -- bodies ----------------------------------------------------------------------------------


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


Why = Annotated[str, Field(min_length=1, max_length=WHY_MAX, pattern=SAID)]
OptionalWhy = Annotated[str, Field(max_length=WHY_MAX, pattern=NO_NUL)]
TargetName = Annotated[str, Field(min_length=1, max_length=TARGET_NAME_MAX, pattern=NO_NUL)]


class PromoteInput(_In):
    target: TargetName
    why: OptionalWhy | None = Field(
        default=None, description="Why (needed, not blank, with accept_relaxed_gate)."
    )
    owner: Annotated[str, Field(min_length=1, max_length=ACTOR_MAX, pattern=SAID)] | None = Field(
        default=None, description="Who answers for it."
    )
    limitations: list[Annotated[str, Field(min_length=1, max_length=WHY_MAX, pattern=SAID)]] = (
        Field(
            default_factory=list, max_length=MAX_LIMITATIONS, description="Its known limitations."
        )
    )
    retest_by: date | None = Field(
        default=None, description="Re-test it by this day (UTC); not a day that has passed."
    )
    accept_relaxed_gate: bool = Field(
        default=False,
        description="Accept (with why) passes under a gate weakened after the record failed it.",
    )
    label: str | None = Field(
        default=None,
        max_length=LABEL_MAX,
        pattern=f"^{LABEL}$",
        description="A name for this promotion (release-14): MODEL@LABEL then names the record "
        "until a newer promotion takes it. Not v and digits alone (a version number).",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            # accept_relaxed_gate true needs a why that says something (checked by promote).
            "if": {
                "properties": {"accept_relaxed_gate": {"const": True}},
                "required": ["accept_relaxed_gate"],
            },
            "then": {
                "properties": {"why": {"type": "string", "minLength": 1, "pattern": SAID}},
                "required": ["why"],
            },
        },
    )


class ReasonInput(_In):
    why: Why


class WebhookInput(_In):
    url: Annotated[
        str,
        WithJsonSchema({"type": "string", "maxLength": 2000, "pattern": WEBHOOK_URL}),
        Field(max_length=2000, description="http:// or https://, no credentials or fragment."),
    ]
    events: list[WebhookEvent] = Field(
        default=cast("list[WebhookEvent]", list(DEFAULT_EVENTS)),
        min_length=1,
        max_length=20,
        description="Event kinds (modelreg.webhooks.EVENTS).",
    )
    secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=200,
        pattern=r"^[!-~]+$",
        description="Sign with this secret: printable ASCII without spaces (else a new one, "
        "in the answer only).",
    )


class RollbackInput(_In):
    model: str = Field(min_length=1, max_length=MODEL_ID_MAX, pattern=NO_NUL)
    target: TargetName
    why: Why
    to: Annotated[str, WithJsonSchema(_RECORD_REF_SCHEMA)] | None = Field(
        default=None,
        description="Roll back to this record: an id, a prefix or a handle (MODEL@vN, "
        "MODEL@LABEL).",
    )
    force: bool = Field(
        default=False,
        description="Break glass (with `to`): make it production although it is not deployable, "
        "when all that keeps it out is staleness. Audited, marked forced until a counting run; "
        "the gate passes it only where forced entries are accepted.",
    )


Location = Annotated[
    str,
    WithJsonSchema({"type": "string", "maxLength": MAX_URL_CHARS, "pattern": LOCATION_URL}),
    Field(
        max_length=MAX_URL_CHARS,
        description="file://HOST/absolute/path, hf://org/name@<40-hex commit>, s3://bucket/"
        "prefix or oci://registry/repository[:tag]@sha256:<64 hex>; no credentials, query or "
        "fragment.",
    ),
]


class AddManifestInput(_In):
    """The output of ``modelreg inspect --json`` (``record_id`` and ``manifest``), with the
    locations the artifact's bytes can be fetched from."""

    # Stated as the manifest schema (every count and size a manifest may name, bounded) and
    # validated by ``add_manifest`` as every door validates one, with its one-line refusal.
    manifest: SkipValidation[Manifest]
    record_id: str | None = Field(default=None, max_length=64)
    schema_version: int | None = None
    next_steps: list[dict[str, Any]] = Field(
        default_factory=list, max_length=20, description="Ignored (what inspect suggested)."
    )
    locations: list[Location] = Field(default_factory=list, max_length=100)


class LocationsInput(_In):
    urls: list[Location] = Field(min_length=1, max_length=100)


class RunUpload(_In):
    """One verification run produced on a target host (the checks of ``verify --json``, the
    host and the runtime fingerprint). Stored as uploaded evidence; it counts only when the
    target trusts verifier keys and ``envelope`` — the run's DSSE-signed in-toto statement
    (``verify --sign-key``, shown by ``modelreg attest``) — verifies with one of them and
    covers exactly these checks, this fingerprint and the record's files."""

    target: TargetName
    host: str = Field(min_length=1, max_length=HOST_MAX, pattern=NO_NUL)
    fingerprint: dict[str, str] = Field(default_factory=dict, max_length=200)
    checks: list[CheckResult] = Field(min_length=1, max_length=100)
    envelope: dict[str, Any] | None = Field(default=None)
