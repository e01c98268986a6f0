"""The bench's peer, DRBD 8.4, built and taken apart on two hosts as bench/peer.py builds it.

Nothing of remirror's runs here: `./dev bench` runs this module before bench/peer.py
measures, so that a peer that rotted (a drbd-utils upgrade that reads the resource file
otherwise, a module that no longer loads, a teardown that leaves DRBD's metadata behind for
remirror's guards to refuse) stops the bench in three minutes, not hours into it. It tests the
bench, not remirror: CI's tiers do not run it (alone: `.venv/bin/pytest tests/bench_lab`, as
root). The pair is Debian 12's kernel module with drbd-utils, built from the same typed
resource (remirror.lab.hosts.drbd) with the user guide's throughput and WAN tuning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts import drbd
from remirror.lab.hosts.lab import HostsLab
from remirror.lab.hosts.machine import Host
from tests.hosts_lab.conftest import CHECKOUT

A_DISK, B_DISK = "/dev/disk/by-id/virtio-a0", "/dev/disk/by-id/virtio-b0"
DISK_SIZE = 64 * 1024**2
PIECES = (1, 17, 40)  # MiB offsets of the primary's data written before the pair is made


@pytest.fixture(scope="module")
def hosts(work: Path) -> Iterator[HostsLab]:
    lab = HostsLab(
        work,
        {"site-a": ["a0"], "site-b": ["b0"]},
        checkout=CHECKOUT,
        sizes={"a0": DISK_SIZE, "b0": DISK_SIZE},
    )
    try:
        lab.boot_all()
        yield lab
    finally:
        lab.stop()


def resource(protocol: drbd.WireProtocol = "C") -> drbd.Resource:
    return drbd.Resource(
        name="peer",
        protocol=protocol,
        primary=drbd.End("site-a", "192.0.2.1", A_DISK),
        secondary=drbd.End("site-b", "192.0.2.2", B_DISK),
    )


def digest(host: Host, disk: str, offset_mib: int, count_mib: int) -> str:
    out = host.run(
        f"dd if={disk} bs=1M skip={offset_mib} count={count_mib} iflag=direct status=none | sha256sum"
    ).stdout
    return out.split()[0]


def test_drbd_pair_syncs_the_primary_s_data_replicates_a_write_and_leaves_no_signature(
    hosts: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b = hosts["site-a"], hosts["site-b"]
    for at in PIECES:
        a.run(f"dd if=/dev/urandom of={A_DISK} bs=1M count=2 seek={at} oflag=direct conv=notrunc status=none")
    pair = resource()
    drbd.bring_up(a, b, pair)
    try:
        synced = drbd.wait_synced(a, pair, timeout=600)
        assert synced.roles == ("Primary", "Secondary"), synced
        assert synced.protocol == "C", synced
        record_property("proc_drbd_in_sync", a.run("cat /proc/drbd").stdout)
        record_property("initial_sync_kib_sent", synced.counters["ns"])
        # The initial sync copied the primary's disk: its data is at the DR site, as it was.
        for at in PIECES:
            assert digest(b, B_DISK, at, 2) == digest(a, A_DISK, at, 2), at
        # A write through the DRBD device, acknowledged in protocol C once both disks hold it.
        a.run(f"dd if=/dev/urandom of={pair.device} bs=1M count=1 seek=30 oflag=direct status=none")
        assert digest(a, A_DISK, 30, 1) == digest(b, B_DISK, 30, 1) == digest(a, pair.device, 30, 1)
        assert drbd.state(b, pair) is not None
    finally:
        drbd.tear_down([a, b], pair)
    for host, disk in ((a, A_DISK), (b, B_DISK)):
        assert drbd.state(host, pair) is None, host.run("cat /proc/drbd").stdout
        # blkid exits 2 when it finds no signature at all: DRBD's metadata is gone.
        found = host.run(f"blkid -p {disk}", check=False)
        assert found.returncode == 2, (host.name, found.stdout)
        assert host.run(f"test -e {pair.path}", check=False).returncode == 1
