"""What the lab reads off md and the block layer to show what happened: one home for the demo,
the lab tests and the benchmarks (they run on site A, inside the lab)."""

from __future__ import annotations

import time
from pathlib import Path


def md_sysfs(name: str, device: str) -> str:
    """One of an md array's sysfs attributes (`sync_action`, `degraded`, `bitmap/backlog`, ...)."""
    kernel = Path(device).resolve().name
    return Path(f"/sys/block/{kernel}/md/{name}").read_text().strip()


def is_idle(device: str) -> bool:
    """Whether md has nothing to do on the array: no resync running or due, no leg missing."""
    return md_sysfs("sync_action", device) == "idle" and md_sysfs("degraded", device) == "0"


def wait_idle(device: str, timeout: float) -> float:
    """Until `is_idle` (write-behind drained, resyncs done); the seconds it took, or TimeoutError."""
    started = time.monotonic()
    while not is_idle(device):
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{device} still resyncing or degraded after {timeout:.0f}s")
        time.sleep(0.5)
    return time.monotonic() - started


def sectors_written(device: str) -> int:
    """Sectors written to a block device since boot (its sysfs stat, field 7)."""
    kernel = Path(device).resolve().name
    return int(Path(f"/sys/class/block/{kernel}/stat").read_text().split()[6])
