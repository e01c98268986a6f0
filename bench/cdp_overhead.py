"""CDP benchmark: what recovery points every 10 s cost a mirror's writes (issue 8's target: at most 10%).

Three configurations of the same sync-mode lab mirror, measured in one run:
the plain mirror (no CDP), the CDP stack with no points taken (what thin
provisioning and dm-era cost by themselves), and the stack with
`remirror cdp run` taking a point every 10 s. Each gets three fio jobs at
queue depth 1, O_DIRECT: 4 KiB random writes each followed by a flush
(O_SYNC: a database's worst case), 4 KiB random writes without (latency:
mean, p99), and 1 MiB sequential writes (throughput). The region written is
filled once before measuring, so that the pool's first allocation of a chunk
is not counted: what is counted with points on is the copy-on-write of each
chunk first written after a point, and the pool's metadata commits (one per
flush that follows a new allocation).

Run it with the other benchmarks: `./dev bench` (results in bench/out/cdp_overhead.{json,md}).
"""

from __future__ import annotations

import subprocess
import sys

from common import MD, SECONDS, destroy, fio, run, slow_disk_ms, sync_profile, wait_idle, write_report

VOLUME = "/dev/mapper/remirror-lab0-cdp"
DISKS = ("/dev/lab/a0", "/dev/lab/b0")
JOBS = {
    "random 4k O_SYNC": ("randwrite", "4k", True),
    "random 4k": ("randwrite", "4k", False),
    "sequential 1M": ("write", "1M", False),
}


def measure(device: str) -> dict[str, dict[str, float]]:
    run("dd", "if=/dev/zero", f"of={device}", "bs=1M", "seek=64", "count=32", "oflag=direct", "status=none")
    return {name: fio(device, rw, block, sync=sync) for name, (rw, block, sync) in JOBS.items()}


def main() -> int:
    slow_ms = slow_disk_ms()
    plain_profile = sync_profile("plain", {})
    run("remirror", "apply", "--yes", str(plain_profile))
    wait_idle()
    plain = measure(MD)
    destroy(plain_profile, DISKS)

    cdp_profile = sync_profile("cdp", {}, append="    cdp: {every: 10s, keep: 10m}\n")
    run("remirror", "apply", "--yes", str(cdp_profile))
    wait_idle()
    no_points = measure(VOLUME)
    daemon = subprocess.Popen(
        ["remirror", "cdp", "run", "--profile", str(cdp_profile)], stdout=subprocess.PIPE, text=True
    )
    try:
        with_points = measure(VOLUME)
    finally:
        daemon.terminate()
        out, _ = daemon.communicate(timeout=120)
    points = [line for line in out.splitlines() if '"event": "point"' in line]
    destroy(cdp_profile, DISKS)

    def cost(config: dict[str, dict[str, float]]) -> dict[str, float]:
        ratios = {}
        for job in ("random 4k O_SYNC", "random 4k"):
            key = job.replace(" ", "_")
            ratios[f"{key}_mean_latency_ratio"] = config[job]["mean_ms"] / plain[job]["mean_ms"]
            ratios[f"{key}_p99_latency_ratio"] = config[job]["p99_ms"] / plain[job]["p99_ms"]
        sequential = config["sequential 1M"]["mb_per_s"] / plain["sequential 1M"]["mb_per_s"]
        ratios["sequential_throughput_ratio"] = sequential
        return ratios

    result = {
        "what": "sync-mode mirror; fio QD1 O_DIRECT (4k also with O_SYNC); no CDP, CDP, points every 10 s",
        "slow_disk_ms": slow_ms,
        "seconds_each": SECONDS,
        "points_taken_during_measurement": len(points),
        "plain_mirror": plain,
        "cdp_no_points": no_points,
        "cdp_points_every_10s": with_points,
        "cost_without_points": cost(no_points),
        "cost_with_points": cost(with_points),
        "target": "at most 10% (issue 8); the Mariner seed: negligible overhead with its logging disk",
    }
    rows = []
    for name, config in (
        ("plain mirror", plain),
        ("CDP, no points", no_points),
        ("CDP, points every 10 s", with_points),
    ):
        synced, random, sequential = config["random 4k O_SYNC"], config["random 4k"], config["sequential 1M"]
        rows.append(
            f"| {name} | {synced['mean_ms']:.2f} | {synced['p99_ms']:.2f} | {random['mean_ms']:.2f}"
            f" | {random['p99_ms']:.2f} | {sequential['mb_per_s']:.1f} |"
        )
    c = cost(with_points)
    write_report(
        "cdp_overhead",
        result,
        [
            "# CDP: the cost of recovery points every 10 s (sync-mode mirror)",
            "",
            f"Data disks slowed by {slow_ms} ms per I/O; {SECONDS} s of fio per job (QD1, O_DIRECT);"
            f" {len(points)} points taken while measuring with points on.",
            "",
            "| configuration | 4k O_SYNC mean ms | 4k O_SYNC p99 ms | 4k mean ms | 4k p99 ms | 1M seq MB/s |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            "With points every 10 s, against the plain mirror (target: within 10%): 4k O_SYNC mean latency"
            f" x{c['random_4k_O_SYNC_mean_latency_ratio']:.2f}, 4k mean latency"
            f" x{c['random_4k_mean_latency_ratio']:.2f}, sequential throughput"
            f" x{c['sequential_throughput_ratio']:.2f}.",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
