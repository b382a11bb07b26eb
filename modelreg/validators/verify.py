"""``run_checks``: run the checks a record needs on a target and return every result.

Storing the results, judging deployability and writing the event are the API's
(``modelreg.api.Registry.verify``), inside the model's lock.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from modelreg.registry.store import Record
from modelreg.schemas.verification import CheckResult
from modelreg.targets import Target
from modelreg.validators.base import CheckContext, VerifyOptions
from modelreg.validators.child import RuntimeChild
from modelreg.validators.registry import CHECKS, required_checks


def run_checks(
    record: Record,
    target: Target,
    files: dict[str, Path],
    options: VerifyOptions | None = None,
    warm_llama_child: RuntimeChild | None = None,
) -> list[CheckResult]:
    """Run the checks ``record`` needs on ``target``, in their order.

    ``files`` maps each manifest path to where it is on this host. ``warm_llama_child`` is a
    llama.cpp child the caller started early; it is used if a check needs one and killed
    otherwise. Checks marked ``concurrent`` (re-hashing) run in a thread beside the others,
    which mostly wait on a child process.
    """
    try:
        ctx = CheckContext(record, target, files, options or VerifyOptions())
        if warm_llama_child is not None:
            ctx.shared["warm_llama_child"] = warm_llama_child
        names = required_checks(record.format, target.kind, target)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="check") as pool:
            background = {
                name: pool.submit(CHECKS[name].run, ctx)
                for name in names
                if getattr(CHECKS[name], "concurrent", False)
            }
            inline = {name: CHECKS[name].run(ctx) for name in names if name not in background}
            return [background[n].result() if n in background else inline[n] for n in names]
    finally:
        if warm_llama_child is not None:
            warm_llama_child.discard()
