"""The incident drill of README's "Deploying, and rolling back at 3 a.m.": promote A, B, C;
C is bad; then B is bad too. Synthetic records and check results (tests/helpers.py), the real
CLI. Run: .venv/bin/python scripts/incident_drill.py"""

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
ids = {}
for i, name in ((1, "A"), (2, "B"), (3, "C")):
    ids[name] = add_synthetic(reg, i, "acme/chat-7b")
    record_run(reg, ids[name])


def run(*args: str) -> None:
    print("$ modelreg " + " ".join(args))
    done = subprocess.run(
        [str(ROOT / ".venv/bin/modelreg"), "--db", db, *args],
        capture_output=True,
        text=True,
        env=os.environ | {"COLUMNS": "100"},
    )
    sys.stdout.write(done.stdout + done.stderr)
    print(f"# exit {done.returncode}\n")


for name in "ABC":
    reg.promote(ids[name], "cpu", why=f"release {name}")
print("# A, B, C promoted in turn; C is bad:")
run("rollback", "acme/chat-7b", "--target", "cpu")
run("rollback", "acme/chat-7b", "--target", "cpu", "--apply", "--why", "INC-7: C answers in French")
print("# then B turns out bad too:")
run("hold", ids["B"], "--why", "INC-8: B drops the system prompt")
run("rollback", "acme/chat-7b", "--target", "cpu")
run("rollback", "acme/chat-7b", "--target", "cpu", "--apply", "--why", "INC-8")
run("rollback", "acme/chat-7b", "--target", "cpu", "--apply", "--why", "INC-8 (pressed twice)")
run("status", "--check")
