"""``verify_record``: run a record's required checks on a target and store every result."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from modelreg import host
from modelreg.fingerprint import runtime_fingerprint
from modelreg.registry.store import Deployability, Record, Registry
from modelreg.schemas.verification import CheckResult
from modelreg.targets import Target
from modelreg.validators.base import CheckContext, VerifyOptions, locate_files
from modelreg.validators.child import RuntimeChild
from modelreg.validators.registry import CHECKS, required_checks


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
    warm_llama_child: RuntimeChild | None = None,
) -> VerifyReport:
    """Run the checks ``record`` needs on ``target``, store them (with evidence), and say
    whether the record is now deployable there.

    ``warm_llama_child`` is a llama.cpp child the caller started early; it is used if a check
    needs one and killed otherwise. Checks marked ``concurrent`` (re-hashing) run in a thread
    beside the others, which mostly wait on a child process.
    """
    try:
        ctx = CheckContext(record, target, locate_files(record, path), options or VerifyOptions())
        if warm_llama_child is not None:
            ctx.shared["warm_llama_child"] = warm_llama_child
        names = required_checks(record.format, target.kind)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="check") as pool:
            background = {
                name: pool.submit(CHECKS[name].run, ctx)
                for name in names
                if getattr(CHECKS[name], "concurrent", False)
            }
            inline = {name: CHECKS[name].run(ctx) for name in names if name not in background}
            results = [background[n].result() if n in background else inline[n] for n in names]
    finally:
        if warm_llama_child is not None:
            warm_llama_child.discard()
    fingerprint = runtime_fingerprint(target, record.manifest.runtime.runtime)
    run_id = registry.save_verification(
        record, target.name, results, actor, host.hostname(), fingerprint
    )
    verdict = registry.deployability(record, target.name, fingerprint)
    return VerifyReport(record, target, run_id, results, verdict)


def verify_stale(
    registry: Registry, target: Target, actor: str, options: VerifyOptions | None = None
) -> list[VerifyReport]:
    """Re-verify every record whose passing evidence on ``target`` came from another runtime."""
    from modelreg import deploy

    return [
        verify_record(registry, record, target, actor, options=options)
        for record in deploy.stale_records(registry, target.name)
    ]
