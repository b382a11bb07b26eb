"""Fingerprint parts computed from files on this host."""

from __future__ import annotations

from pathlib import Path

from modelreg.fingerprint import libraries_digest


def test_the_llama_build_digest_covers_every_library(tmp_path: Path) -> None:
    assert libraries_digest(tmp_path) == "not found"
    names = ("libllama.so", "libggml-cpu.so", "libggml-base.so", "libggml.so")
    for name in names:
        (tmp_path / name).write_bytes(b"\x7fELF " + name.encode())
    seen = {libraries_digest(tmp_path)}
    for name in names:  # rebuilding any one of them changes the digest
        (tmp_path / name).write_bytes(b"\x7fELF rebuilt " + name.encode())
        seen.add(libraries_digest(tmp_path))
    assert len(seen) == len(names) + 1
    assert all(d.startswith("sha256:") for d in seen)
