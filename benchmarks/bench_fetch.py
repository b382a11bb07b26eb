"""`modelreg fetch` of a 1 GiB record from a local S3 API server vs boto3's own
`download_file` of the same object (whole processes, the same server, alternated), and the
fetch's peak RSS for a 1 GiB and a 256 MiB record (flat in file size).

The server is moto's standalone S3 server on loopback (what the tests use). Ours checks the
sha256 while the bytes arrive and renames into place only when it matched; boto3 only
downloads. The record's own add-time file:// copy is removed, so the bytes come from S3."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_trust import _gguf
from benchmarks.common import WORK

MiB = 1 << 20
_PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])"
_OURS = f"""
import sys, time
from modelreg.cli.main import main
t = time.perf_counter()
code = main(["fetch", *sys.argv[1:], "--progress", "none"])
took = time.perf_counter() - t
assert code == 0, code
print({_PEAK}, took, file=sys.stderr)
"""
_BOTO = f"""
import sys, time, boto3
t = time.perf_counter()
boto3.client("s3").download_file(sys.argv[1], sys.argv[2], sys.argv[3])
print({_PEAK}, time.perf_counter() - t, file=sys.stderr)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _small_gguf(path: Path, size: int) -> Path:
    if path.exists() and path.stat().st_size > size:
        return path
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(path, "llama")
    writer.add_string("general.name", "bench-small")
    rng = np.random.default_rng(1)
    writer.add_tensor("blk.0.ffn_up.weight", rng.random(size // 4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds of the whole process, its peak RSS in KiB)."""
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:3]} failed: {done.stderr[-2000:]}")
    peak = int(done.stderr.strip().splitlines()[-1].split()[0])
    return wall, peak


def run() -> list[dict[str, Any]]:
    import boto3

    import modelreg

    work = WORK / "fetch"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    big = _gguf(WORK / "bench-1gib.gguf")
    small = _small_gguf(WORK / "bench-256mib.gguf", 256 * MiB)
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        env = os.environ | {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "MODELREG_DATABASE_URL": f"sqlite:///{work / 'fetch-bench.db'}",
            "MODELREG_HOME": str(work / "home"),
        }
        client = boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="bench")
        os.environ.update({k: v for k, v in env.items() if k.startswith("MODELREG_")})
        registry = modelreg.open(env["MODELREG_DATABASE_URL"])
        records = {}
        for name, path in (("big", big), ("small", small)):
            client.upload_file(str(path), "bench", f"{name}/{path.name}")
            staged = work / "src" / name / path.name
            staged.parent.mkdir(parents=True)
            os.link(path, staged)  # added from here, then removed: only S3 has the bytes
            added = registry.add(
                [staged],
                model_id=f"bench/{name}",
                source="pypi://bench==1",
                license_id="mit",
                locations=[f"s3://bench/{name}/"],
            )
            staged.unlink()
            records[name] = added.record.record_id
        timings: dict[str, list[float]] = {"ours": [], "boto3": []}
        peaks: dict[str, int] = {}
        for i in range(3):
            out = work / f"out-{i}"
            wall, peaks["big"] = _timed(
                [sys.executable, "-c", _OURS, records["big"], "--to", str(out)], env
            )
            timings["ours"].append(wall)
            shutil.rmtree(out)
            target = work / f"boto-{i}.gguf"
            wall, peaks["boto3"] = _timed(
                [sys.executable, "-c", _BOTO, "bench", f"big/{big.name}", str(target)], env
            )
            timings["boto3"].append(wall)
            target.unlink()
        _, peaks["small"] = _timed(
            [sys.executable, "-c", _OURS, records["small"], "--to", str(work / "out-small")], env
        )
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    ours_s = sorted(timings["ours"])[1]
    theirs_s = sorted(timings["boto3"])[1]
    ratio = ours_s / theirs_s
    rss_ratio = peaks["big"] / peaks["small"]
    size = big.stat().st_size
    return [
        {
            "name": "fetch of a 1 GiB record from a local S3 server (sha256 checked) vs boto3 "
            "download_file (whole processes)",
            "ours_s": ours_s,
            "theirs_s": theirs_s,
            "ratio": ratio,
            "detail": f"{size / MiB:,.0f} MiB: modelreg fetch {size / ours_s / 1e6:.0f} MB/s, "
            f"boto3 {size / theirs_s / 1e6:.0f} MB/s (median of 3, alternated; moto's server "
            f"on the same 2 cores); runs {json.dumps(timings)}",
            "target": "≤ 1.2× boto3's time",
            "met": ratio <= 1.2,
        },
        {
            "name": "peak RSS of modelreg fetch: a 1 GiB vs a 256 MiB record",
            "ours_s": None,
            "theirs_s": None,
            "ratio": rss_ratio,
            "detail": f"{peaks['big'] / 1024:.0f} MiB vs {peaks['small'] / 1024:.0f} MiB "
            f"(VmHWM of the fetching process; boto3's download_file: "
            f"{peaks['boto3'] / 1024:.0f} MiB)",
            "target": "flat in file size (ratio ≈ 1)",
            "met": rss_ratio <= 1.25,
        },
    ]
