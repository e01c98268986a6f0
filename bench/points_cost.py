"""What a replica's own points cost its writes (docs/security.md, "What it costs"). Run in a lab:

    remirror lab run --out /tmp/pts -- python bench/points_cost.py

On site B's disks, with the agent's own code (remirror.agent.cdp), the way a replica with
`points:` lays them: writes of 4 KiB, one at a time with O_DIRECT|O_SYNC (as a sync mirror's
replica gets them), one to each 64 KiB chunk of a 16 MiB region in random order, and a
sequential 1 MiB pass over it, on
- the bare disk (a replica without points);
- the points' volume, its chunks provisioned, no point taken (a replica between points);
- the same just after a point: each chunk's first write copies it (dm-thin's copy-on-write),
  which is what a point costs, once per chunk, until the next point;
- the same during a DR drill (remirror.drill, docs/drill.md): a point taken, the drill's
  writable copy of it made the drill's way, and its checks writing the copy all along (a
  loop of 1 MiB direct writes over 8 MiB of it): what a drill costs the replica's writes.
Prints one JSON line per case and a Markdown table.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import statistics
import subprocess
import sys
import time

from remirror import drill
from remirror.agent import cdp
from remirror.facts.cdp import layout, stack_names
from remirror.facts.cdp_index import CdpIndex

MiB = 1024 * 1024
CHUNK = 64 * 1024
REGION = 16 * MiB  # twice this is rewritten after a point: within the pool's 25% for history
RAW, STACKED = "/dev/lab/b2", "/dev/lab/b3"
KEY = "bench.site-b"


def writes(device: str) -> dict[str, float]:
    """4 KiB at the start of each chunk, in random order, synchronously; then 1 MiB sequential."""
    buffer = mmap.mmap(-1, MiB)
    buffer.write(os.urandom(MiB))
    offsets = list(range(0, REGION, CHUNK))
    random.Random(7).shuffle(offsets)  # noqa: S311 - an order, not a secret
    fd = os.open(device, os.O_WRONLY | os.O_DIRECT | os.O_SYNC)
    try:
        latencies = []
        small = memoryview(buffer)[:4096]
        for offset in offsets:
            started = time.perf_counter()
            os.pwrite(fd, small, offset)
            latencies.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        for offset in range(0, REGION, MiB):
            os.pwrite(fd, buffer, REGION + offset)  # the next 64 MiB: a region of its own
        seconds = time.perf_counter() - started
    finally:
        os.close(fd)
    latencies.sort()
    return {
        "write_4k_mean_ms": round(statistics.mean(latencies), 3),
        "write_4k_p50_ms": round(latencies[len(latencies) // 2], 3),
        "write_4k_p99_ms": round(latencies[int(len(latencies) * 0.99)], 3),
        "seq_1m_MBps": round(REGION / seconds / 1e6, 1),
    }


def fill(device: str) -> None:
    """Provision every chunk of both regions (a replica's volume is written all over by its sync)."""
    subprocess.run(
        [
            "dd",
            "if=/dev/zero",
            f"of={device}",
            "bs=1M",
            f"count={2 * REGION // MiB}",
            "oflag=direct",
            "status=none",
        ],
        check=True,
    )


def during_a_drill(volume: str) -> dict[str, float]:
    """`writes` to the volume after a point, while a drill's copy of that point is written."""
    _, plan = drill.snapshot_point(KEY, STACKED, None)  # a point taken now, as a drill does
    copy = drill.activate_copy(drill.DrillDevices(KEY), plan, 0)  # no md superblock here
    checks = subprocess.Popen(
        ["sh", "-c", f"while :; do dd if=/dev/zero of={copy} bs=1M count=8 oflag=direct status=none; done"]
    )
    try:
        time.sleep(1)  # the checks are writing
        return writes(volume)
    finally:
        checks.kill()
        checks.wait()


def main() -> None:
    results = {}
    fill(RAW)
    results["bare disk"] = writes(RAW)
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={STACKED}", "bs=1M", "count=64", "oflag=direct", "status=none"],
        check=True,
    )
    plan = layout(cdp.md_sectors(STACKED), CHUNK, 25)
    index: CdpIndex = cdp.create(KEY, STACKED, plan)
    volume = f"/dev/mapper/{stack_names(KEY)['volume']}"
    try:
        fill(volume)
        results["points' volume, between points"] = writes(volume)
        index = cdp.take_point(KEY, STACKED, index)
        results["points' volume, first writes after a point"] = writes(volume)
        # Room for the next case's copies: the pool keeps 57 MiB for history.
        index = cdp.delete_points(KEY, STACKED, index, list(index.points))
        results["points' volume, first writes after a point, during a drill"] = during_a_drill(volume)
    finally:
        drill.remove_copy(drill.DrillDevices(KEY))
        cdp.deactivate(KEY, [])
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={STACKED}", "bs=1M", "count=64", "oflag=direct", "status=none"],
            check=True,
        )
    kernel = os.uname().release
    lines = [json.dumps({"case": case, "kernel": kernel, **found}) for case, found in results.items()]
    lines += ["", "| case | 4 KiB sync write, mean | p50 | p99 | sequential 1 MiB |", "|---|---|---|---|---|"]
    lines += [
        f"| {case} | {found['write_4k_mean_ms']} ms | {found['write_4k_p50_ms']} ms"
        f" | {found['write_4k_p99_ms']} ms | {found['seq_1m_MBps']} MB/s |"
        for case, found in results.items()
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
