"""Every error modelreg raises on purpose, in one place.

Each error carries structured fields and a message that quotes the bad value and says what to
do next. The CLI turns them into one line on stderr and an exit code (``exit_code``); nothing
else in the library decides how an error is shown.
"""

from __future__ import annotations

from pathlib import Path


class ModelregError(Exception):
    """Base class. ``exit_code`` follows the CLI contract: 1 check failed, 2 bad input."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInput(ModelregError):
    """A command-line value or an input file is not acceptable (exit 2)."""


class InvalidArtifact(InvalidInput):
    """An artifact file cannot be read as the format it claims to be.

    ``offset`` is the byte offset where reading failed, ``field`` the structure being read.
    """

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

    def __init__(self, source: str, hint: str) -> None:
        super().__init__(f"source {source!r} is not an immutable pin — {hint}")
        self.source = source


class NotFound(InvalidInput):
    """Something named on the command line does not exist (exit 2)."""


class RecordNotFound(NotFound):
    def __init__(self, ref: str) -> None:
        super().__init__(f"record {ref!r} not found — list records with: modelreg list")
        self.ref = ref


class AmbiguousRecord(InvalidInput):
    def __init__(self, ref: str, candidates: list[str]) -> None:
        shown = ", ".join(candidates[:5])
        super().__init__(f"record prefix {ref!r} matches several records ({shown}) — give more")
        self.ref = ref
        self.candidates = candidates


class ModelNotFound(NotFound):
    def __init__(self, model_id: str) -> None:
        super().__init__(f"model {model_id!r} not found — list models with: modelreg list")
        self.model_id = model_id


class TargetNotFound(NotFound):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(
            f"target {name!r} not found (known: {', '.join(known)}) — list them with: "
            "modelreg targets"
        )
        self.name = name


class NotDeployable(ModelregError):
    """An action needs a deployable record and this one is not (exit 1)."""

    exit_code = 1

    def __init__(self, record_id: str, target: str, reasons: list[str]) -> None:
        why = "; ".join(reasons) if reasons else "no passing verification"
        super().__init__(
            f"record {record_id} is not deployable on {target}: {why} — run: "
            f"modelreg verify {record_id} --target {target}"
        )
        self.record_id = record_id
        self.target = target
        self.reasons = reasons


class NoRollbackCandidate(ModelregError):
    """There is nothing earlier to roll back to (exit 1)."""

    exit_code = 1

    def __init__(self, model_id: str, target: str, reason: str) -> None:
        super().__init__(f"no rollback candidate for {model_id} on {target}: {reason}")
        self.model_id = model_id
        self.target = target


class IntegrityError(ModelregError):
    """A file's content does not match the digest it is known by (exit 1: a check failed)."""

    exit_code = 1
