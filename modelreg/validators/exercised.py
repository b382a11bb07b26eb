"""Declared ⇒ exercised: is the runtime a target declares the one that answered?

A target's ``runtime`` block (``{llama.cpp: ik_llama.cpp b3900}``) says what its hosts run;
evidence from another runtime proves nothing about it (seed 004: the AVX2-only kernels, the
repacking and the fused MoE op live only in the fork). A declaration is read as words — its
key (unless it only names the family, ``llama.cpp``) and its value:

- ``b3900`` — a build number: the runtime must report build 3900 (llama-server's ``build:``
  line or ``/props`` ``build_info``), the whole number;
- ``0.3.36`` — a version: the runtime (or the package that brings it) must report it;
- 7–40 hex digits — a commit: the reported commit must start with it (or it with the
  reported one, both at least 7 digits); a runtime that reports no commit confirms none;
- anything else — a name (``ik_llama.cpp``): the runtime must name itself so, as a whole word
  of what it prints about itself or of its build's own configuration (ik_llama.cpp's CMake
  cache has options mainline's has not, ``GGML_IQK_MUL_MAT``). The path of the program started
  is the target's own declaration and confirms nothing.

Every word must be confirmed; what the runtime does not report is unconfirmed (never a pass).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_BUILD = re.compile(r"b(\d+)", re.IGNORECASE)
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+)")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_MIN_COMMIT = 7


@dataclass(frozen=True)
class ReportedRuntime:
    """What the runtime that answered said about itself."""

    build: str | None = None  # "3900"
    commit: str | None = None
    versions: tuple[str, ...] = ()  # "0.3.36"
    texts: tuple[str, ...] = field(default=())  # what it printed or its build configuration says

    def describe(self) -> str:
        parts = []
        if self.build:
            parts.append(f"build {self.build}")
        if self.commit:
            parts.append(f"commit {self.commit[:12]}")
        parts += list(self.versions)
        return ", ".join(parts) or "nothing about its build"


# Keys that only name the runtime family (the value says which one of it).
FAMILY_KEYS = frozenset({"llama.cpp", "llamacpp", "transformers", "neuron", "runtime"})


def _squash(text: str) -> str:
    return re.sub(r"[-_.\s]+", "", text.lower())


def _names_in(text: str) -> set[str]:
    """The words of ``text`` as names are compared: lower case, ``-``/``_``/``.`` dropped."""
    return {_squash(w) for w in re.split(r"[\s/|,;:()=\[\]{}\"']+", text) if w}


def _confirmed(word: str, reported: ReportedRuntime) -> bool:
    build = _BUILD.fullmatch(word)
    if build:
        return reported.build is not None and reported.build.lstrip("b") == build.group(1)
    version = _VERSION.fullmatch(word)
    if version:
        return version.group(1) in reported.versions
    if _COMMIT.fullmatch(word.lower()):
        if not reported.commit:
            return False
        ours, theirs = word.lower(), reported.commit.lower()
        return len(theirs) >= _MIN_COMMIT and (ours.startswith(theirs) or theirs.startswith(ours))
    name = _squash(word)
    return bool(name) and any(name in _names_in(text) for text in reported.texts)


def unconfirmed(declared: dict[str, str], reported: ReportedRuntime) -> list[str]:
    """The declarations (``"llama.cpp: ik_llama.cpp b3900"``) the runtime did not confirm,
    each with the words it did not confirm."""
    missing = []
    for key, value in declared.items():
        words = [w for w in str(value).split() if w]
        if _squash(key) not in {_squash(k) for k in FAMILY_KEYS}:
            words.insert(0, key)
        open_words = [w for w in words if not _confirmed(w, reported)]
        if open_words:
            missing.append(f"{key}: {value} ({', '.join(open_words)} not confirmed)")
    return missing


def versions_of(values: Iterable[object]) -> tuple[str, ...]:
    """The dotted versions in ``values`` (strings), in order, once each."""
    found: list[str] = []
    for value in values:
        if isinstance(value, str):
            for match in _VERSION.finditer(value):
                if match.group(1) not in found:
                    found.append(match.group(1))
    return tuple(found)
