"""The lab's performance model: disks that queue like disks, links with a rate, time dilated.

Pure arithmetic, shared by the host (which measures its own speed before a
boot), the guest (which builds the modelled disks and link) and the bench
(which checks the model and reports against it). docs/performance.md,
"The performance model", says why it is built this way.

Why dilation: the lab's CPU is emulated (QEMU TCG), tens of times slower than
the host's. A disk modelled at its physical speed would then be fast next to
the CPU work of md, iSCSI and TCP, and the lab would measure the emulator.
So every physical figure of the model is scaled by the measured slowdown D:
service times and delays are multiplied by D, rates divided by D. The ratio
of CPU cost to physical cost is then the one a native machine has, and a
figure measured in the lab maps back to a physical one by the same D.

Why null_blk: a disk serves a bounded number of requests at a time, each for
a service time, so queues form behind it. dm-delay delays every I/O without
bounding how many are in service (16 writes in flight finish together, as no
disk arm would), and QEMU's throttling is set on the host at boot, before the
guest can measure D. null_blk (configfs) has both a completion time per
request and a hardware queue depth, in the guest, with its data in the
guest's memory (memory_backed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECTOR = 512
# The fio jobs the bench and the calibration run (bench/workloads.py).
RANDOM_DEPTH = 16
SEQUENTIAL_DEPTH = 4
SEQUENTIAL_BLOCK = 1 << 20
QUEUE_ROOM = 64  # requests a disk's block queue holds (a SATA disk's NCQ 32, doubled by blk-mq)


@dataclass(frozen=True)
class DiskModel:
    """A disk as a service time, a number of requests served at once, and a largest request.

    Its declared figures (what a datasheet or a measurement of the real disk
    gives) follow from those three, for the bench's jobs:
    - one 4 KiB write at a time waits one service time;
    - 16 random 4 KiB writes in flight complete `depth` per service time;
    - 1 MiB sequential writes, 4 in flight, are split into `max_io` pieces,
      `depth` of which are served per service time.
    """

    name: str
    what: str
    service_ms: float
    depth: int
    max_io: int  # bytes
    rotational: bool

    def __post_init__(self) -> None:
        if self.service_ms <= 0 or self.depth < 1 or self.max_io < 4096 or self.max_io % 4096:
            raise ValueError(f"disk model {self.name}: bad figures")

    @property
    def qd1_write_ms(self) -> float:
        """Mean latency of 4 KiB random writes, one at a time."""
        return self.service_ms

    @property
    def random_iops(self) -> float:
        """4 KiB random writes per second with 16 in flight."""
        return min(RANDOM_DEPTH, self.depth) / (self.service_ms / 1000)

    @property
    def sequential_mb_s(self) -> float:
        """1 MiB sequential writes with 4 in flight, MB/s (10^6 bytes)."""
        piece = min(self.max_io, SEQUENTIAL_BLOCK)
        pieces_in_flight = SEQUENTIAL_DEPTH * math.ceil(SEQUENTIAL_BLOCK / piece)
        return min(self.depth, pieces_in_flight) * piece / (self.service_ms / 1000) / 1e6

    def declared(self) -> dict[str, float]:
        """The figures the calibration checks, physical units."""
        return {
            "qd1_write_ms": self.qd1_write_ms,
            "random_iops": self.random_iops,
            "sequential_mb_s": self.sequential_mb_s,
        }

    def null_blk(self, dilation: float, overhead_s: float = 0.0) -> dict[str, int]:
        """The configfs attributes of a null_blk device that behaves like this disk, D times
        slower, once the guest's own time per request (`overhead_s`) is added back."""
        return {
            "completion_nsec": round((self.service_ms / 1000 * dilation - overhead_s) * 1e9),
            "hw_queue_depth": self.depth,
            "submit_queues": 1,  # one queue: `depth` is the whole disk's, not per CPU
            "max_sectors": self.max_io // SECTOR,
        }

    def queue(self) -> dict[str, str]:
        """The block queue's settings (sysfs, in this order) in front of the disk: what Linux
        gives the real disk, as far as it holds under dilation.

        - Room to queue. blk-mq sizes a scheduler's queue from the driver's depth (twice
          it), so a disk served two at a time would have four requests' room; a SATA disk's
          has 64. mq-deadline then lets writes take 3/4 of it (`async_depth`), figured when the
          scheduler starts, so it is set after `nr_requests` (Linux 6.1 figures it from the
          old size when `nr_requests` changes).
        - The kind of disk (null_blk says non-rotational, whatever it models): md's read
          balancing follows from it.
        - No writeback throttling (blk-wbt). It limits the writes in flight to a disk from
          constants the lab cannot dilate: the queue depth it finds when the disk appears
          (4 on null_blk, 32 on a SATA disk; it allows at most 16) and a 100 ms window. It
          counts every write md sends to a leg (md drops the flag that exempts O_DIRECT's),
          and on a dilated null_blk it let them through one at a time: md RAID1 ran at half a
          disk's throughput. On the real disk it allows 8 to 16, more than the disk serves at
          once.
        """
        return {
            "scheduler": "mq-deadline",
            "nr_requests": str(QUEUE_ROOM),
            "iosched/async_depth": str(QUEUE_ROOM * 3 // 4),
            "rotational": "1" if self.rotational else "0",
            "wbt_lat_usec": "0",
        }


# A 7200 rpm SATA disk with its write cache off (a mirror wants writes on the
# platter): a random 4 KiB write costs a seek and half a turn, NCQ serves two
# at once, and sequential writes stream at about 105 MB/s (512 KiB requests:
# the block layer splits a 1 MiB write of scattered pages in two anyway, at
# 128 segments, so a larger limit would make the figure depend on the
# writer's memory).
HDD = DiskModel("hdd", "7200 rpm SATA disk", service_ms=10.0, depth=2, max_io=512 << 10, rotational=True)
# A SATA SSD, as the cache disks: 60 us per 4 KiB write, about 67,000 random
# IOPS at QD16, about 550 MB/s sequential (8 KiB pieces, four at a time).
SSD = DiskModel("ssd", "SATA SSD", service_ms=0.06, depth=4, max_io=8 << 10, rotational=False)
DISK_MODELS = {m.name: m for m in (HDD, SSD)}
# Which model the lab's cache disks get when its data disks get one.
CACHE_DISK_MODEL = {"hdd": "ssd"}


@dataclass(frozen=True)
class LinkModel:
    """A link between the sites: a rate and a one-way delay."""

    rate_bit_s: float
    delay_s: float

    def netem(self, dilation: float) -> list[str]:
        """`tc ... netem` arguments for one direction, D times slower."""
        return netem_args(self.delay_s * dilation, None, self.rate_bit_s / dilation, None)


# The sites' LAN: 10 Gbit/s, 0.1 ms round trip. Faster than the modelled
# disk, as TH-MSNS's Gigabit network was faster than its disks.
LAN = LinkModel(rate_bit_s=10e9, delay_s=50e-6)


def netem_args(
    delay_s: float, jitter_s: float | None, rate_bit_s: float | None, loss: str | None
) -> list[str]:
    """netem arguments with times in microseconds and rates in kbit, so that scaled values stay exact."""
    args: list[str] = []
    if delay_s:
        args += ["delay", f"{round(delay_s * 1e6)}us"]
        if jitter_s:
            args.append(f"{round(jitter_s * 1e6)}us")
    if rate_bit_s:
        args += ["rate", f"{max(1, round(rate_bit_s / 1000))}kbit"]
    if loss:
        args += ["loss", loss]
    return args


def overhead_to_take_off(measured: dict[str, float], service_lab_s: float) -> float:
    """How much of the guest's own time per request to take off the service time it gives
    null_blk, from what a probe disk took beyond its service time for each kind of request.

    Under emulation a request costs the guest time of its own: submission, the timer's
    interrupt, the completion, the wakeup of whoever waits, and for a large request the
    copy into the disk's memory (measured at a dilation of about 9: 2 ms one at a time,
    3 ms queued, 15-18 ms for 512 KiB, against 85 ms of service). One correction cannot
    remove all three, so it takes off their mean, and never more than half the service time.
    """
    mean = sum(max(0.0, value) for value in measured.values()) / len(measured)
    return min(mean, service_lab_s / 2)


# What the boot-time probes measure (remirror.lab.dilation): each a time per
# operation on the host and in the guest.
PROBES = ("cpu", "syscall", "tcp_round_trip", "block_write")


def dilation_factor(host: dict[str, float], guest: dict[str, float]) -> float:
    """How many times slower the guest is: the geometric mean of the probes' ratios.

    No one path sets a mirror's CPU cost: a write crosses user code, system
    calls, the block layer and the TCP stack, so each weighs the same.
    """
    ratios = probe_ratios(host, guest)
    return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))


def probe_ratios(host: dict[str, float], guest: dict[str, float]) -> dict[str, float]:
    """Guest time over host time for each probe."""
    missing = [p for p in PROBES if not host.get(p) or not guest.get(p)]
    if missing:
        raise ValueError(f"dilation: no measurement of {', '.join(missing)}")
    return {p: guest[p] / host[p] for p in PROBES}


def parse_dilation(text: str) -> float | None:
    """`auto` (None: measure at boot) or a factor of at least 1."""
    if text == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--dilation {text!r}: expected auto or a number such as 30") from None
    if not 1 <= value <= 1000:
        raise ValueError("--dilation must be auto or 1 to 1000")
    return value


def to_physical_seconds(lab_seconds: float, dilation: float) -> float:
    """A duration measured in the lab, as it would be on the modelled hardware."""
    return lab_seconds / dilation


def sync_hours(size_bytes: float, rate_bytes_s: float) -> float:
    """Hours to copy `size_bytes` at `rate_bytes_s`."""
    return size_bytes / rate_bytes_s / 3600
