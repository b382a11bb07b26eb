"""modelreg diff: what changed, and can the change be attributed to one variable?"""

from __future__ import annotations

import json
from pathlib import Path

from modelreg.manifests.build import build_manifest
from modelreg.schemas.manifest import Manifest
from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _add(cli, path: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, out, err = cli(
        "add", path, "--model-id", SMOL_ID, "--source", "pypi://x==1", *SMOL_BASE, *extra
    )
    assert code == 0, err
    return out.strip()


def test_chat_template_edit_is_metadata_only(
    cli, smollm2: Path, smollm2_new_template: Path
) -> None:
    a, b = _add(cli, smollm2), _add(cli, smollm2_new_template)
    code, out, _ = cli("diff", a, b, "--json")
    report = json.loads(out)
    assert code == 0
    assert report["metadata_only"] is True
    assert "metadata only: tensor data identical" in report["notes"]
    assert report["metadata_keys"] == ["tokenizer.chat_template"]
    assert "gguf metadata: tokenizer.chat_template changed" in report["notes"]
    assert report["changed_dimensions"] == ["tokenizer/template"]
    assert report["sections"]["weights"]["changed"] is False
    assert report["sections"]["files"]["changed"] is True
    assert report["attribution_warning"] is None
    code, out, _ = cli("diff", a, b)
    assert "metadata only: tensor data identical" in out


def test_new_weights_are_not_metadata_only(cli, smollm2: Path, scaled_smollm2: Path) -> None:
    report = json.loads(cli("diff", _add(cli, smollm2), _add(cli, scaled_smollm2), "--json")[1])
    assert report["metadata_only"] is False
    assert report["changed_dimensions"] == ["weights"]


def test_unrelated_models_still_diff_and_say_so(cli, smollm2: Path, gemma: Path) -> None:
    a = _add(cli, smollm2)
    out = cli("add", gemma, "--model-id", "google/gemma-3-270m")[1]
    report = json.loads(cli("diff", a, out.strip(), "--json")[1])
    assert report["same_model"] is False
    assert report["notes"][0].startswith("different models")
    assert report["attribution_warning"] is not None  # weights, quantization, tokenizer…


def test_promote_warns_when_several_things_changed(cli, smollm2: Path, smollm2_st: Path) -> None:
    gguf = _add(cli, smollm2)
    st = _add(cli, smollm2_st, "--license", "apache-2.0")
    assert cli("verify", gguf)[0] == 0 and cli("promote", gguf, "--target", "cpu")[0] == 0
    assert cli("verify", st)[0] == 0
    code, _, err = cli("promote", st, "--target", "cpu")
    assert code == 0
    assert "warning:" in err and "cannot be attributed" in err and "runtime" in err


def test_tensor_data_digest_is_the_data_region(smollm2: Path) -> None:
    import hashlib

    from modelreg.manifests.gguf import read_gguf

    manifest = build_manifest([smollm2], model_id=SMOL_ID).manifest
    start = read_gguf(smollm2).data_offsets[0]
    with smollm2.open("rb") as fh:
        fh.seek(start)
        expected = hashlib.sha256(fh.read()).hexdigest()
    assert manifest.gguf is not None and manifest.gguf.tensor_data_sha256 == expected


def test_diff_names_the_gguf_metadata_keys_that_changed(cli, tmp_path: Path) -> None:
    from tests.helpers import write_gguf

    tensors = {"token_embd.weight": (64, 16)}
    a_path = write_gguf(tmp_path / "a.gguf", tensors, metadata={"general.name": "alpha"})
    b_path = write_gguf(
        tmp_path / "b.gguf", tensors, metadata={"general.name": "beta", "general.license": "mit"}
    )
    facts = ("--model-id", "t/m", "--source", "pypi://t-m==1.0", "--license", "mit")
    a, b = (cli("add", p, *facts)[1].strip() for p in (a_path, b_path))
    code, out, _ = cli("diff", a, b, "--json")
    report = json.loads(out)
    assert code == 0 and report["metadata_only"] is True
    assert report["metadata_keys"] == ["general.license", "general.name"]
    assert "gguf metadata: general.name changed; general.license added" in report["notes"]
    code, out, _ = cli("diff", a, b)
    assert "gguf metadata: general.name changed; general.license added\n" in out
    assert json.loads(cli("diff", b, a, "--json")[1])["notes"][1] == (
        "gguf metadata: general.name changed; general.license removed"
    )

    # The per-key digests are not part of the identity: a record added before modelreg kept
    # them has the id the same bytes get now, and its diff says what it cannot name.
    built = build_manifest([a_path], model_id="t/m", source="pypi://t-m==1.0", license_id="mit")
    manifest = built.manifest.model_dump(mode="json")
    assert set(manifest["gguf"]["metadata_sha256"]) == {"general.architecture", "general.name"}
    manifest["gguf"].pop("metadata_sha256")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(manifest))
    assert Manifest.model_validate(manifest).record_id == a
    shown = json.loads(cli("show", b, "--json")[1])["manifest"]
    new = tmp_path / "new.json"
    new.write_text(json.dumps(shown))
    report = json.loads(cli("diff", old, new, "--json")[1])
    assert report["metadata_keys"] is None and report["notes"][1] == (
        "gguf metadata: which keys changed is unknown (A recorded without per-key digests)"
    )
