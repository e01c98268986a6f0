"""DCD benchmark: sync-mode 4 KiB random-write latency with and without the replica's writecache.

The DCD seed's figure: about 4x lower average write response with a disk caching
disk at the replica, under 100% random small writes. Here the same comparison on
stock parts: a sync-mode mirror (each write waits for the replica over iSCSI), the
data disks slowed like spinning disks (`--slow-disk-ms`), the fast disks not.

Run it (one command, from the checkout; the lab boots, runs this inside, and copies
the results to bench/out/):

    ./dev bench

which runs this (and the other benchmarks) in one lab with `--slow-disk-ms 8`.
Results: bench/out/cache_latency.json and bench/out/cache_latency.md. Under an
emulated CPU the absolute numbers mean little; the ratio, measured in one run on
the same disks, is the result.
"""

from __future__ import annotations

import sys

from common import MD, SECONDS, destroy, fio, run, slow_disk_ms, sync_profile, wait_idle, write_report

PRIMARY_CACHE = {
    "      disk: /dev/lab/a0\n": "      disk: /dev/lab/a0\n      cache: {disk: /dev/lab/a-fast0}\n"
}
REPLICA_CACHE = {
    "        disk: /dev/lab/b0\n": "        disk: /dev/lab/b0\n        cache: {disk: /dev/lab/b-fast0}\n"
}


def measure(cache: bool) -> dict[str, float]:
    """The primary leg behind a writecache in both runs (so that only the replica's cache
    differs); 4 KiB random writes over 32 MiB (within the cache's watermark)."""
    path = sync_profile("cache" if cache else "plain", PRIMARY_CACHE | (REPLICA_CACHE if cache else {}))
    run("remirror", "apply", "--yes", str(path))
    wait_idle()
    result = fio(MD, "randwrite", "4k")
    destroy(path, ("/dev/lab/a0", "/dev/lab/b0", "/dev/lab/a-fast0", "/dev/lab/b-fast0"))
    return result


def main() -> int:
    slow_ms = slow_disk_ms()
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
    }
    rows = [
        f"| {name} | {r['mean_ms']:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['iops']:.0f} |"
        for name, r in (("without replica cache", plain), ("with replica writecache", cached))
    ]
    write_report(
        "cache_latency",
        result,
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
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
