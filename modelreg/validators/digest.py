"""``digest``: every file re-hashed; a mismatch names the file, expected and actual digest."""

from __future__ import annotations

from typing import Any

from modelreg.clock import utcnow
from modelreg.errors import InvalidArtifact
from modelreg.manifests.digest import sha256_files
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish


class DigestCheck:
    name = "digest"
    concurrent = True  # hashing releases the GIL: run beside the runtime checks

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        entries = ctx.record.manifest.files
        files = []
        problems = []
        present = []
        for entry in entries:
            path = ctx.files[entry.path]
            item: dict[str, Any] = {
                "path": entry.path,
                "location": str(path),
                "expected": entry.sha256,
            }
            files.append(item)
            if not path.is_file():
                item["actual"] = None
                problems.append(f"{entry.path}: missing at {path}")
                continue
            size = path.stat().st_size
            if size != entry.bytes:
                item["actual_bytes"] = size
                problems.append(f"{entry.path}: {size} bytes, expected {entry.bytes}")
                continue
            present.append((item, path))
        try:
            digests = sha256_files([p for _, p in present])
        except InvalidArtifact as exc:
            return finish(self.name, started, Outcome.FAIL, str(exc), {"files": files})
        for (item, _), actual in zip(present, digests, strict=True):
            item["actual"] = actual
            if actual != item["expected"]:
                problems.append(f"{item['path']}: sha256 {actual}, expected {item['expected']}")
        if problems:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "; ".join(problems),
                {"files": files},
                classification="mismatch",
            )
        return finish(
            self.name,
            started,
            Outcome.PASS,
            f"{len(entries)} file(s) match their sha256",
            {"files": files},
        )
