"""DCD benchmark: sync-mode 4 KiB random-write latency with and without the replica's writecache.

The DCD seed's figure: about 4x lower average write response with a disk caching
disk at the replica, under 100% random small writes. Here the same comparison on
stock parts: a sync-mode mirror (each write waits for the replica over iSCSI), the
data disks slowed like spinning disks (`--slow-disk-ms`), the fast disks not.

Run it (one command, from the checkout; the lab boots, runs this inside, and copies
the results to bench/out/):

    ./dev bench

which is `remirror lab run --slow-disk-ms 8 --out bench/out -- python bench/cache_latency.py`.
Results: bench/out/cache_latency.json and bench/out/cache_latency.md. Under an
emulated CPU the absolute numbers mean little; the ratio, measured in one run on
the same disks, is the result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from remirror.lab.spec import LAB_FILE

LAB_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "lab.yaml"
OUT = Path(os.environ.get("LAB_OUT", "bench/out"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "60"))
MD = "/dev/md/lab0"
CAUTION = "lab: QEMU/TCG emulated CPU; compare the ratio, measured in one run, not absolute numbers"


def run(*argv: str, ok: tuple[int, ...] = (0,)) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode not in ok:
        sys.exit(f"bench: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def profile(cache: bool) -> Path:
    """The lab profile in sync mode; the primary leg behind a writecache in both runs (so that
    only the replica's cache differs), the replica's only with `cache`."""
    text = LAB_PROFILE.read_text().replace("mode: async", "mode: sync")
    text = text.replace(
        "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", ""
    )
    text = text.replace(
        "      disk: /dev/lab/a0\n", "      disk: /dev/lab/a0\n      cache: {disk: /dev/lab/a-fast0}\n"
    )
    if cache:
        text = text.replace(
            "        disk: /dev/lab/b0\n",
            "        disk: /dev/lab/b0\n        cache: {disk: /dev/lab/b-fast0}\n",
        )
    path = Path("/run") / f"bench-{'cache' if cache else 'plain'}.yaml"
    path.write_text(text)
    return path


def wait_idle() -> None:
    kernel = Path(MD).resolve().name
    while (
        Path(f"/sys/block/{kernel}/md/sync_action").read_text().strip() != "idle"
        or Path(f"/sys/block/{kernel}/md/degraded").read_text().strip() != "0"
    ):
        time.sleep(2)


def fio() -> dict[str, float]:
    """4 KiB random writes at queue depth 1, O_DIRECT|O_SYNC, over 32 MiB (fits the cache's watermark)."""
    report = json.loads(
        run(
            "fio", "--name=dcd", f"--filename={MD}", "--rw=randwrite", "--bs=4k", "--iodepth=1",
            "--ioengine=psync", "--direct=1", "--sync=1", "--size=32M", "--offset=64M", "--time_based",
            f"--runtime={SECONDS}", "--randrepeat=0", "--output-format=json",
        )
    )  # fmt: skip
    write = report["jobs"][0]["write"]
    clat = write["clat_ns"]
    return {
        "iops": write["iops"],
        "mean_ms": clat["mean"] / 1e6,
        "p50_ms": clat["percentile"]["50.000000"] / 1e6,
        "p99_ms": clat["percentile"]["99.000000"] / 1e6,
        "writes": write["total_ios"],
    }


def measure(cache: bool) -> dict[str, float]:
    path = profile(cache)
    run("remirror", "apply", "--yes", str(path))
    wait_idle()
    result = fio()
    run("remirror", "destroy", "--yes", str(path), "lab0")
    for disk in ("/dev/lab/a0", "/dev/lab/b0", "/dev/lab/a-fast0", "/dev/lab/b-fast0"):
        run("wipefs", "--all", "--quiet", disk)
        run("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=1", "oflag=direct", "status=none")
    return result


def main() -> int:
    disks = json.loads(Path(LAB_FILE).read_text())["disks"]
    slow_ms = max(int(d["slow_ms"]) for d in disks if "fast" not in d["path"])
    plain = measure(cache=False)
    cached = measure(cache=True)
    ratio = {k: plain[k] / cached[k] for k in ("mean_ms", "p99_ms") if cached[k]}
    result = {
        "what": "sync-mode mirror, 4 KiB random writes, QD1, O_DIRECT|O_SYNC, replica over iSCSI",
        "slow_disk_ms": slow_ms,
        "seconds_each": SECONDS,
        "without_replica_cache": plain,
        "with_replica_writecache": cached,
        "improvement": ratio,
        "seed_figure": "about 4x lower mean write response (DCD paper, 100% random 4 KiB writes)",
        "caution": CAUTION,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cache_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    rows = [
        f"| {name} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['iops']:.0f} |"
        for name, r in (("without replica cache", plain), ("with replica writecache", cached))
    ]
    (OUT / "cache_latency.md").write_text(
        "\n".join(
            [
                "# DCD: replica writecache, sync mode, 4 KiB random writes (QD1)",
                "",
                f"Data disks slowed by {slow_ms} ms per I/O; {SECONDS} s of fio each."
                " The primary leg has a writecache in both runs: only the replica's cache differs.",
                "",
                "| configuration | mean ms | p50 ms | p99 ms | IOPS |",
                "|---|---|---|---|---|",
                *rows,
                "",
                f"Mean write latency {ratio.get('mean_ms', 0):.2f}x lower with the cache,"
                f" p99 {ratio.get('p99_ms', 0):.2f}x (the seed: about 4x on the mean).",
                "",
                CAUTION + ".",
                "",
            ]
        )
    )
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
