"""Guest-side lab probes: what the lab reads off md and the block layer to show what happened,
and the names of what the lab profile makes. One home for the demo, the lab tests and the
benchmarks (they run on site A, inside the lab).
"""

from __future__ import annotations

import functools
import mmap
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from remirror.agent.digest import data_offset
from remirror.plan.cdp import volume_path
from remirror.profile import load_profile
from remirror.profile.names import replica_path
from remirror.profile.wireguard import replica_portal

# The repository's lab profile (the lab shares the source tree with the host).
LAB_PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "lab.yaml"


@dataclass(frozen=True)
class LabNames:
    """What the lab profile's mirror is called and made of, as remirror derives it."""

    mirror: str
    md: str  # the array's device on site A
    local_disk: str  # site A's leg
    remote_disk: str  # site B's leg, on site B
    iqn: str  # the target exporting site B's leg
    portal: str  # address:port of that target
    remote_leg: str  # site B's leg as site A sees it (its udev by-path link)
    cdp_volume: str  # the volume on top of the mirror, with `cdp:` in the profile


@functools.cache
def lab_names() -> LabNames:
    """The names of the lab profile's first mirror, derived by remirror.profile.names."""
    profile = load_profile(LAB_PROFILE)
    mirror = profile.mirrors[0]
    replica = mirror.replicas[0]
    iqn = profile.replica_iqn(mirror, replica)
    return LabNames(
        mirror=mirror.name,
        md=mirror.md_device,
        local_disk=mirror.primary.disk,
        remote_disk=replica.disk,
        iqn=iqn,
        portal=str(replica_portal(profile, mirror, replica)),
        remote_leg=replica_path(profile, mirror, replica),
        cdp_volume=volume_path(mirror),
    )


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


def sectors_read(device: str) -> int:
    """Sectors read from a block device since boot (its sysfs stat, field 3)."""
    kernel = Path(device).resolve().name
    return int(Path(f"/sys/class/block/{kernel}/stat").read_text().split()[2])


def sectors_written(device: str) -> int:
    """Sectors written to a block device since boot (its sysfs stat, field 7)."""
    kernel = Path(device).resolve().name
    return int(Path(f"/sys/class/block/{kernel}/stat").read_text().split()[6])


def writes_in_flight(device: str) -> int:
    """Writes a block device holds in flight now (its sysfs `inflight`, the second field)."""
    kernel = Path(device).resolve().name
    return int(Path(f"/sys/class/block/{kernel}/inflight").read_text().split()[1])


# The scheduler's and the generic sleep's frames, innermost in every sleeping task's stack: they
# say that it waits, not on what.
_SLEEP_FRAMES = frozenset(
    {
        "__schedule", "schedule", "io_schedule", "schedule_timeout", "io_schedule_timeout",
        "schedule_preempt_disabled", "wait_for_completion", "wait_for_completion_io",
        "__wait_for_common", "wait_for_common_io", "bit_wait_io", "__wait_on_bit", "out_of_line_wait_on_bit",
        "rwsem_down_write_slowpath", "rwsem_down_read_slowpath", "__mutex_lock", "mutex_lock",
    }
)  # fmt: skip


def stack_frames(text: str) -> list[str]:
    """The function names of a task's kernel stack as /proc/PID/stack gives it (Linux 6.1:
    `[<0>] md_bitmap_startwrite+0x1a2/0x1f0 [md_mod]`, innermost first), past the sleep's own."""
    names = [line.split("] ", 1)[-1].split("+", 1)[0].strip() for line in text.splitlines() if line.strip()]
    return [name for name in names if name not in _SLEEP_FRAMES]


class Waits:
    """Where the threads of some processes sleep uninterruptibly (state D: waiting for I/O or
    a lock, not for work): each look counts the three innermost frames of each such thread's
    kernel stack, past the sleep's own. Which processes: those whose name `matches` (e.g. fio
    and md's raid1 thread), found again only when one of them is gone, so that a look reads
    the few tasks it watches and not the whole of /proc."""

    def __init__(self, matches: Callable[[str], bool], proc: Path = Path("/proc")) -> None:
        self.matches, self.proc = matches, proc
        self.looks = 0
        self.seen: Counter[str] = Counter()
        self._pids: list[Path] = []

    def _find(self) -> None:
        self._pids = []
        for proc in self.proc.iterdir():
            if proc.name.isdigit():
                try:
                    if self.matches((proc / "comm").read_text().strip()):
                        self._pids.append(proc)
                except OSError:  # gone meanwhile
                    continue

    def look(self) -> None:
        if not self._pids or not all(p.exists() for p in self._pids):
            self._find()
        self.looks += 1
        for proc in self._pids:
            try:
                for task in (proc / "task").iterdir():
                    stat = (task / "stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[0] != "D":
                        continue
                    frames = stack_frames((task / "stack").read_text())[:3]
                    where = f"{(task / 'comm').read_text().strip()}: {' < '.join(frames)}"
                    self.seen[where] += 1
            except OSError:  # the task ended between two reads
                continue

    def most(self, count: int = 8) -> dict[str, int]:
        """The `count` most often seen, with how many looks saw each."""
        return dict(self.seen.most_common(count))


def array_size(device: str) -> int:
    """A running md array's size in bytes (sysfs counts 512-byte sectors)."""
    return int(Path(f"/sys/class/block/{Path(device).resolve().name}/size").read_text()) * 512


def legs_hold_the_same_data(first: str, second: str, size: int) -> bool:
    """Whether two md legs hold the same `size` bytes of array data, each read past its own data
    offset with O_DIRECT (what is on the disk, not in the page cache).

    Compared in place, not hashed: under emulation sha256 costs seconds of CPU per 256 MiB,
    and a lab test that compares legs a few times spent more on hashing than on mirroring."""
    chunk = 4 << 20
    buffers = mmap.mmap(-1, chunk), mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
    starts = data_offset(first), data_offset(second)
    fds = [os.open(leg, os.O_RDONLY | os.O_DIRECT) for leg in (first, second)]
    try:
        for at in range(0, size, chunk):
            length = min(chunk, size - at)
            views = [memoryview(buffer)[:length] for buffer in buffers]
            for fd, view, start in zip(fds, views, starts, strict=True):
                if os.preadv(fd, [view], start + at) != length:
                    raise RuntimeError(f"short read at {start + at} of {first} or {second}")
            if views[0] != views[1]:
                return False
        return True
    finally:
        for fd in fds:
            os.close(fd)
