"""What every validator shares: the Protocol, the context it runs in, and result building."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from modelreg.clock import utcnow
from modelreg.errors import InvalidInput
from modelreg.progress import VerifyProgress
from modelreg.record import Record
from modelreg.schemas.suite import Suite
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.targets import Target
from modelreg.validators.llama_child import CHILD_ARGV

if TYPE_CHECKING:
    from modelreg.validators.child import RuntimeChild
    from modelreg.validators.llama_runtime import LlamaReport


@dataclass(frozen=True)
class VerifyOptions:
    # Seconds a runtime check may take; None: the target's default for this artifact
    # (``neuron_fit.recommended_verify_timeout``), set by the API before any check runs.
    timeout_seconds: float | None = None
    context: int | None = None  # tokens for the memory check; default min(4096, trained)
    threads: int | None = None
    max_new_tokens: int = 16
    seed: int = 0
    # argv that starts the llama.cpp child; tests swap in a child that really crashes.
    llama_child_argv: tuple[str, ...] = CHILD_ARGV
    transformers_child_argv: tuple[str, ...] | None = None  # None: the real one
    # Address-space limit for runtime children (None: none); going over is recorded as a
    # crash of the check, never a crash of verify.
    memory_limit_bytes: int | None = None
    # The golden suite the smoke checks run instead of the golden prompts (verify --suite, or
    # the suite attached to the model or target). None: the golden prompts / Paris check.
    suite: Suite | None = None


@dataclass
class CheckContext:
    record: Record
    target: Target
    files: dict[str, Path]  # manifest path -> where it is on this host
    options: VerifyOptions
    # The record's model-signing bundles (the signature check verifies them).
    artifact_signatures: list[dict[str, Any]] = field(default_factory=list)
    # A llama.cpp child the caller started early: the first check that needs one takes it.
    warm_llama_child: RuntimeChild | None = None
    # The llama.cpp child's one report, read by every check that needs it (host-compat's
    # build probe and the generations).
    llama: LlamaReport | None = None
    # Where a check reports what it is doing (suite cases as they are answered); silent by
    # default.
    progress: VerifyProgress = field(default_factory=VerifyProgress)

    @property
    def timeout(self) -> float:
        """Seconds a runtime check may take: as given, else the target kind's default."""
        if self.options.timeout_seconds is not None:
            return self.options.timeout_seconds
        return self.target.verify_timeout_seconds

    @property
    def threads(self) -> int:
        return self.options.threads or os.cpu_count() or 1


class Check(Protocol):
    """A validator: ``run`` never raises for a problem with the artifact or host — it returns
    ``fail`` or ``unavailable`` with the reason and evidence."""

    name: str

    def run(self, ctx: CheckContext) -> CheckResult: ...


def finish(
    check: str,
    started: datetime,
    outcome: Outcome,
    summary: str,
    evidence: dict[str, Any] | None = None,
    classification: str | None = None,
    required: bool = True,
) -> CheckResult:
    return CheckResult(
        check=check,
        required=required,
        outcome=outcome,
        classification=classification,
        summary=summary,
        evidence=evidence or {},
        started_at=started,
        finished_at=utcnow(),
    )


def locate_files(record: Record, path: Path | None) -> dict[str, Path]:
    """Where each of the record's files is on this host.

    Default: where they were at ``add``. ``path`` may name a directory holding them, or — for a
    one-file record — the file itself (a deploy may rename it).
    """
    names = [f.path for f in record.manifest.files]
    if path is None:
        return {name: record.root / name for name in names}
    path = path.expanduser().resolve()
    if path.is_dir():
        return {name: path / name for name in names}
    if len(names) == 1 and path.is_file():
        return {names[0]: path}
    if not path.exists():
        raise InvalidInput(f"`path` {path}: no such file or directory")
    raise InvalidInput(
        f"`path` {path}: record {record.id} has {len(names)} files; give their directory"
    )
