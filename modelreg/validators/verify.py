"""``verify_record``: run a record's required checks on a target and store every result."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelreg import host
from modelreg.registry.store import Deployability, Record, Registry
from modelreg.schemas.verification import CheckResult
from modelreg.targets import Target
from modelreg.validators import CHECKS, required_checks
from modelreg.validators.base import CheckContext, VerifyOptions, locate_files


@dataclass(frozen=True)
class VerifyReport:
    record: Record
    target: Target
    run_id: str
    results: list[CheckResult]
    deployability: Deployability

    @property
    def passed(self) -> bool:
        return self.deployability.deployable


def verify_record(
    registry: Registry,
    record: Record,
    target: Target,
    actor: str,
    *,
    path: Path | None = None,
    options: VerifyOptions | None = None,
) -> VerifyReport:
    """Run the checks ``record`` needs on ``target``, store them (with evidence), and say
    whether the record is now deployable there."""
    ctx = CheckContext(record, target, locate_files(record, path), options or VerifyOptions())
    results = [CHECKS[name].run(ctx) for name in required_checks(record.format, target.kind)]
    run_id = registry.save_verification(record, target.name, results, actor, host.hostname())
    return VerifyReport(
        record, target, run_id, results, registry.deployability(record, target.name)
    )
