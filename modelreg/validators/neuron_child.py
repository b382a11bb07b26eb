"""Child process for ``neuron-smoke`` (``python -m modelreg.validators.neuron_child``).

On a Neuron host it imports torch_neuronx (which registers the NEFF ops the traced model
needs) and records the Neuron SDK versions; with ``require_neuron: false`` it runs the same host
path on CPU, which is how the tests exercise it without Neuron hardware.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import traceback
from pathlib import Path

from modelreg.validators.child import reserve_stdout, respond

CHILD_ARGV = (sys.executable, "-m", "modelreg.validators.neuron_child")
NEURON_PACKAGES = (
    "neuronx-cc",
    "torch-neuronx",
    "neuronx-distributed",
    "neuronx-distributed-inference",
    "libneuronxla",
)


def main() -> int:
    out = reserve_stdout()
    request = json.loads(sys.stdin.read())
    versions: dict[str, str | None] = {}
    for package in NEURON_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    base = {"neuron_versions": versions}
    if request.get("require_neuron"):
        try:
            import torch_neuronx  # noqa: F401  (registers the Neuron ops)
        except ImportError as exc:
            respond(base | {"status": "no_runtime", "message": f"torch_neuronx: {exc}"}, out)
            return 0
    from modelreg.validators.host_embedding import generate

    try:
        result = generate(
            Path(request["bundle"]),
            request["model_file"],
            request["embedding_file"],
            request["scale"],
            request["prompts"],
            request["max_tokens"],
            request["bucket"],
        )
    except Exception as exc:  # loading a bundle can fail in many ways; each is the finding
        respond(
            base
            | {
                "status": "load_error",
                "message": f"{type(exc).__name__}: {exc}",
                "traceback_tail": traceback.format_exc()[-2000:],
            },
            out,
        )
        return 0
    respond(base | {"status": "ok"} | result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
