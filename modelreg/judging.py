"""What a verdict is judged against, besides the runs: which runtime a record's evidence comes
from, which runs a target trusts, and which suite is in force. Pure functions of a target's
definition and a model's attached suite (both stored in the registry): no host fact, no file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import rules
from modelreg.errors import InvalidInput, ModelregError
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.record import Record
    from modelreg.registry.tables import ModelSuiteRow
    from modelreg.schemas.suite import Suite
    from modelreg.targets import Target

RUNTIME_OF_FORMAT = {"gguf": "llama.cpp", "safetensors": "transformers", "neuron": "neuron"}


def runtime_of(record: Record) -> str:
    """The runtime a record's evidence is produced with (its format's; else its manifest's)."""
    return RUNTIME_OF_FORMAT.get(record.format) or record.manifest.runtime.runtime


def trust_policy(target: Target) -> rules.TrustPolicy:
    """Which runs may count on ``target``: this registry's own (no verifier keys), or runs
    signed by one of its verifier keys (stored with its definition); keys that cannot be
    read are a problem that counts nothing."""
    if not target.trust_verifier_keys:
        return rules.TRUST_LOCAL
    from modelreg.signing import trusted_keys

    try:
        return rules.TrustPolicy(verifier_keys=trusted_keys(target.trust_verifier_keys))
    except ModelregError as exc:
        return rules.TrustPolicy(problem=exc.message)


def load_suite_ref(ref: str | Path) -> Suite:
    """A golden suite by file path, or a built-in one by name ("default-chat")."""
    from modelreg.suites import default_suite, load_suite
    from modelreg.targets import BUILTIN_SUITES

    if str(ref) in BUILTIN_SUITES:
        return default_suite()
    return load_suite(Path(ref))


def target_suite(target: Target) -> Suite | None:
    """The suite a target's definition names (stored with it, or built in)."""
    from modelreg.schemas.suite import Suite
    from modelreg.targets import BUILTIN_SUITES

    if target.suite is None:
        return None
    if target.suite_json is not None:
        return Suite.model_validate_json(target.suite_json)
    if target.suite in BUILTIN_SUITES:
        return load_suite_ref(target.suite)
    raise InvalidInput(
        f"target {target.name}: its suite {target.suite} is named by path only",
        step=Step(
            "define_targets",
            "apply the target's file again so the suite is stored with it",
            path=None,
        ),
    )


def suite_in_force(attached: ModelSuiteRow | None, target: Target) -> Suite | None:
    """The suite a verify of a model on ``target`` runs: the one attached to the model, else
    the target's, else None (the golden prompts / Paris check). Raises on an unreadable
    target suite (verify refuses to run)."""
    from modelreg.schemas.suite import Suite

    if attached is not None:
        return Suite.model_validate_json(attached.suite_json)
    return target_suite(target)


def suite_label(suite: Suite | None) -> str | None:
    """How a suite appears in fingerprints: its name and digest (None: no suite attached)."""
    return f"{suite.name} sha256:{suite.digest()[:16]}" if suite is not None else None


# -- where the bytes are: recorded checks, never a probe by the reader ----------------------


@dataclass(frozen=True)
class LocationState:
    """A recorded location and its newest check (None: never checked)."""

    url: str
    added_at: datetime
    added_by: str
    ok: bool | None
    detail: str | None
    host: str | None
    at: datetime | None
    source: str | None

    def describe(self) -> str:
        if self.ok is None:
            return "never checked (check a copy from a host that can read it)"
        assert self.at is not None
        when = f"{self.source} on {self.host}, {self.at:%Y-%m-%d %H:%M} UTC"
        return f"verified by {when}" if self.ok else f"{self.detail} ({when})"


def fetchability(states: Sequence[LocationState]) -> tuple[str | None, str | None]:
    """(the first location whose newest check verified every sha256, None) — or (None, why
    none is): a recorded fact, the same for every reader."""
    for state in states:
        if state.ok:
            return state.url, None
    if not states:
        return None, "no location recorded"
    return None, "; ".join(f"{s.url}: {s.describe()}" for s in states)
