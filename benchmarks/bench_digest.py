"""sha256 throughput vs `openssl dgst -sha256`, and peak memory flat in file size.

Hashing runs in a fresh child process per measurement so its peak RSS can be read alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import WORK

GiB = 1 << 30
# Peak RSS from VmHWM: it belongs to the process's own address space, whereas ru_maxrss
# survives execve and would report the benchmark runner's peak instead.
_PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])"
_CHILD = f"""
import json, sys, time
from pathlib import Path
from modelreg.manifests.digest import sha256_file
t = time.perf_counter()
digest = sha256_file(Path(sys.argv[1]))
print(json.dumps({{"digest": digest, "seconds": time.perf_counter() - t,
                  "max_rss_kib": {_PEAK}}}))
"""


def _ours(path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _baseline_rss() -> int:
    code = f"import modelreg.manifests.digest; print({_PEAK})"
    return int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


def _openssl(path: Path) -> tuple[str, float]:
    started = time.perf_counter()
    out = subprocess.run(
        ["openssl", "dgst", "-sha256", "-r", str(path)], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[0], time.perf_counter() - started


def run() -> list[dict[str, Any]]:
    WORK.mkdir(parents=True, exist_ok=True)
    dense = WORK / "random-1GiB.bin"
    if not dense.exists() or dense.stat().st_size != GiB:
        with dense.open("wb") as fh:
            for _ in range(GiB // (64 << 20)):
                fh.write(os.urandom(64 << 20))
    _ours(dense)  # warm the page cache for both sides
    ours_runs = [_ours(dense) for _ in range(3)]
    openssl_runs = [_openssl(dense) for _ in range(3)]
    assert all(r["digest"] == openssl_runs[0][0] for r in ours_runs)
    ours_s = min(r["seconds"] for r in ours_runs)
    theirs_s = min(s for _, s in openssl_runs)
    ratio = theirs_s / ours_s
    results = [
        {
            "name": "sha256 of a 1 GiB file (page cache warm)",
            "ours_s": ours_s,
            "theirs_s": theirs_s,
            "ratio": ratio,
            "detail": f"modelreg {GiB / ours_s / 1e9:.2f} GB/s vs openssl dgst -sha256 "
            f"{GiB / theirs_s / 1e9:.2f} GB/s (same digest)",
            "target": "≥ 0.9× openssl's throughput",
            "met": ratio >= 0.9,
        }
    ]

    baseline = _baseline_rss()
    rss = {}
    for size_gib in (1, 8):
        sparse = WORK / f"sparse-{size_gib}GiB.bin"
        with sparse.open("wb") as fh:
            fh.truncate(size_gib * GiB)
        rss[size_gib] = _ours(sparse)["max_rss_kib"]
        sparse.unlink()
    growth = rss[8] - rss[1]
    results.append(
        {
            "name": "peak RSS while hashing sparse 1 GiB vs 8 GiB files",
            "ours_s": None,
            "theirs_s": None,
            "ratio": rss[8] / rss[1],
            "detail": f"peak RSS {rss[1] / 1024:.1f} MiB (1 GiB) vs "
            f"{rss[8] / 1024:.1f} MiB (8 GiB); "
            f"interpreter + imports alone {baseline / 1024:.1f} MiB; growth {growth} KiB",
            "target": "flat in file size",
            "met": growth < 8 * 1024,
        }
    )
    return results


if __name__ == "__main__":
    for r in run():
        print(r)
