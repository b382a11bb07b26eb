"""Runs produced elsewhere: uploaded to the team service (counted only when signed by a key the
target trusts), and listed with whether each decides a verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from modelreg import config, rules
from modelreg.api.core import Core, _check_uploaded
from modelreg.api.views import (
    _imported_out,
    deployability_out,
)
from modelreg.errors import (
    InvalidInput,
)
from modelreg.judging import (
    trust_policy,
)
from modelreg.schemas.output import (
    ImportedRunsOutput,
    UploadRunOutput,
    steps_out,
)
from modelreg.steps import Step

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.schemas.verification import CheckResult


class Uploads(Core):
    """Uploaded and imported runs."""

    def upload_run(
        self,
        ref: str,
        target: str,
        checks: Sequence[CheckResult],
        *,
        host: str,
        fingerprint: dict[str, str],
        envelope: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> UploadRunOutput:
        """Keep a verification run produced elsewhere (``verify --sign-key`` on a target host,
        sent over HTTP). It is stored as *uploaded* evidence and counts by the same rule as
        any other run: only when the target trusts verifier keys and ``envelope`` — the run's
        DSSE-signed statement (``attest --json``) — verifies with one of them and covers
        exactly these checks, this fingerprint and this record's files.

        Refused (nothing stored): an envelope whose statement is not this run's (record,
        target, outcomes, fingerprint, files, host, summaries, evidence); on a target that
        trusts verifier keys, an envelope no trusted key signed. Unsigned uploads are kept as
        history, never a pass."""
        from datetime import UTC, datetime

        from sqlalchemy.exc import IntegrityError as RowConflict

        from modelreg.registry.rows import new_run_id
        from modelreg.signing import (
            SKEW,
            SignatureInvalid,
            run_details_problem,
            run_envelope_statement,
            run_statement_problem,
            signed_time_problem,
            verify_envelope,
        )

        the_target = self.target(target)
        with self.store.read() as reads:
            record = reads.record(ref)
            files = {f.path: f.sha256 for f in reads.files([record.id])[record.id]}
        _check_uploaded(checks)
        from modelreg.validators.verify import uploaded_served_problem

        served = uploaded_served_problem(checks, the_target)
        if served is not None:
            raise InvalidInput(
                f"the run's host-compat passed on {target} without what it serves measured: "
                f"{served}",
                "verify on the target's host with this modelreg (it measures the served context)",
            )
        now = datetime.now(UTC)
        future = [c.finished_at for c in checks if c.finished_at.astimezone(UTC) > now + SKEW]
        if future:
            latest = max(future).astimezone(UTC)
            raise InvalidInput(
                f"the run claims a check finished at {latest:%Y-%m-%d %H:%M:%S} UTC, in the "
                "future: refused",
                "upload runs as verify wrote them",
            )
        run_id = new_run_id()
        trust = trust_policy(the_target)  # decides what is refused; judged again below
        signer = None
        if envelope is not None:
            try:
                statement = run_envelope_statement(envelope)
            except SignatureInvalid as exc:
                raise InvalidInput(f"the run's envelope: {exc.message}") from None
            run_id = statement["predicate"]["run_id"]
            uploaded = rules.StoredRun(
                run_id,
                tuple(
                    rules.CheckVerdict(
                        c.check,
                        c.required,
                        c.outcome.value,
                        c.classification,
                        c.finished_at,
                        run_id,
                        fingerprint,
                    )
                    for c in checks
                ),
                "uploaded",
                envelope,
            )
            problem = (
                run_statement_problem(statement, record.id, target, uploaded, files)
                or run_details_problem(statement, host, [(c.summary, c.evidence) for c in checks])
                or signed_time_problem(statement, [c.finished_at for c in checks], now)
            )
            if problem is not None:
                raise InvalidInput(f"the run's envelope is not this run's: {problem}")
            if trust.verifier_keys:
                try:
                    signer = verify_envelope(envelope, dict(trust.verifier_keys))[1]
                except SignatureInvalid as exc:
                    raise InvalidInput(
                        f"the run's signature: {exc.message}",
                        f"{target} counts runs signed by its verifier keys only",
                    ) from None
        actor = actor or config.actor()
        try:
            with self.store.locked(record.model_id) as tx:
                existing = tx.run(run_id)
                if existing is not None:
                    raise InvalidInput(
                        f"run {run_id} is already stored",
                        step=Step("show", ref=existing.record_id),
                    )
                tx.save_run(
                    record,
                    target,
                    checks,
                    host,
                    fingerprint,
                    run_id=run_id,
                    origin="uploaded",
                    origin_detail=f"uploaded by {actor}",
                    envelope=envelope,
                    signer_key_id=signer,
                )
                tx.event(
                    "upload-run",
                    actor,
                    record.id,
                    target,
                    None,
                    {
                        "run_id": run_id,
                        "host": host,
                        "checks": {c.check: c.outcome.value for c in checks},
                        "signed": envelope is not None,
                        "signed_by": signer,
                    },
                )
                verdict = tx.verdict(record.id, target)
                (run,) = [r for r in tx.foreign_runs(record.id) if r.run_id == run_id]
        except RowConflict:
            # The same signed run sent twice at once: one is stored, the other refused.
            raise InvalidInput(f"run {run_id} is already stored") from None
        counted = verdict.run_id == run_id
        steps: list[Step] = []
        if counted:
            message = f"run {run_id} (signed by trusted key {signer}) decides {record.id} there"
        elif not trust.verifier_keys:
            message = (
                f"run {run_id} kept for {record.id} as history: {target} trusts no verifier "
                "keys, so only runs of this registry's own verify count there (add "
                "trust.verifier_keys to its definition to count signed uploads)"
            )
        elif envelope is None:
            message = (
                f"run {run_id} kept for {record.id} as unsigned history: it does not count "
                "towards deployability (sign it on the target host)"
            )
            steps.append(Step("verify", ref=record.id, target=target, sign_key=None))
        else:
            message = f"run {run_id} kept; it does not decide {record.id} there: " + (
                verdict.summary if not verdict.deployable else "a newer run does"
            )
        return UploadRunOutput(
            record_id=record.id,
            run=_imported_out(run, counted),
            deployability=deployability_out(verdict),
            message=message,
            next_steps=steps_out(steps),
        )

    def imported_runs(self, ref: str) -> ImportedRunsOutput:
        """The record's runs this registry's verify did not produce (imported from a file or
        uploaded), newest first, each with whether it is the run that decides deployability
        on its target now."""
        with self.store.read() as reads:
            record = reads.record(ref)
            runs = reads.foreign_runs(record.id)
            targets = sorted({r.target for r in runs})
            verdicts = reads.verdicts([(record.id, t) for t in targets])
        deciding = {t: verdicts[(record.id, t)].run_id for t in targets}
        return ImportedRunsOutput(
            record_id=record.id,
            runs=[_imported_out(r, deciding.get(r.target) == r.run_id) for r in runs],
        )
