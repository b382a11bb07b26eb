"""hf://org/name@REV through a Hugging Face cache laid out by huggingface_hub's rules."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SMOL_COMMIT

SPEC = "hf://HuggingFaceTB/SmolLM2-135M-Instruct"


def test_branch_resolves_to_the_cached_commit(cli, hf_cache: Path) -> None:
    code, out, err = cli("add", f"{SPEC}@main", "--json")
    assert code == 0, err
    data = json.loads(out)
    manifest = data["manifest"]
    assert manifest["source"] == f"{SPEC}@{SMOL_COMMIT}"
    assert manifest["model_id"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert manifest["license"] == {"id": "apache-2.0", "source": "card:README.md"}
    assert manifest["base_model"] == "HuggingFaceTB/SmolLM2-135M"
    assert manifest["parameters"]["total"]["value"] == 134_515_008
    history = json.loads(cli("history", "HuggingFaceTB/SmolLM2-135M-Instruct", "--json")[1])
    history = history["events"]
    assert history[0]["detail"]["requested"] == f"{SPEC}@main"
    assert history[0]["detail"]["commit"] == SMOL_COMMIT
    # the same files by commit are the same record
    code, _, err = cli("add", f"{SPEC}@{SMOL_COMMIT}")
    assert code == 0 and "already registered" in err


def test_blob_whose_content_does_not_match_its_name_is_exit_1(cli, hf_cache: Path) -> None:
    snapshot = next(hf_cache.glob("models--*/snapshots/*"))
    blob = (snapshot / "model.safetensors").resolve()
    blob.unlink()  # break the hard link before writing: the fixture's checkpoint stays intact
    blob.write_bytes(b"\0" * 64)
    code, out, err = cli("add", f"{SPEC}@main")
    assert code == 1 and out == ""
    assert "model.safetensors" in err and "does not match its LFS blob" in err
    assert json.loads(cli("list", "--json")[1])["records"] == []


def test_small_file_checked_against_its_git_blob_id(cli, hf_cache: Path) -> None:
    snapshot = next(hf_cache.glob("models--*/snapshots/*"))
    config = (snapshot / "config.json").resolve()
    config.write_text(config.read_text().replace('"hidden_size": 576', '"hidden_size": 577'))
    code, _, err = cli("add", f"{SPEC}@main")
    assert code == 1 and "config.json" in err and "git blob id" in err


def test_trust_cache_takes_lfs_names_without_rehashing(cli, hf_cache: Path) -> None:
    code, out, _ = cli("add", f"{SPEC}@main", "--trust-cache", "--json")
    data = json.loads(out)
    weights = next(f for f in data["manifest"]["files"] if f["path"] == "model.safetensors")
    blob = Path(next(hf_cache.glob("models--*/snapshots/*/model.safetensors")).resolve()).name
    assert code == 0 and weights["sha256"] == blob


def test_unresolvable_ref_is_exit_2(cli, hf_cache: Path) -> None:
    code, _, err = cli("add", f"{SPEC}@no-such-branch")
    assert code == 2 and "not in the local Hugging Face cache" in err
    code, _, err = cli("add", "hf://nobody/nothing@main")
    assert code == 2
