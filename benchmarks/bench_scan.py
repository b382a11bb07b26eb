"""The safety scans' cost: what they add to ``inspect`` of the bundled GGUFs, and the pickle
scan of ~100 MB tensor files beside picklescan's own scan and fickling's on the same files.

Rows: scans / (inspect without them) for SmolLM2 and Gemma 3 270M (target ≤ 10 %); seconds per
100 MB of pickle for modelreg (picklescan's opcode walk + the allow-list + its own zip walk),
picklescan alone (``scan_file_path``) and fickling (``loader.scan_file`` / its zip scan).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from benchmarks.common import WORK, best_of
from modelreg.bundled import gemma3_270m_gguf, smollm2_gguf
from modelreg.manifests.build import build_manifest
from modelreg.manifests.gguf import read_gguf
from modelreg.safety.pickles import scan_pickle_file
from modelreg.safety.scan import gguf_findings

MB100 = 100 * 1000 * 1000


def _inspect_row(name: str, path: Path, model_id: str) -> dict[str, Any]:
    header = read_gguf(path)
    inspect_s = best_of(lambda: build_manifest([path], model_id=model_id), 3)
    scans_s = best_of(lambda: gguf_findings(path.name, header.metadata, model_id), 20)
    share = scans_s / (inspect_s - scans_s)
    return {
        "name": f"safety scans added to inspect of {name} (templates, names, hidden text)",
        "ours_s": scans_s,
        "theirs_s": inspect_s - scans_s,
        "ratio": share,
        "detail": f"scans {scans_s * 1000:.2f} ms of an inspect of {inspect_s * 1000:.0f} ms "
        f"(+{share:.2%})",
        "target": "≤ 10 % added",
        "met": share <= 0.10,
    }


def _pickles(directory: Path) -> dict[str, Path]:
    import numpy as np
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "torch.save zip": directory / "state_dict.pt",
        "torch.save legacy": directory / "state_dict_legacy.bin",
        "plain pickle of a numpy array": directory / "array.pkl",
    }
    if not all(p.exists() for p in files.values()):
        torch.manual_seed(0)
        # 25 M float32 weights = 100 MB, in 10 tensors like a small checkpoint.
        state = {f"layer.{i}.weight": torch.randn(2500, 1000) for i in range(10)}
        torch.save(state, files["torch.save zip"])
        torch.save(state, files["torch.save legacy"], _use_new_zipfile_serialization=False)
        import pickle

        files["plain pickle of a numpy array"].write_bytes(
            pickle.dumps(np.zeros(MB100 // 4, np.float32), protocol=4)
        )
    return files


def _fickling(path: Path) -> object:
    import zipfile

    from fickling import loader

    if zipfile.is_zipfile(path):
        return loader.scan_zip_archive(str(path), graceful=True)
    return loader.scan_file(str(path), graceful=True)


def _pickle_rows(directory: Path) -> list[dict[str, Any]]:
    from picklescan.scanner import scan_file_path

    rows = []
    for kind, path in _pickles(directory).items():
        assert scan_pickle_file(path) == [], (kind, scan_pickle_file(path))
        per_100mb = MB100 / path.stat().st_size
        ours = best_of(functools.partial(scan_pickle_file, path), 5) * per_100mb
        picklescan = best_of(functools.partial(scan_file_path, str(path)), 5) * per_100mb
        fickling = best_of(functools.partial(_fickling, path), 2) * per_100mb
        rows.append(
            {
                "name": f"pickle scan per 100 MB, {kind}: modelreg vs picklescan alone",
                "ours_s": ours,
                "theirs_s": picklescan,
                "ratio": ours / picklescan,
                "detail": f"modelreg {ours * 1000:.1f} ms, picklescan {picklescan * 1000:.1f} ms, "
                f"fickling {fickling * 1000:.1f} ms per 100 MB",
                "target": "≤ 0.2 s per 100 MB",
                "met": ours <= 0.2,
            }
        )
        rows.append(
            {
                "name": f"pickle scan per 100 MB, {kind}: modelreg vs fickling",
                "ours_s": ours,
                "theirs_s": fickling,
                "ratio": ours / fickling,
                "detail": "the alternative not chosen, on the same file",
                "target": "recorded",
                "met": None,
            }
        )
    return rows


def run() -> list[dict[str, Any]]:
    models = WORK.parent.parent / ".cache" / "models"
    rows = [
        _inspect_row("SmolLM2 135M Q4_1", smollm2_gguf(), "HuggingFaceTB/SmolLM2-135M-Instruct"),
        _inspect_row("Gemma 3 270M Q4_K_M", gemma3_270m_gguf(models), "google/gemma-3-270m"),
    ]
    return rows + _pickle_rows(WORK / "pickles")


if __name__ == "__main__":
    for row in run():
        print(row["name"], "|", row["detail"], "|", row["met"])
