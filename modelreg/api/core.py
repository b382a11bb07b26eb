"""What every part of the registry API shares: the store, the targets, record look-up."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from modelreg import reasons
from modelreg.api.offline import ManifestOptions, inspect
from modelreg.api.views import targets_output
from modelreg.errors import (
    InvalidInput,
    ModelNotFound,
    ModelregError,
    RecordNotFound,
    TargetNotFound,
)
from modelreg.rules import (
    Deployability,
)
from modelreg.schemas.output import (
    InspectOutput,
    TargetsOutput,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.rows import StoredTarget
    from modelreg.registry.store import Store
    from modelreg.schemas.verification import CheckResult
    from modelreg.targets import Target


_SHA256_RE = re.compile(r"[0-9a-fA-F]{64}")


_MAX_UPLOADED_CHECKS = 100


_RECORD_ID_RE = re.compile(r"r_[0-9a-f]{4,}")


def _check_why(why: str | None, *, required: str | None = None) -> None:
    """A reason given by a person: bounded like every free text; ``required`` names the action
    that cannot go without one."""
    from modelreg.limits import WHY_MAX, check_length

    if required is not None and (not why or not why.strip()):
        raise InvalidInput(f"{required} needs a reason", "give one as `why`")
    if why is not None:
        check_length("`why`", why, WHY_MAX)


def _check_uploaded(checks: Sequence[CheckResult]) -> None:
    """An uploaded run's checks: 1-100, each once, with evidence the pages can show."""
    if not checks:
        raise InvalidInput("a run needs at least one check result")
    if len(checks) > _MAX_UPLOADED_CHECKS:
        raise InvalidInput(f"a run has at most {_MAX_UPLOADED_CHECKS} check results")
    names = [c.check for c in checks]
    if len(set(names)) != len(names):
        raise InvalidInput("each check appears once in a run")
    for c in checks:
        generations = c.evidence.get("generations", [])
        if not isinstance(generations, list) or not all(isinstance(g, dict) for g in generations):
            raise InvalidInput(f"check {c.check}: evidence.generations must be a list of objects")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a private temporary file and a rename."""
    import os
    import tempfile

    directory = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory", "give a file name")
    if not directory.is_dir():
        raise InvalidInput(f"{directory}: no such directory", "create it first")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _unapplied(name: str) -> str | None:
    """Where a target that is not in the registry is defined on this host, if it is: a
    targets file is applied to the registry, never read beside it."""
    from modelreg import config
    from modelreg.targets import read_target_specs

    path = config.targets_file()
    try:
        defined = name in read_target_specs(path)
    except ModelregError:
        return None
    return str(path) if defined else None


def _only_stale(verdict: Deployability) -> bool:
    return bool(verdict.reasons) and all(r.code in reasons.STALE_CODES for r in verdict.reasons)


class Core:
    """The registry's shared state and look-ups (every part of the API extends it)."""

    def __init__(self, store: Store, url: str) -> None:
        self.store = store
        self.url = url

    def all_targets(self) -> dict[str, Target]:
        """Every target: built in, and defined in the registry (``targets apply``)."""
        with self.store.read() as reads:
            return self.targets_with(reads.target_specs())

    def targets_with(self, shared: Sequence[StoredTarget]) -> dict[str, Target]:
        """Every target by name: the built-in ones and the registry's definitions
        (``shared``) — the same for every reader of this registry."""
        from modelreg.targets import all_targets

        return all_targets({t.name: t.spec for t in shared})

    def target(self, name: str) -> Target:
        """A target by name (built in, shared, or local); resolved once per call."""
        from modelreg.limits import TARGET_NAME_MAX, check_length

        check_length("target", name, TARGET_NAME_MAX)
        found = self.all_targets()
        if name not in found:
            raise TargetNotFound(name, sorted(found), _unapplied(name))
        return found[name]

    def targets(self) -> TargetsOutput:
        """Every target: built in, and defined in the registry."""
        return targets_output(self.all_targets(), here=True)

    def get(self, ref: str) -> Record:
        """A record by id or unique id prefix."""
        with self.store.read() as reads:
            return reads.record(ref)

    def record_counts(self) -> dict[str, int]:
        """How many records are active, held and retired (their stored states)."""
        with self.store.read() as reads:
            return reads.record_counts()

    def models(self) -> list[str]:
        """Every model id with at least one record, sorted."""
        with self.store.read() as reads:
            return reads.model_ids()

    def _require_model(self, model_id: str) -> None:
        from modelreg.limits import MODEL_ID_MAX, check_length

        check_length("model id", model_id, MODEL_ID_MAX)
        with self.store.read() as reads:
            if reads.has_model(model_id):
                return
            record = None
            if _RECORD_ID_RE.fullmatch(model_id.strip()):
                try:
                    record = reads.record(model_id)
                except RecordNotFound:
                    record = None
            known = reads.model_ids()
        if record is not None:
            raise InvalidInput(
                f"{model_id!r} is a record id, not a model id",
                f"give its model: {record.model_id}",
            )
        raise ModelNotFound(model_id, known)

    def inspect(
        self, paths: Sequence[str | Path], **options: Unpack[ManifestOptions]
    ) -> InspectOutput:
        """The manifest ``add`` would record (see ``modelreg.inspect``)."""
        built = inspect(paths, **options)  # its own signature refuses an unknown keyword
        return InspectOutput(
            record_id=built.manifest.record_id, manifest=built.manifest.model_dump(mode="json")
        )
