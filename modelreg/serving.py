"""What a target serves (``Serving``: its context, parallel slots, output budget and KV-cache
types) and how it is read from the command that launches the runtime (``launch_serving``: the
flags of llama-server / llama_cpp.server, with the runtime's own defaults for what the command
leaves out). modelreg.targets builds a target's ``serving`` from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

# KV-cache element types a runtime may be started with (llama.cpp's --cache-type-k/-v).
KVDtype = Literal["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"]
KV_DTYPES: tuple[str, ...] = get_args(KVDtype)
MAX_SERVED_CONTEXT = 1 << 24
MAX_PARALLEL = 4096
MAX_OUTPUT_TOKENS = 1 << 20


@dataclass(frozen=True)
class Serving:
    """What a target's runtime serves, as declared (``serving:``) or read off its ``launch``.

    ``context``: tokens one sequence may hold (None: the model's trained context, as
    llama-server's ``-c 0``); ``parallel``: sequences served at once; KV is sized for
    ``context × parallel`` tokens of ``kv_dtype`` (K and V may differ)."""

    context: int | None
    parallel: int = 1
    max_output_tokens: int | None = None
    kv_dtype_k: str = "f16"
    kv_dtype_v: str = "f16"
    source: str = "serving"  # "serving", "launch" or "serving and launch"
    # llama-server --kv-unified: the sequences share one cache of ``context`` cells.
    unified: bool = False

    @property
    def declared(self) -> bool:
        """A ``serving`` block says it (not only the launch's flags)."""
        return "serving" in self.source

    def per_sequence(self, trained: int | None) -> int | None:
        """Tokens one sequence holds, the trained context once known (llama-server's
        ``-c 0`` splits it over its slots as it splits ``-c``)."""
        if self.context:
            return self.context
        if trained is None:
            return None
        return trained if self.unified else trained // self.parallel

    @property
    def kv_sequences(self) -> int:
        """Sequences the KV cache holds in full (1 when they share one unified cache)."""
        return 1 if self.unified else self.parallel

    @property
    def kv_dtype(self) -> str:
        """One name for the cache type: ``q8_0`` or ``q8_0/f16`` (K/V)."""
        if self.kv_dtype_k == self.kv_dtype_v:
            return self.kv_dtype_k
        return f"{self.kv_dtype_k}/{self.kv_dtype_v}"

    def describe(self) -> str:
        context = f"{self.context} tokens" if self.context else "the trained context"
        parts = [f"{context} × {self.parallel} seq", f"KV {self.kv_dtype}"]
        if self.max_output_tokens:
            parts.append(f"≤{self.max_output_tokens} output tokens")
        return ", ".join(parts) + f" (from {self.source})"


# Flags of llama.cpp's servers that set what is served: llama-server (-c / --ctx-size is the
# whole cache, split over --parallel slots unless --kv-unified), llama-cpp-python's server
# (--n_ctx per its one sequence).
# (Compared with ``_`` read as ``-`` in long flags, as llama.cpp's argument parser does.)
_CONTEXT_FLAGS = ("-c", "--ctx-size", "--n-ctx")
_PARALLEL_FLAGS = ("-np", "--parallel")
_OUTPUT_FLAGS = ("-n", "--n-predict", "--predict")
_CACHE_K_FLAGS = ("-ctk", "--cache-type-k")
_CACHE_V_FLAGS = ("-ctv", "--cache-type-v")
_UNIFIED_FLAGS = ("-kvu", "--kv-unified")


def _flag_values(argv: list[str], flags: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(flag, value) for every ``FLAG VALUE`` / ``FLAG=VALUE`` in ``argv`` (value None when
    the flag ends the command)."""
    found: list[tuple[str, str | None]] = []
    for i, raw in enumerate(argv):
        name, eq, value = raw.partition("=")
        arg = name.replace("_", "-") + eq + value if raw.startswith("--") else raw
        for flag in flags:
            if arg == flag:
                found.append((flag, argv[i + 1] if i + 1 < len(argv) else None))
            elif arg.startswith(flag + "=") and flag.startswith("--"):
                found.append((flag, value))
    return found


def _launch_value(argv: list[str], flags: tuple[str, ...], *, number: bool) -> str | int | None:
    """The one value ``argv`` gives one of ``flags``; ``UnitFieldError`` when it gives two
    different ones, none after the flag, or (``number``) one that is not a whole number."""
    from modelreg.deployed_unit import UnitFieldError

    values = _flag_values(argv, flags)
    if not values:
        return None
    parsed: set[str | int] = set()
    for flag, raw in values:
        if raw is None:
            raise UnitFieldError("launch", f"{flag} ends the command: it takes a value")
        if not number:
            parsed.add(raw)
            continue
        # Plain digits only: llama.cpp's std::stoi reads "4_096" as 4 where Python's int()
        # reads 4096 — a figure the two would read differently is refused.
        try:
            if not re.fullmatch(r"-?[0-9]+", raw):
                raise ValueError(raw)
            parsed.add(int(raw, 10))
        except ValueError:
            raise UnitFieldError(
                "launch", f"{flag} {raw[:40]!r} is not a whole number of tokens/sequences"
            ) from None
    if len(parsed) > 1:
        raise UnitFieldError("launch", f"{'/'.join(flags)} is given {len(parsed)} different values")
    return parsed.pop()


LLAMA_CPP_PYTHON_SERVER_CONTEXT = 2048  # llama_cpp.server's ModelSettings.n_ctx default


def _server_arguments(launch: list[str]) -> list[str] | None:
    """The arguments of the llama.cpp server a launch starts (those after ``llama-server``,
    ``ik_llama.cpp``'s same-named binary, or ``-m llama_cpp.server``), None when the launch
    starts something else: another program's ``-c`` is not a context size."""
    for i, arg in enumerate(launch):
        base = arg.rsplit("/", 1)[-1]
        if base.startswith("llama-server") or arg == "llama_cpp.server":
            return launch[i + 1 :]
    return None


def launch_serving(launch: list[str]) -> dict[str, Any]:
    """What a llama.cpp server's launch command says it serves (only what its flags give):
    ``context`` (per sequence; 0: the model's trained context), ``parallel``,
    ``max_output_tokens``, ``kv_dtype`` / ``kv_dtype_v``, ``unified``; nothing for another
    program. ``UnitFieldError`` for a flag that cannot be read."""
    from modelreg.deployed_unit import UnitFieldError

    found: dict[str, Any] = {}
    server = _server_arguments(launch)
    if server is None:
        return found
    server_is_python = "llama_cpp.server" in launch[: len(launch) - len(server)]
    launch = server
    total = _launch_value(launch, _CONTEXT_FLAGS, number=True)
    parallel = _launch_value(launch, _PARALLEL_FLAGS, number=True)
    output = _launch_value(launch, _OUTPUT_FLAGS, number=True)
    unified = any(arg.replace("_", "-") in _UNIFIED_FLAGS for arg in launch)
    if total is None:
        # Started without a context flag: llama-server's default is the trained context
        # (n_ctx 0), llama-cpp-python's server's is 2048 tokens.
        total = LLAMA_CPP_PYTHON_SERVER_CONTEXT if server_is_python else 0
    if isinstance(parallel, int):
        if not 0 < parallel <= MAX_PARALLEL:
            raise UnitFieldError(
                "launch", f"--parallel {parallel} is out of range (1 to {MAX_PARALLEL})"
            )
        found["parallel"] = parallel
    if isinstance(total, int):
        if not 0 <= total <= MAX_SERVED_CONTEXT:
            raise UnitFieldError(
                "launch", f"context {total} is out of range (0 to {MAX_SERVED_CONTEXT} tokens)"
            )
        slots = found.get("parallel", 1)
        # llama-server splits -c over its slots unless the cache is unified (-c 0: the
        # trained context, split alike — Serving.per_sequence does that once it is known).
        found["context"] = total if unified or total == 0 else total // slots
        if found["context"] == 0 and total:
            raise UnitFieldError("launch", f"context {total} split over {slots} slots is empty")
    if isinstance(output, int) and output > 0:  # -n -1: no limit
        found["max_output_tokens"] = min(output, MAX_OUTPUT_TOKENS)
    for key, flags in (("kv_dtype", _CACHE_K_FLAGS), ("kv_dtype_v", _CACHE_V_FLAGS)):
        value = _launch_value(launch, flags, number=False)
        if value is not None:
            if str(value).lower() not in KV_DTYPES:
                raise UnitFieldError(
                    "launch",
                    f"{flags[-1]} {str(value)[:40]!r} is not one of {', '.join(KV_DTYPES)}",
                )
            found[key] = str(value).lower()
    if unified:
        found["unified"] = True
    return found
