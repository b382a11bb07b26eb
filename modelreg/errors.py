"""Every error modelreg raises on purpose, in one place.

Each error carries a stable ``code`` (for ``--json`` and the HTTP API), a ``message`` that quotes
the bad value, a ``hint`` in words when there is something to know, a ``step`` — what to do
next as data (``modelreg.steps``), which the CLI says as a command, the HTTP API as JSON and
``str(error)`` as the Python call — and structured fields. The CLI turns them into one line on
stderr (or a JSON object) and an exit code (``exit_code``); nothing else in the library decides
how an error is shown.

Exit codes: 0 ok; 1 a check failed / not deployable; 2 bad input or usage; 3 internal error;
4 the registry database could not be reached (retry).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg.secrets import redact_secrets
from modelreg.steps import Step, said_in_python

if TYPE_CHECKING:
    from modelreg.reasons import Reason


class ErrorCode(StrEnum):
    INVALID_INPUT = "invalid_input"
    INVALID_ARTIFACT = "invalid_artifact"
    MOVING_REFERENCE = "moving_reference"
    RECORD_NOT_FOUND = "record_not_found"
    AMBIGUOUS_RECORD = "ambiguous_record"
    MODEL_NOT_FOUND = "model_not_found"
    TARGET_NOT_FOUND = "target_not_found"
    NOT_DEPLOYABLE = "not_deployable"
    NO_ROLLBACK_CANDIDATE = "no_rollback_candidate"
    INTEGRITY = "integrity"
    SCHEMA_MISMATCH = "schema_mismatch"
    REGISTRY_UNAVAILABLE = "registry_unavailable"
    INTERNAL = "internal"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FETCHABLE = "not_fetchable"


# A library parameter named in a message: ``sha256``.
_FIELD = re.compile(r"`([a-z_0-9]+)`")
# The parameters library messages name so (the CLI maps each to its flag).
PARAMETERS = (
    "why",
    "to",
    "state",
    "sha256",
    "hold",
    "record",
    "reference",
    "case_id",
    "compile_host",
    "effective_params",
    "effective_source",
    "since",
    "limit",
    "prompts",
    "expect",
    "model_id",
    "with_targets",
    "target",
    "bits",
    "quant",
    "total_params",
    "active_params",
    "params_source",
    "base_model",
    "license_id",
    "source",
    "path",
)


class ModelregError(Exception):
    """Base class. ``exit_code`` follows the CLI contract: 1 check failed, 2 bad input.

    ``message`` and ``hint`` are kept with every secret hidden (``modelreg.secrets``: PEM
    blocks, the signing key, token values, passwords in URLs), so no renderer — the CLI's
    stderr line and JSON error, the HTTP server's error body — can show one.
    """

    exit_code = 2
    code = ErrorCode.INVALID_INPUT

    def __init__(self, message: str, hint: str | None = None, *, step: Step | None = None) -> None:
        message = redact_secrets(message)
        hint = redact_secrets(hint) if hint is not None else None
        super().__init__(message)
        self.message = message
        # ``hint``: what to know, in words (never a command); ``step``: what to do next, as
        # data (``modelreg.steps``), which each caller says its own way.
        self.hint = hint
        self.step = step

    def __str__(self) -> str:
        after = [t for t in (self.hint, said_in_python(self.step)) if t]
        return " — ".join([self.message, "; ".join(after)]) if after else self.message

    def worded(self, names: Mapping[str, str]) -> tuple[str, str | None]:
        """(message, hint) in a caller's words: the library names its parameters as
        ``name`` in backticks (``PARAMETERS``), and each caller says them its way — the CLI
        as its flags (``why`` → ``--why``), the HTTP API as its parameters (the name itself).
        Anything else in backticks is left as it is. The step is the caller's to say."""

        def say(text: str) -> str:
            return _FIELD.sub(lambda m: names.get(m.group(1), m.group(0)), text)

        return say(self.message), say(self.hint) if self.hint is not None else None


class InvalidInput(ModelregError):
    """A command-line value or an input file is not acceptable (exit 2)."""


class InvalidArtifact(InvalidInput):
    """An artifact file cannot be read as the format it claims to be.

    ``offset`` is the byte offset where reading failed, ``field`` the structure being read.
    """

    code = ErrorCode.INVALID_ARTIFACT

    def __init__(
        self, path: Path | str, reason: str, *, offset: int | None = None, field: str | None = None
    ) -> None:
        where = []
        if field:
            where.append(field)
        if offset is not None:
            where.append(f"at offset {offset}")
        location = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{path}: {reason}{location}")
        self.path = Path(path)
        self.reason = reason
        self.offset = offset
        self.field = field


class MovingReference(InvalidInput):
    """A source was given as a branch, tag, bare name or other moving reference."""

    code = ErrorCode.MOVING_REFERENCE

    def __init__(self, source: str, hint: str) -> None:
        super().__init__(f"source {source!r} is not an immutable pin", hint)
        self.source = source


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known names closest to ``name``, compared case-insensitively, as a hint."""
    by_folded: dict[str, str] = {}
    for k in known:
        by_folded.setdefault(k.casefold(), k)
    folded = name.casefold()
    if folded in by_folded:
        return f"did you mean {by_folded[folded]!r}?"
    close = difflib.get_close_matches(folded, list(by_folded), n=3, cutoff=0.6)
    if not close:
        return None
    return "did you mean " + " or ".join(repr(by_folded[c]) for c in close) + "?"


def _with(suggestion: str | None, hint: str) -> str:
    return f"{suggestion} {hint}" if suggestion else hint


class NotFound(InvalidInput):
    """Something named on the command line does not exist (exit 2)."""


class RecordNotFound(NotFound):
    code = ErrorCode.RECORD_NOT_FOUND

    def __init__(self, ref: str, hint: str | None = None, *, step: Step | None = None) -> None:
        super().__init__(
            f"record {ref!r} not found",
            hint,
            step=step or (None if hint else Step("records", "list records")),
        )
        self.ref = ref


class AmbiguousRecord(InvalidInput):
    code = ErrorCode.AMBIGUOUS_RECORD

    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5])
        super().__init__(
            f"record prefix {ref!r} matches several records ({shown})", "give more characters"
        )
        self.ref = ref
        self.candidates = candidates


class ModelNotFound(NotFound):
    code = ErrorCode.MODEL_NOT_FOUND

    def __init__(self, model_id: str, known: Iterable[str] = (), hint: str | None = None) -> None:
        super().__init__(
            f"model {model_id!r} not found",
            hint or did_you_mean(model_id, known),
            step=None if hint else Step("status", "list models"),
        )
        self.model_id = model_id


class TargetNotFound(NotFound):
    code = ErrorCode.TARGET_NOT_FOUND

    def __init__(self, name: str, known: list[str], unapplied: str | None = None) -> None:
        suggestion = did_you_mean(name, known)
        hint = _with(suggestion, f"known: {', '.join(known)}")
        step = Step("targets", "list them")
        if unapplied is not None:
            # Defined in this host's targets file, which no verdict reads: it must be applied.
            hint = f"it is defined in {unapplied}, not in the registry"
            step = Step("define_targets", "apply it", path=unapplied)
        super().__init__(f"target {name!r} not found", hint, step=step)
        self.name = name
        self.known = known
        self.unapplied = unapplied


class NotDeployable(ModelregError):
    """An action needs a deployable record and this one is not (exit 1).

    ``reasons`` are the rule module's structured reasons (``modelreg.reasons.Reason``).
    """

    exit_code = 1
    code = ErrorCode.NOT_DEPLOYABLE

    def __init__(self, record_id: str, target: str, reasons: Sequence[Reason]) -> None:
        why = "; ".join(r.message for r in reasons) if reasons else "no passing verification"
        step = next((r.step for r in reasons if r.step), None)
        super().__init__(
            f"record {record_id} is not deployable on {target}: {why}",
            step=step or Step("verify", ref=record_id, target=target),
        )
        self.record_id = record_id
        self.target = target
        self.reasons = list(reasons)


class NoProduction(ModelregError):
    """Nothing is production for a model on a target (exit 1): nothing to deploy."""

    exit_code = 1
    code = ErrorCode.NOT_DEPLOYABLE

    def __init__(self, model_id: str, target: str) -> None:
        super().__init__(
            f"nothing is production for {model_id} on {target}",
            step=Step("promote", "promote a verified record", ref=None, target=target),
        )
        self.model_id = model_id
        self.target = target


class NoRollbackCandidate(ModelregError):
    """There is nothing earlier to roll back to (exit 1)."""

    exit_code = 1
    code = ErrorCode.NO_ROLLBACK_CANDIDATE

    def __init__(
        self,
        model_id: str,
        target: str,
        reason: str,
        hint: str | None = None,
        *,
        step: Step | None = None,
    ) -> None:
        super().__init__(
            f"no rollback candidate for {model_id} on {target}: {reason}", hint, step=step
        )
        self.model_id = model_id
        self.target = target

    @classmethod
    def of_plan(cls, plan: Any) -> NoRollbackCandidate:
        """The refusal of a plan whose decision is ``no_candidate`` (``RollbackOutput``): what
        an adapter raises where "no candidate" must be an error (the CLI's exit 1, HTTP 409)."""
        error = cls.__new__(cls)
        step = plan.next_steps[0].step() if plan.next_steps else None
        ModelregError.__init__(error, plan.message, step=step)
        error.model_id, error.target = plan.model_id, plan.target
        return error


class IntegrityError(ModelregError):
    """A file's content does not match the digest it is known by (exit 1: a check failed)."""

    exit_code = 1
    code = ErrorCode.INTEGRITY


class SchemaMismatch(ModelregError):
    """The registry's schema is older or newer than this modelreg (exit 2)."""

    code = ErrorCode.SCHEMA_MISMATCH


class RegistryUnavailable(ModelregError):
    """The registry database could not be reached: refused, timed out, unknown host (exit 4).

    Nothing was changed; the same command can be retried.
    """

    exit_code = 4
    code = ErrorCode.REGISTRY_UNAVAILABLE


class Unauthorized(ModelregError):
    """An HTTP request carried no token, or one that is unknown or revoked (HTTP 401)."""

    code = ErrorCode.UNAUTHORIZED


class Forbidden(ModelregError):
    """A token's role does not allow the action (HTTP 403). ``role`` is the token's role."""

    code = ErrorCode.FORBIDDEN

    def __init__(self, message: str, hint: str | None = None, *, role: str | None = None) -> None:
        super().__init__(message, hint)
        self.role = role


class NotFetchable(ModelregError):
    """No location of a record gave every file with the right digest (exit 1): nothing was
    written to the destination. ``problems``: what each location gave (``locations.Skipped``)."""

    exit_code = 1
    code = ErrorCode.NOT_FETCHABLE
    problems: list[Any] = []  # noqa: RUF012 - replaced per instance by the fetch that raises
