"""The incident drill of README's 3 a.m. section (scripts/incident_drill.py), run as the on-call
would run it, and held to its budget: two incidents in a row, each in at most 3 commands and
15 lines to read; the second names the record to go back to without a history lookup; a suite
case added mid-incident leaves a rollback possible with the reason shown; a forced rollback
to a stale record is marked, gated and audited; and, on real SmolLM2 builds, a drill under a
suite with ``max_pass_rate_drop_vs: production`` passes a good candidate and fails a bad one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sections() -> dict[str, list[tuple[str, list[str], int]]]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/incident_drill.py")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    sections: dict[str, list[tuple[str, list[str], int]]] = {}
    name = ""
    for block in done.stdout.split("\n\n"):
        lines = [line for line in block.splitlines() if line]
        if not lines:
            continue
        if lines[0].startswith("## "):
            name = lines[0][3:].split(":")[0]
            lines = lines[1:]
            if not lines:
                continue
        assert lines[0].startswith("$ modelreg "), block
        code = int(re.fullmatch(r"# exit (\d+)", lines[-1]).group(1))  # type: ignore[union-attr]
        sections.setdefault(name, []).append((lines[0], lines[1:-1], code))
    return sections


def test_two_incidents_in_a_row_fit_the_budget_and_the_break_glass_is_audited() -> None:
    sections = _sections()
    for incident in ("incident 1", "incident 2"):
        commands = sections[incident]
        read = sum(len(out) for _, out, _ in commands)
        assert len(commands) <= 3 and read <= 15, (incident, len(commands), read)
        assert all(code == 0 for _, _, code in commands)
    # Incident 1: v3 -> v2, v3 held.
    (_, plan, _), (_, applied, _) = sections["incident 1"]
    assert any(line.startswith("candidate   v2 ") for line in plan)
    assert any(line.startswith("held        v3 ") for line in applied)
    # Incident 2: "already rolled back" names v1 and the exact --to command, no history read.
    (_, already, _), (_command, applied, _) = sections["incident 2"]
    assert any(line.startswith("earlier     v1 ") and "usable" in line for line in already)
    assert any("--to acme/chat@v1" in line for line in already)
    assert "history" not in " ".join(c for c, _, _ in sections["incident 2"])
    assert any(line.startswith("production  v1 ") for line in applied), applied
    # Holding production says what a rollback is left with.
    ((_, held, _),) = sections["(then"]
    assert "nothing to roll back to" in held[0] and "rolled back from" in held[0]
    # Incident 3: the suite grew mid-incident; the rollback is still possible, with the reason.
    _attach, plan3, forced = sections["incident 3"]
    assert plan3[2] == 1  # no deployable candidate: exit 1, as an apply would
    shown = "\n".join(plan3[1])
    assert "stale: suite changed" in shown
    assert "--to acme/summarize@v1" in shown and "--force" in shown
    assert forced[2] == 0 and any(line.startswith("FORCED rolled back") for line in forced[1])
    # After: marked in status, refused by the gate unless accepted, in the history.
    status, gate, accepted, history = sections["after"]
    assert "FORCED (STALE)" in "\n".join(status[1])
    assert gate[2] == 1 and "forced" in "\n".join(gate[1])
    assert accepted[2] == 0 and "gate passed (FORCED)" in "\n".join(accepted[1])
    assert "FORCED (break glass)" in "\n".join(history[1])
    # Incident 4: the drill under the guide's relative gate (real builds, real llama.cpp).
    (_good_cmd, good, good_code), (bad_cmd, bad, bad_code) = sections["incident 4"]
    assert good_code == 0 and good[1].startswith("drill       PASSED  "), good
    assert "  answer    safe to apply" in good
    assert any(
        line.startswith("  gate      pass: max_pass_rate_drop:")
        and "for the candidate's own counting run of" in line
        for line in good
    ), good
    assert "--to HuggingFaceTB/SmolLM2-135M-Instruct@v1" in bad_cmd
    assert bad_code == 1 and bad[1].startswith("drill       FAILED  "), bad
    assert "  answer    the candidate fails what failed: water, incident-1" in bad
    assert "to apply:   none — the candidate fails what failed (drill another: --to RECORD)" in bad
