"""Three sites: a primary with a replica at each of two DR sites, on separate hosts with systemd:
the N-way mirror of Mariner, in "Efficient Logging and Replication Techniques for Comprehensive
Data Protection" (Maohua Lu, Shibiao Lin and Tzi-cker Chiueh).

One DR site loses its power: the primary goes on with the other in sync. Then the primary
loses its power: the remaining DR site's leg alone holds every acknowledged write. Both boot
with nobody typing anything: the primary's start assembles the mirror, and the reconciler
brings the first DR site back by the bitmap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts.lab import HostsLab
from tests.hosts_lab.conftest import CHECKOUT
from tests.hosts_lab.test_power_cuts import (
    B_LEG,
    MIRRORS,
    RECORDS,
    SSH,
    WRITER,
    Writer,
    boot_together,
    legs_agree,
    replica_holds,
    set_up,
    wait_mirrored,
    wait_started_and_mounted,
    written_sectors,
)

C_LEG = "/dev/disk/by-id/virtio-c0"
B_REPLICA = f'      - {{site: site-b, disk: {B_LEG}, portal: "192.0.2.2:3260"}}\n'
C_REPLICA = f'      - {{site: site-c, disk: {C_LEG}, portal: "198.51.100.3:3260"}}\n'
assert B_REPLICA in MIRRORS  # the two sites' mirror, with a replica at site-c too
THREE = MIRRORS.replace(B_REPLICA, B_REPLICA + C_REPLICA)


def view(local: str) -> str:
    """One site's view of the profile: itself local, the others over SSH."""
    sites = "".join(
        f"  {site}: {{host: local}}\n"
        if site == local
        else f"  {site}: {{host: 'ssh://root@{site}', {SSH}}}\n"
        for site in ("site-a", "site-b", "site-c")
    )
    return f"version: 1\nname: m\nsites:\n{sites}{THREE}"


@pytest.fixture(scope="module")
def sites(work: Path) -> Iterator[HostsLab]:
    lab = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"], "site-c": ["c0"]}, checkout=CHECKOUT)
    try:
        set_up(lab, {site: view(site) for site in ("site-a", "site-b", "site-c")})
        yield lab
    finally:
        lab.stop()


def test_with_a_replica_at_each_of_two_sites_the_last_one_standing_holds_every_acknowledged_write(
    sites: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b, c = sites["site-a"], sites["site-b"], sites["site-c"]
    wait_mirrored(a)
    load = Writer(a)
    load.wait_for_more(100)
    c.power_cut()
    cut_at = load.acknowledged
    load.wait_for(cut_at + 100)  # site-c's leg failed, site-b's in sync: the primary goes on
    assert a.run("cat /sys/block/md*/md/degraded").stdout.strip() == "1"
    a.power_cut()
    last = load.ended()
    assert replica_holds(b, last, B_LEG) == f"records 0..{last} are all in /mnt/leg/records"
    before_c = 0  # site-c's disk, written since its boot
    boot_together([a, c])
    wait_started_and_mounted(a)
    assert a.run(f"python3 {WRITER} --check {RECORDS} {last}").returncode == 0
    wait_mirrored(a)
    resynced = (written_sectors(c, C_LEG) - before_c) * 512
    record_property("site_c_bytes_written_by_the_rejoin", resynced)
    assert 0 < resynced < 256 * 1024**2 // 4, resynced
    assert legs_agree(a) == "0"
