"""Every door refuses a manifest that names more layers (or experts, tokens…) than
``modelreg.limits`` allows, with exit 2 and one line naming the field and its limit: a
manifest file given to ``fit``, an ``import``, an artifact given to ``add`` — and the
config a checkpoint's counts come from. (POST /api/v1/records: tests/server/test_bounds.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_transfer import _export_with, _record_line
from tests.helpers import write_gguf

REPO = Path(__file__).resolve().parents[2]
LIMIT = "architecture.block_count: 2,147,483,648 is beyond the limit: 0 to 65,536 layers"


def _hostile_manifest(tmp_path: Path) -> Path:
    data = json.loads((REPO / "manifests" / "qwen3-30b-a3b.json").read_text())
    data["architecture"]["block_count"] = 2_147_483_648
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    return path


def test_fit_refuses_a_manifest_file_beyond_the_limit(cli, tmp_path: Path) -> None:
    code, out, err = cli("fit", _hostile_manifest(tmp_path), "--target", "cpu")
    assert code == 2 and LIMIT in err and "Traceback" not in err, (out, err)


def test_import_refuses_a_record_beyond_the_limit(cli, smollm2: Path, tmp_path: Path) -> None:
    line = _record_line(cli, smollm2, tmp_path)
    line["manifest"]["architecture"]["block_count"] = 2_147_483_648
    code, _, err = cli("import", _export_with(tmp_path, line))
    assert code == 2 and LIMIT in err, err
    assert json.loads(cli("list", "--json")[1])["records"] == []


def test_add_refuses_a_gguf_naming_too_many_layers(cli, tmp_path: Path) -> None:
    gguf = write_gguf(
        tmp_path / "m.gguf",
        {"token_embd.weight": (8, 4)},
        metadata={"llama.block_count": 2_147_483_648, "llama.context_length": 2048},
    )
    code, out, err = cli("add", gguf, "--model-id", "a/b")
    assert code == 2 and LIMIT in err and "Traceback" not in err, (out, err)


def test_add_refuses_a_config_naming_too_many_layers(cli, smollm2_st: Path, tmp_path: Path) -> None:
    for item in smollm2_st.iterdir():  # the real checkpoint, its config edited
        if item.name != "config.json":
            (tmp_path / item.name).symlink_to(item)
    config = json.loads((smollm2_st / "config.json").read_text())
    config["num_hidden_layers"] = 2_147_483_648
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = cli("add", tmp_path, "--model-id", "a/b")
    assert code == 2 and "Traceback" not in err, (out, err)
    assert "config field 'num_hidden_layers' is 2,147,483,648: beyond the limit of 65,536" in err
