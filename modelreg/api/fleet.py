"""The fleet's facts: what a host of a target runs (``host report``), recorded so that every
reader judges evidence against the same runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import config
from modelreg.api.core import Core
from modelreg.api.locations import Locations
from modelreg.api.status import Status
from modelreg.errors import InvalidInput
from modelreg.schemas.output import (
    DeployOutput,
    FetchedFileOut,
    HostReportOutput,
    RuntimeCheckOut,
    RuntimeReportOut,
)

if TYPE_CHECKING:
    from modelreg.registry.store import Store

RUNTIMES_OF_KIND = {"cpu": ("llama.cpp", "transformers"), "neuron": ("neuron",)}


class Fleet(Core):
    """What the hosts of a target run, as they report it; what a deploy host does before its
    model server starts. Collaborators: ``status`` (production and the gate) and
    ``locations`` (the fetch)."""

    def __init__(self, store: Store, url: str, *, status: Status, locations: Locations) -> None:
        super().__init__(store, url)
        self._status = status
        self._locations = locations

    def host_report(
        self, target: str, *, runtime: str | None = None, actor: str | None = None
    ) -> HostReportOutput:
        """Record what this host, one of ``target``'s hosts, runs for each inference runtime
        installed here (``runtime``: that one only): package versions, the llama.cpp build's
        digest, CPU flags, and the libraries the target's evidence names. A report that differs
        from the runtime a record's evidence was produced under makes that evidence stale for
        every reader of the registry, naming this host and what changed — the way a fleet says
        "this host was upgraded" without a verify. Cheap: nothing is loaded."""
        from modelreg import host
        from modelreg.fingerprint import (
            LIB_PREFIX,
            describe_change,
            observed_runtime,
            runtime_installed,
        )
        from modelreg.registry.verdicts import latest_reports, reported_libraries
        from modelreg.targets import for_host

        the_target = for_host(self.target(target))
        hostname = host.hostname()
        if not the_target.is_local:
            hosts = ", ".join(the_target.hosts) or "none declared"
            raise InvalidInput(
                f"this host ({hostname}) is not one of {target}'s hosts ({hosts}): what it runs "
                f"says nothing of {target}",
                f"run it on a host of {target}, or add this host to its hosts and apply it",
            )
        known = RUNTIMES_OF_KIND[the_target.kind]
        if runtime is not None and runtime not in known:
            raise InvalidInput(
                f"runtime {runtime!r}: {target} is a {the_target.kind} target ({', '.join(known)})"
            )
        names = [runtime] if runtime is not None else list(known)
        with self.store.read() as reads:
            before = latest_reports(reads, target)
            named = {name: reported_libraries(reads, target, name) for name in names}
        found: list[tuple[str, dict[str, str]]] = []
        for name in names:
            # Every library a host of the target reported, not only the newest report's:
            # another host's report without it must not hide it from this one.
            libraries = named[name]
            observed = observed_runtime(the_target, name, libraries=libraries)
            if not runtime_installed(name, observed):
                if runtime is not None:
                    raise InvalidInput(
                        f"{runtime} is not installed on this host: nothing to report"
                    )
                continue
            found.append((name, observed))
        if not found:
            raise InvalidInput(
                f"no inference runtime of a {the_target.kind} target ({', '.join(known)}) is "
                f"installed on this host ({hostname}): nothing to report"
            )
        actor = actor or config.actor()
        with self.store.read() as reads:
            productions = reads.productions(None, target)
            was = reads.verdicts([(p.record_id, target) for p in productions])
        with self.store.write() as tx:
            for name, observed in found:
                tx.record_runtime_report(target, name, hostname, observed, "report", actor)
        with self.store.read() as reads:
            now = reads.verdicts([(p.record_id, target) for p in productions])
        stale = [
            f"{p.model_id}: {p.record_id}"
            for p in productions
            if now[(p.record_id, target)].stale and not was[(p.record_id, target)].stale
        ]
        reports = []
        for name, observed in found:
            previous = before.get(name)
            changes = None
            if previous is not None:
                old = {
                    k: v
                    for k, v in previous.fingerprint.items()
                    if k in observed or not k.startswith(LIB_PREFIX)
                }
                if old != observed:
                    changes = describe_change(old, observed, target)
            reports.append(
                RuntimeReportOut(
                    runtime=name,
                    fingerprint=observed,
                    previous=previous.describe() if previous else None,
                    changes=changes,
                )
            )
        changed = [r for r in reports if r.changes]
        if stale:
            message = (
                f"{hostname} runs another runtime than the evidence of {', '.join(stale)} on "
                f"{target}: stale for every reader until verified again"
            )
        elif changed:
            message = (
                f"{hostname} reported a changed runtime on {target}; no production evidence "
                "there expired"
            )
        else:
            message = (
                f"{hostname} runs what {target}'s evidence was produced under: nothing expired"
            )
        return HostReportOutput(
            target=target, host=hostname, reports=reports, stale=stale, message=message
        )

    def deploy(
        self,
        model_id: str,
        target: str,
        to: Path,
        *,
        check_runtime: bool = False,
        accept_forced: bool = False,
        progress: Callable[[int], None] | None = None,
        on_start: Callable[[str, int, int], None] | None = None,
    ) -> DeployOutput:
        """What a deploy host does before its model server starts (an init container, a
        systemd ``ExecStartPre``): take the production record of ``model_id`` on ``target``,
        fetch its files into ``to`` from its recorded locations (every sha256 checked; nothing
        left unless every file matched; a directory already holding exactly those bytes is
        kept), then pass the deploy gate for each file — production may have moved while the
        bytes arrived. ``deployed`` says start; anything else says do not.

        ``check_runtime``: also compare this host's runtime with the one production's evidence
        was produced under (this host's own facts: said beside the verdict, never part of it).
        ``accept_forced``: take a production record a break-glass rollback forced there while it
        is only stale (as the target's ``accept_forced`` does; ``gate``)."""
        from modelreg import rules
        from modelreg.errors import NoProduction, NotDeployable

        self._require_model(model_id)
        accepted = accept_forced or self.target(target).accept_forced
        status = self._status.status(model_id, target)
        if not status.entries:
            raise NoProduction(model_id, target)
        (entry,) = status.entries
        record_id = entry.record.record_id
        verdict = entry.deployability
        codes = [r.code for r in verdict.reasons]
        if not verdict.deployable and not rules.gate_passes_forced(
            verdict.deployable, codes, bool(entry.forced), accepted
        ):
            from modelreg.reasons import Reason, ReasonCode

            raise NotDeployable(
                record_id,
                target,
                [
                    Reason(ReasonCode(r.code), r.message, r.next.step() if r.next else None)
                    for r in entry.deployability.reasons
                ],
            )
        to = to.expanduser().absolute()
        with self.store.read() as reads:
            files = reads.files([record_id])[record_id]
        already = _holds_exactly(to, [(f.path, f.bytes, f.sha256) for f in files])
        if already:
            fetched = [
                FetchedFileOut(path=f.path, bytes=f.bytes, sha256=f.sha256, source=f"file://{to}")
                for f in files
            ]
        else:
            got = self._locations.fetch(record_id, to, progress=progress, on_start=on_start)
            fetched = got.files
        # Gated after the bytes arrived: what is kept is what was production when it was done.
        gates = self._status.gates(
            model_id, target, [f.sha256 for f in fetched], accept_forced=accept_forced
        )
        failed = next((g for g in gates if not g.passed), None)
        gate = failed or gates[0]
        runtime_check = self._runtime_check(record_id, target) if check_runtime else None
        deployed = failed is None and (runtime_check is None or runtime_check.matches)
        if failed is not None:
            message = f"gate FAILED after the fetch: {failed.reasons[0].message}"
        elif runtime_check is not None and not runtime_check.matches:
            message = (
                f"{record_id} is production and its bytes are in {to}, but this host runs "
                f"another runtime than its evidence: {runtime_check.changes}"
            )
        else:
            message = (
                f"{record_id} (production for {model_id} on {target}) is in {to}: "
                f"{len(fetched)} file(s), every sha256 checked, gate passed"
            )
        return DeployOutput(
            model_id=model_id,
            target=target,
            record_id=record_id,
            to=str(to),
            files=fetched,
            already_there=already,
            gate=gate,
            runtime_check=runtime_check,
            deployed=deployed,
            message=message,
        )

    def _runtime_check(self, record_id: str, target: str) -> RuntimeCheckOut:
        """This host's runtime against the one the record's counting run on ``target`` was
        produced under (the libraries it names, where they are here)."""
        from modelreg.fingerprint import (
            as_reported,
            describe_change,
            inference_view,
            libraries_of,
            observed_runtime,
            runtime_part,
        )
        from modelreg.judging import runtime_of
        from modelreg.targets import for_host

        with self.store.read() as reads:
            record = reads.record(record_id)
            verdict = reads.verdict(record_id, target)
            run = reads.run_checks(verdict.run_id) if verdict.run_id else []
        evidence = runtime_part(run[0].fingerprint) if run else {}
        here = observed_runtime(
            for_host(self.target(target)), runtime_of(record), libraries=libraries_of(evidence)
        )
        shaped = inference_view(as_reported(evidence, here))
        wanted = inference_view(evidence)
        if shaped == wanted:
            return RuntimeCheckOut(matches=True)
        return RuntimeCheckOut(matches=False, changes=describe_change(wanted, shaped, target))


def _holds_exactly(directory: Path, files: list[tuple[str, int, str]]) -> bool:
    """Whether ``directory`` holds exactly these files (path, bytes, sha256), every sha256
    read: a deploy run again over what it fetched keeps it."""
    import hashlib

    if not directory.is_dir():
        return False
    present = sorted(
        str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file() or p.is_symlink()
    )
    if present != sorted(path for path, _, _ in files):
        return False
    for path, size, sha256 in files:
        target = directory / path
        if target.is_symlink() or target.stat().st_size != size:
            return False
        digest = hashlib.sha256()
        with open(target, "rb") as fh:
            while chunk := fh.read(4 << 20):
                digest.update(chunk)
        if digest.hexdigest() != sha256:
            return False
    return True
