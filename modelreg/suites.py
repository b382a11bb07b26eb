"""Golden suite files: read one (strictly), find the shipped default, add a regression case.

A suite is configuration that gates releases, so reading it is strict: at most 1 MiB, one YAML
document of plain data (``safeyaml``: no anchors or aliases — what a reviewer reads is what
runs), every problem one ``InvalidInput`` line naming the case and the field. The models are in
``schemas/suite.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from modelreg.boundedfile import read_bounded
from modelreg.errors import InvalidArtifact, InvalidInput, did_you_mean
from modelreg.rules import GateTerms, relaxations
from modelreg.safeyaml import load_yaml, read_yaml_file
from modelreg.schemas.manifest import accepted_keys
from modelreg.schemas.suite import Case, CaseResult, Suite, SuiteResult, Thresholds
from modelreg.suite_hygiene import require_consistent
from modelreg.textsafe import for_terminal

MAX_SUITE_BYTES = 1 << 20
DEFAULT_SUITE_PATH = Path(__file__).resolve().parent / "data" / "suites" / "default-chat.yaml"
REGRESSION_SUBSET = "regression"
NOTE_OUTPUT_CHARS = 400


def _read_text(path: Path) -> str:
    data = read_bounded(path, max_bytes=MAX_SUITE_BYTES, what="suite file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArtifact(path, f"suite file is not UTF-8 text (byte {exc.start})") from None


def _accepted(loc: list[str | int]) -> str | None:
    """For a key the suite does not know: what its block accepts instead, after the key it
    was probably meant to be (a misspelling, or a value of one — ``contains`` of ``mode``)."""
    parent = loc[:-1]
    keys = accepted_keys(Suite, parent)
    if keys is None:
        return None
    if len(parent) == 2 and parent[0] == "cases":
        block = "a case"
    else:
        block = next((str(p) for p in reversed(parent) if isinstance(p, str)), "a suite")
    key = str(loc[-1])
    owner = next((k for k, values in keys.items() if key in values), None)
    meant = (
        f"{key!r} is a value of {owner}, not a key ({owner}: {key});"
        if owner
        else did_you_mean(key, keys)
    )
    shown = ", ".join(f"{k} ({', '.join(values)})" if values else k for k, values in keys.items())
    return f"{meant + ' ' if meant else ''}{block} accepts: {shown}"


def _error_line(exc: ValidationError, data: Any, origin: str) -> tuple[str, str | None]:
    """pydantic's first error as one line that names the case (by id) and the field, and for
    a key it does not know, what the block accepts."""
    errors = exc.errors()
    # A key the suite does not know first: a misspelt key is also a missing one.
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = list(error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    hint = _accepted(loc) if error["type"] == "extra_forbidden" and loc else None
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int):
        index = loc[1]
        raw = data.get("cases") if isinstance(data, dict) else None
        item = raw[index] if isinstance(raw, list) and index < len(raw) else None
        case_id = item.get("id") if isinstance(item, dict) else None
        shown = for_terminal(str(case_id)[:64]) if case_id is not None else None
        which = f"case '{shown}' (#{index + 1})" if shown else f"case #{index + 1}"
        field = ".".join(str(p) for p in loc[2:])
        return (
            f"{origin}: {which} field {field}: {message}"
            if field
            else f"{origin}: {which}: {message}"
        ), hint
    field = ".".join(str(p) for p in loc)
    return (f"{origin}: field {field}: {message}" if field else f"{origin}: {message}"), hint


def parse_suite(data: Any, origin: str) -> Suite:
    """Validate untrusted suite data (already parsed); one-line errors."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{origin}: a suite is a YAML mapping with name, thresholds and cases")
    if not data.get("cases"):
        raise InvalidInput(f"{origin}: the suite has no cases")
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(*_error_line(exc, data, origin)) from None
    # What a file says goes through here; a stored suite is read back as it was accepted.
    return require_consistent(suite, origin)


def load_suite(path: Path) -> Suite:
    """Read and validate a suite file."""
    return parse_suite(
        read_yaml_file(path, max_bytes=MAX_SUITE_BYTES, what="suite file"), str(path)
    )


def default_suite() -> Suite:
    """The default chat suite shipped with modelreg (``data/suites/default-chat.yaml``)."""
    return load_suite(DEFAULT_SUITE_PATH)


# ---------------------------------------------------------------------------- regression cases


def regression_case(
    failure: CaseResult,
    *,
    origin: str,
    case_id: str | None = None,
    subset: str = REGRESSION_SUBSET,
) -> Case:
    """A case that asks ``failure``'s prompt again with the same expectation, noting where it
    came from (e.g. ``run 42 of r_0123abcd on cpu``) and the output that failed."""
    if failure.passed:
        raise InvalidInput(f"case {failure.case_id!r} passed in {origin}: nothing to add")
    identity = json.dumps(
        [failure.prompt, failure.expect.model_dump(mode="json"), failure.chat], sort_keys=True
    )
    output = failure.output if failure.output is not None else "(no output)"
    if len(output) > NOTE_OUTPUT_CHARS:
        output = output[:NOTE_OUTPUT_CHARS] + "…"
    return Case(
        id=case_id or f"regression-{hashlib.sha256(identity.encode()).hexdigest()[:8]}",
        subset=subset,
        prompt=failure.prompt,
        expect=failure.expect,
        max_tokens=failure.max_tokens,
        chat=failure.chat,
        note=f"from {origin} (case {failure.case_id}): {failure.classification}: "
        f"{failure.reason}; output {output!r}",
    )


def _case_yaml(case: Case, indent: int) -> str:
    import yaml

    data = case.model_dump(mode="json", exclude_defaults=True)
    data["expect"] = {"mode": case.expect.mode.value} | data["expect"]
    order = ("id", "subset", "prompt", "chat", "max_tokens", "expect", "note")
    data = {key: data[key] for key in order if key in data}
    text = yaml.safe_dump([data], sort_keys=False, allow_unicode=True, width=100)
    return "".join(" " * indent + line for line in text.splitlines(keepends=True))


def _insert_case(text: str, case: Case) -> str | None:
    """``text`` with ``case`` written at the end of its block ``cases:`` list, keeping every
    comment and line as it was; None when the layout is not one this can edit."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return None
    cases = next((v for k, v in root.value if getattr(k, "value", None) == "cases"), None)
    if not isinstance(cases, yaml.SequenceNode) or cases.flow_style or not cases.value:
        return None
    first = cases.value[0].start_mark
    line_start = text.rfind("\n", 0, first.index) + 1
    dash = text.find("-", line_start, first.index)
    if dash < 0:
        return None
    at = cases.value[-1].end_mark.index
    head, tail = text[:at], text[at:]
    if not head.endswith("\n"):
        head += "\n"
    return (
        head + _case_yaml(case, dash - line_start) + tail.lstrip("\n" if not tail.strip() else "")
    )


def append_case(path: Path, case: Case) -> Suite:
    """Add ``case`` to the suite file at ``path`` and return the new suite (whose digest
    differs: runs judged by the old suite become stale). Comments and layout are kept when
    the cases are a block list; otherwise the file is rewritten from the model."""
    import yaml

    text = _read_text(path)
    suite = parse_suite(load_yaml(text, origin=str(path)), str(path))
    for existing in suite.cases:
        if existing.id == case.id:
            raise InvalidInput(f"{path}: case {case.id!r} is already in the suite")
        if (existing.prompt, existing.expect, existing.chat) == (
            case.prompt,
            case.expect,
            case.chat,
        ):
            raise InvalidInput(
                f"{path}: the same prompt and expectation are already case {existing.id!r}"
            )
    wanted = suite.model_copy(update={"cases": [*suite.cases, case]})
    wanted = Suite.model_validate(wanted.model_dump())  # thresholds and ids re-checked
    require_consistent(wanted, str(path))
    new_text = _insert_case(text, case)
    if new_text is None or parse_suite(load_yaml(new_text, origin=str(path)), str(path)) != wanted:
        new_text = yaml.safe_dump(
            wanted.model_dump(mode="json", exclude_defaults=True),
            sort_keys=False,
            allow_unicode=True,
            width=100,
        )
    if len(new_text.encode()) > MAX_SUITE_BYTES:
        raise InvalidInput(f"{path}: the suite would grow past {MAX_SUITE_BYTES} bytes")
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(new_text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return wanted


# ---------------------------------------------------------------------------- gate terms


def _case_digest(case: Case | CaseResult) -> str:
    asked = [
        case.prompt,
        case.chat,
        case.max_tokens,
        case.subset,
        case.expect.model_dump(mode="json"),
    ]
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:16]


def gate_terms(result: SuiteResult, target: str) -> GateTerms:
    """What ``result`` was judged against (``rules.GateTerms``): from the result alone, so a
    run's terms never depend on a suite file that may have changed since."""
    limits: dict[str, float] = {}
    for gate in result.gates:
        key = f"{gate.gate}@{gate.target}" if gate.target is not None else gate.gate
        limits[key] = gate.limit
    return GateTerms(
        suite=f"{result.suite_name} sha256:{result.suite_digest[:16]}",
        target=target,
        passed=result.passed,
        min_pass_rate=result.min_pass_rate,
        subsets={s.subset: s.min_pass_rate for s in result.subsets if s.min_pass_rate is not None},
        limits=limits,
        cases={c.case_id: _case_digest(c) for c in result.cases},
    )


def run_gate_terms(
    evidence: Iterable[tuple[bool, dict[str, Any]]], target: str
) -> GateTerms | None:
    """The terms of a run from its checks' (required, evidence): the first required check
    with a suite result (None: the run judged no suite)."""
    for required, found in evidence:
        if required and isinstance(found.get("suite_result"), dict):
            try:
                result = SuiteResult.model_validate(found["suite_result"])
            except ValidationError:
                return None
            return gate_terms(result, target)
    return None


# ---------------------------------------------------------------------------- versions


def _case_changes(old: Case, new: Case) -> list[str]:
    fields = ("prompt", "subset", "max_tokens", "chat")
    changed = [f for f in fields if getattr(old, f) != getattr(new, f)]
    if old.expect != new.expect:
        changed.append(f"expect {old.expect.describe()} → {new.expect.describe()}")
    return changed


# Thresholds that are not limits of one gate each (the rest are: ``max_…`` / ``min_…``).
_NOT_LIMITS = frozenset(
    {"min_pass_rate", "subsets", "max_pass_rate_drop_vs", "max_subset_pass_rate_drop", "reference"}
)


def suite_terms(suite: Suite) -> GateTerms:
    """The terms a run of ``suite`` is judged by (``gate_terms`` of its result, before any
    run): the same keys, so one rule (``rules.relaxations``) says what weakens a gate."""
    t = suite.thresholds
    limits = {
        name: float(value)
        for name, value in t.model_dump().items()
        if name not in _NOT_LIMITS and value is not None
    }
    limits |= {f"max_pass_rate_drop[{s}]": d for s, d in t.max_subset_pass_rate_drop.items()}
    return GateTerms(
        suite=f"{suite.name} sha256:{suite.digest()[:16]}",
        target="",
        passed=True,
        min_pass_rate=t.min_pass_rate,
        subsets=dict(t.subsets),
        limits=limits,
        cases={c.id: _case_digest(c) for c in suite.cases},
    )


def suite_changes(old: Suite | None, new: Suite | None) -> tuple[list[str], list[str]]:
    """What changed from one version of a model's suite to the next, one line each, and the
    ways the new version weakens the gate — ``rules.relaxations``, the rule a record that
    failed the old version is judged by (a changed case counts: it cannot be told stricter)."""
    if old is None:
        return ([f"suite {new.name} attached ({len(new.cases)} cases)"] if new else []), []
    if new is None:
        line = f"suite {old.name} detached ({len(old.cases)} cases)"
        return [line], [line]
    changes: list[str] = []
    if old.name != new.name:
        changes.append(f"name {old.name} → {new.name}")
    before, after = old.thresholds.model_dump(), new.thresholds.model_dump()
    for key in Thresholds.model_fields:
        if key in ("subsets", "max_subset_pass_rate_drop"):
            for subset in sorted(before[key].keys() | after[key].keys()):
                was, now = before[key].get(subset), after[key].get(subset)
                if was != now:
                    changes.append(f"subset {subset} {key} {was} → {now}")
        elif before[key] != after[key]:
            was, now = before[key], after[key]
            changes.append(
                f"{key} {'none' if was is None else was} → {'none' if now is None else now}"
            )
    old_cases = {c.id: c for c in old.cases}
    new_cases = {c.id: c for c in new.cases}
    changes += [f"case {i} removed" for i in sorted(old_cases.keys() - new_cases.keys())]
    changes += [f"case {i} added" for i in sorted(new_cases.keys() - old_cases.keys())]
    for case_id in sorted(old_cases.keys() & new_cases.keys()):
        changed = _case_changes(old_cases[case_id], new_cases[case_id])
        if changed:
            changes.append(f"case {case_id} changed: {', '.join(changed)}")
    weaker = [r.describe() for r in relaxations(suite_terms(old), suite_terms(new))]
    return changes, weaker
