from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO
from tests.helpers import write_gguf


def _sizes(report: dict, key: str) -> dict:  # type: ignore[type-arg]
    (line,) = [line for line in report["lines"] if line["key"] == key]
    return line["sizes"]  # type: ignore[no-any-return]


def test_fit_reports_the_reference_kv_example(cli, tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "llama-8b-shape.gguf",
        {"token_embd.weight": (16, 8)},
        metadata={
            "llama.block_count": 32,
            "llama.embedding_length": 4096,
            "llama.attention.head_count": 32,
            "llama.attention.head_count_kv": 8,
            "llama.context_length": 131072,
        },
    )
    code, out, _ = cli("add", path, "--model-id", "t/llama-shape", "--license", "mit")
    record = out.strip()
    code, out, _ = cli("fit", record, "--context", "8192", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "fits"
    kv = _sizes(report, "kv_cache")
    assert kv["bytes"] == 1_073_741_824 and kv["GiB"] == 1.0 and kv["GB"] == 1.074
    code, out, _ = cli("fit", record, "--context", "8192", "--concurrency", "4", "--json")
    assert _sizes(json.loads(out), "kv_cache")["GiB"] == 4.0
    code, out, _ = cli("fit", record, "--context", "8192")
    assert "1,073,741,824" in out and "verdict: fits" in out


def test_fit_does_not_fit_is_exit_1(cli, smollm2: Path, tmp_path: Path, monkeypatch) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text("targets:\n  tiny:\n    cpu_flags: [avx2]\n    memory_gib: 0.25\n")
    assert cli("targets", "apply", spec)[0] == 0
    record = cli("add", smollm2, "--model-id", "a/b")[1].strip()
    code, out, _ = cli("fit", record, "--target", "tiny", "--context", "8192", "--json")
    assert code == 1 and json.loads(out)["verdict"] == "does not fit"


def test_fit_reads_a_reference_manifest_and_says_unknown(cli) -> None:
    code, out, _ = cli("fit", REPO / "manifests" / "qwen3-30b-a3b.json", "--json")
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "unknown"
    assert "tensor bytes unknown" in report["reasons"]
    assert _sizes(report, "kv_cache")["bytes"] == 2 * 48 * 4 * 128 * 4096 * 2


def test_fit_bad_input_is_exit_2(cli, smollm2: Path) -> None:
    record = cli("add", smollm2, "--model-id", "a/b")[1].strip()
    for args in (("--context", "-1"), ("--target", "nowhere"), ("--kv-dtype", "q3_z")):
        code, _, err = cli("fit", record, *args)
        assert code == 2 and "Traceback" not in err, args


def test_fit_of_a_manifest_file_sees_shared_targets(cli, tmp_path: Path) -> None:
    shared = tmp_path / "shared.yaml"
    shared.write_text("targets:\n  edge-box:\n    cpu_flags: [avx2]\n    memory_gib: 0.25\n")
    assert cli("targets", "add", shared)[0] == 0
    manifest = REPO / "manifests" / "qwen3-30b-a3b.json"
    code, out, err = cli("fit", manifest, "--target", "edge-box", "--json")
    assert code == 1, err  # judged against the shared target, not "target not found" (2)
    fit = json.loads(out)
    assert fit["target"] == "edge-box" and fit["verdict"] in {"does not fit", "unknown"}


def _no_hashing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import modelreg.manifests.build as build

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("fit of a path hashed the artifact")

    monkeypatch.setattr(build, "sha256_files", refuse)
    monkeypatch.setattr(build, "sha256_files_and_regions", refuse)


def _same_report(path_fit: dict, record_fit: dict) -> None:  # type: ignore[type-arg]
    assert path_fit["verdict"] == record_fit["verdict"]
    assert [(x["key"], x["sizes"]) for x in path_fit["lines"]] == [
        (x["key"], x["sizes"]) for x in record_fit["lines"] if x["key"] != "measured"
    ]


def test_fit_of_a_gguf_path_reads_it_without_hashing(cli, smollm2: Path, monkeypatch) -> None:
    record = cli("add", smollm2, "--model-id", "a/b")[1].strip()
    record_fit = json.loads(cli("fit", record, "--context", "8192", "--json")[1])
    _no_hashing(monkeypatch)
    code, out, err = cli("fit", smollm2, "--context", "8192", "--json")
    assert code == 0, err
    path_fit = json.loads(out)
    assert path_fit["record"] == str(smollm2) and path_fit["verdict"] == "fits"
    _same_report(path_fit, record_fit)
    code, out, _ = cli("fit", smollm2, "--context", "8192")
    assert code == 0 and "verdict: fits" in out


def test_fit_of_a_bundle_directory(cli, tmp_path: Path, monkeypatch) -> None:
    from tests.manifests.test_neuron_bundles import _slim_bundle

    bundle = _slim_bundle(tmp_path / "bundle-dir")
    record = cli("add", bundle, "--model-id", "t/gemma-4-bundle", "--license", "gemma")[1]
    record_fit = json.loads(cli("fit", record.strip(), "-t", "inf2.xlarge", "--json")[1])
    _no_hashing(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("fit", "./bundle-dir", "-t", "inf2.xlarge", "--json")
    assert code == 0, err
    path_fit = json.loads(out)
    assert path_fit["record"] == "./bundle-dir" and path_fit["verdict"] == "fits"
    _same_report(path_fit, record_fit)
    code, _, err = cli("fit", "./bundle-dir")  # a cpu target: one line, exit 2
    assert code == 2 and err.startswith("error: ./bundle-dir is a neuron artifact")


def test_fit_of_a_checkpoint_directory(cli, smollm2_st: Path, monkeypatch) -> None:
    record = cli("add", smollm2_st, "--model-id", "a/b", "--license", "apache-2.0")[1].strip()
    record_fit = json.loads(cli("fit", record, "--json")[1])
    _no_hashing(monkeypatch)
    code, out, err = cli("fit", smollm2_st, "--json")
    assert code == 0, err
    _same_report(json.loads(out), record_fit)
