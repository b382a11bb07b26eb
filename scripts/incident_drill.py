"""The incidents of README's "Deploying, and rolling back at 3 a.m.", as the on-call types
them: promote v1, v2, v3 of acme/chat; v3 is bad (incident 1); then v2 is bad too (incident
2); then, on acme/summarize, the incident's failing sentence is added to the suite before the
rollback, so every earlier record is stale, and the on-call breaks glass (incident 3).
Synthetic records and check results (tests/helpers.py), the real CLI.

Run: .venv/bin/python scripts/incident_drill.py  (tests/test_incident_drill.py runs it and
holds it to its budget: at most 3 commands and 15 lines to read per incident)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
home = tempfile.mkdtemp(prefix="drill-")
os.environ["MODELREG_HOME"] = home
sys.path.insert(0, str(ROOT))
import modelreg  # noqa: E402
from tests.helpers import add_synthetic, record_run  # noqa: E402

db = f"sqlite:///{home}/registry.db"
reg = modelreg.open(db)
for i in (1, 2, 3):
    record_run(reg, add_synthetic(reg, i, "acme/chat"))
    reg.promote(f"acme/chat@v{i}", "cpu", why=f"release v{i}")
for i in (4, 5):
    record_run(reg, add_synthetic(reg, i, "acme/summarize"))
    reg.promote(f"acme/summarize@v{i - 3}", "cpu", why=f"release v{i - 3}")
SUITE = Path(home) / "regress.yaml"
SUITE.write_text(
    "schema_version: 1\nname: summarize-regress\nthresholds: {min_pass_rate: 1.0}\ncases:\n"
    "  - id: inc-9\n    prompt: Summarize the memo in Korean.\n"
    "    expect: {mode: contains, value: 요약}\n"
)


def run(*args: str) -> None:
    print("$ modelreg " + " ".join(args))
    done = subprocess.run(
        [str(ROOT / ".venv/bin/modelreg"), "--db", db, *args],
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.STDOUT,
        env=os.environ | {"COLUMNS": "100"},
    )
    sys.stdout.write(done.stdout)
    print(f"# exit {done.returncode}\n")


print("## incident 1: v3 of acme/chat answers in French\n")
run("rollback", "acme/chat")
run("rollback", "acme/chat", "--apply", "--why", "INC-7: v3 answers in French")
print("## incident 2: v2 drops the system prompt too\n")
run("rollback", "acme/chat", "--apply", "--why", "INC-8: v2 drops the system prompt")
run("rollback", "acme/chat", "--to", "acme/chat@v1", "--apply", "--why", "INC-8")
print("## (then: holding production says what a rollback is left with)\n")
run("hold", "acme/chat@v1", "--why", "INC-8b: v1 too")
print("## incident 3: v2 of acme/summarize; its failing sentence joins the suite first\n")
run("suite", "attach", "acme/summarize", str(SUITE), "--why", "INC-9: the Korean memo")
run("rollback", "acme/summarize")
run(
    "rollback", "acme/summarize", "--to", "acme/summarize@v1", "--force", "--yes",
    "--apply", "--why", "INC-9: v2 drops Korean; v1 not yet run under the new case",
)  # fmt: skip
print("## after: what runs, the gate, the audit trail\n")
run("status", "acme/summarize")
forced_file = "0" * 63 + "4"  # the synthetic file of acme/summarize@v1
run("status", "acme/summarize", "--target", "cpu", "--expect-sha256", forced_file)
run(
    "status", "acme/summarize", "--target", "cpu", "--expect-sha256", forced_file, "--accept-forced"
)
run("history", "acme/summarize", "--limit", "3")
