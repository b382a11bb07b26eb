"""``signature``: the record's artifact signature, checked against the keys a target trusts.

Required on a target whose definition says ``trust: {artifact_keys: [...]}``. Passes when a
model-signing bundle kept with the record verifies with one of those keys and lists every file
of the record with the sha256 the record holds. The digest check (which runs in the same
verify, on the same staged bytes) proves the files still have those digests, so the bytes are
read once: the signature check compares digests, it does not hash again.
"""

from __future__ import annotations

from typing import Any

from modelreg.clock import utcnow
from modelreg.errors import ModelregError
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish


def covered(record_digests: dict[str, str], signed: dict[str, str]) -> list[str]:
    """What keeps a signature from covering the record: files it lacks or digests that
    differ (empty: it covers every file of the record)."""
    problems = []
    for path, sha256 in sorted(record_digests.items()):
        if path not in signed:
            problems.append(f"{path} is not signed")
        elif signed[path] != sha256:
            problems.append(f"{path}: signed sha256 {signed[path][:16]}…, record {sha256[:16]}…")
    return problems


class SignatureCheck:
    name = "signature"

    def run(self, ctx: CheckContext) -> CheckResult:
        from modelreg.signing import SignatureInvalid, trusted_keys, verify_artifact_signature

        started = utcnow()
        evidence: dict[str, Any] = {
            "trusted_keys": [k.label for k in ctx.target.trust_artifact_keys]
        }
        try:
            keys = trusted_keys(ctx.target.trust_artifact_keys)
        except ModelregError as exc:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                f"cannot read the keys {ctx.target.name} trusts: {exc.message}",
                evidence,
            )
        evidence["trusted_key_ids"] = sorted(keys)
        bundles = ctx.artifact_signatures
        if not bundles:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                f"the record has no artifact signature; {ctx.target.name} requires one "
                "(add the artifact again with its signature bundle)",
                evidence,
                classification="unsigned",
            )
        record_digests = {
            f.path: f.sha256 for f in ctx.record.manifest.files if f.sha256 is not None
        }
        problems = []
        for bundle in bundles:
            try:
                signed, signer = verify_artifact_signature(bundle, keys)
            except SignatureInvalid as exc:
                problems.append(exc.message)
                continue
            missing = covered(record_digests, signed)
            if missing:
                problems.append(f"signed by {signer[:16]}… over other files: {'; '.join(missing)}")
                continue
            evidence |= {"signer_key_id": signer, "signed_files": sorted(signed)}
            return finish(
                self.name,
                started,
                Outcome.PASS,
                f"signed by trusted key {signer[:16]}… over all {len(record_digests)} file(s)",
                evidence,
            )
        evidence["problems"] = problems
        untrusted = all("not trusted" in p for p in problems)
        return finish(
            self.name,
            started,
            Outcome.FAIL,
            "; ".join(problems),
            evidence,
            classification="untrusted_key" if untrusted else "invalid_signature",
        )
