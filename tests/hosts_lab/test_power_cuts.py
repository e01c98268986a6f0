"""Power cuts with nobody there when the power comes back: separate hosts, systemd, real boots.

A primary (site-a) mirrors onto a DR site (site-b) in sync mode, as installed by a site's
steps: the profile in /etc/remirror on each, the reconciler as its unit
(remirror-watch@m.service), the mirror's file system in /etc/fstab. While a writer appends
records with fsync and prints each acknowledged one, a host's power is cut (QEMU killed: no
shutdown), and the host boots again with nobody typing anything. The module's tests run in
order on the same pair of hosts: each starts from, and ends at, MIRRORED.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts import writer
from remirror.lab.hosts.lab import KNOWN_HOSTS, SITE_KEY, HostsLab
from remirror.lab.hosts.machine import Host
from tests.hosts_lab.conftest import CHECKOUT

PROFILE = "/etc/remirror/m.yaml"
MD = "/dev/md/m0"
DATA = "/srv/data"
RECORDS = f"{DATA}/records"
WRITER = "/root/writer.py"
A_LEG = "/dev/disk/by-id/virtio-a0"
B_LEG = "/dev/disk/by-id/virtio-b0"
MIRRORS = """\
mirrors:
  - name: m0
    device: /dev/md/m0
    primary: {site: site-a, disk: /dev/disk/by-id/virtio-a0}
    replicas:
      - {site: site-b, disk: /dev/disk/by-id/virtio-b0, portal: "192.0.2.2:3260"}
    replication: {mode: sync, bitmap_chunk: 1MiB, on_link_loss: degrade}
"""
SSH = f"ssh: {{identity_file: {SITE_KEY}, known_hosts: {KNOWN_HOSTS}}}"
VIEWS = {
    "site-a": f"version: 1\nname: m\nsites:\n  site-a: {{host: local}}\n"
    f"  site-b: {{host: 'ssh://root@site-b', {SSH}}}\n{MIRRORS}",
    "site-b": f"version: 1\nname: m\nsites:\n  site-a: {{host: 'ssh://root@site-a', {SSH}}}\n"
    f"  site-b: {{host: local}}\n{MIRRORS}",
}
# What an administrator puts in fstab for a file system on the mirror (docs/safety.md,
# "Boot"): no boot waits on it forever (nofail), and the device gets the time
# remirror-start@ takes to assemble it, waiting for the DR site if it boots too.
FSTAB = f"{MD} {DATA} ext4 defaults,nofail,x-systemd.device-timeout=10min 0 2\n"
SLOW = 600.0


class Writer:
    """writer.py on a host over SSH; `acknowledged` is the last record whose fsync returned,
    `first` the first this writer wrote (the file may hold an earlier writer's records)."""

    def __init__(self, host: Host) -> None:
        self.first = -1
        self.acknowledged = -1
        self.proc = subprocess.Popen(
            [*host.ssh_argv(), f"python3 {WRITER} {RECORDS}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if self.first < 0:
                self.first = int(line)
            self.acknowledged = int(line)

    def wait_for(self, number: int, timeout: float = SLOW) -> None:
        """Until record `number` is acknowledged."""
        deadline = time.monotonic() + timeout
        while self.acknowledged < number:
            assert self.proc.poll() is None, "the writer ended"
            assert time.monotonic() < deadline, f"only records up to {self.acknowledged} acknowledged"
            time.sleep(0.5)

    def wait_for_more(self, count: int) -> None:
        """Until this writer has had `count` records of its own acknowledged."""
        self.wait_for(0)  # its first record: `first` is known from then on
        self.wait_for(self.first + count - 1)

    def ended(self) -> int:
        """After its host's power cut (or stop): the last acknowledged record."""
        self.proc.wait(timeout=60)
        self.reader.join(timeout=10)
        return self.acknowledged

    def stop(self, host: Host) -> int:
        host.run(f"pkill -f '{WRITER}'", check=False)
        return self.ended()


def mirror_state(a: Host) -> str:
    out = a.run(f"remirror status {PROFILE} -o json", check=False).stdout
    try:
        return str(json.loads(out)["mirrors"][0]["state"])
    except (ValueError, KeyError, IndexError):
        return "unknown"


def wait_mirrored(a: Host, timeout: float = SLOW) -> None:
    """Until status says MIRRORED and md has nothing left to resync."""
    deadline = time.monotonic() + timeout
    while True:
        state = mirror_state(a)
        if (
            state == "MIRRORED"
            and a.run(f"mdadm --wait {MD}; cat /sys/block/md*/md/degraded").stdout.split()[-1] == "0"
        ):
            return
        assert time.monotonic() < deadline, f"still {state}: {a.run('cat /proc/mdstat').stdout}"
        time.sleep(5)


def unit_outcome(host: Host, unit: str) -> str:
    """A oneshot unit's state and result once it is done: "active success" when it ran well."""
    deadline = time.monotonic() + SLOW
    while True:
        shown = host.run(
            f"systemctl show -P ActiveState {unit}; systemctl show -P Result {unit}"
        ).stdout.split()
        if shown[0] != "activating" or time.monotonic() > deadline:
            return " ".join(shown)
        time.sleep(3)


def cut_while_writing(a: Host, cut: list[Host], count: int) -> int:
    """From MIRRORED, the writer on the primary until `count` of its records are acknowledged,
    then the power of `cut` (in that order, at once); the last record acknowledged."""
    wait_mirrored(a)
    load = Writer(a)
    load.wait_for_more(count)
    for host in cut:
        host.power_cut()
    return load.ended()


def wait_started_and_mounted(a: Host) -> None:
    """After the primary's boot: until fstab's entry has mounted the mirror's file system, which
    remirror-start@ assembled (no one types anything); the unit must have ended well."""
    deadline = time.monotonic() + SLOW
    while a.run(f"findmnt -n {DATA}", check=False).returncode != 0:
        assert time.monotonic() < deadline, a.run(
            "cat /proc/mdstat; journalctl -b -u 'remirror-start*' -u 'mdadm*' --no-pager | tail -30"
        ).stdout
        time.sleep(3)
    assert unit_outcome(a, "remirror-start@m.service") == "active success", a.run(
        "journalctl -b -u remirror-start@m --no-pager -o cat | tail -30"
    ).stdout


def legs_agree(a: Host) -> str:
    """md's own check of the mirror (every block of both legs read and compared): its
    mismatch count, "0" when the legs hold the same data."""
    md = f"/sys/block/$(basename $(readlink -f {MD}))/md"
    a.run(f"echo check > {md}/sync_action && sleep 1 && mdadm --wait {MD}", check=False, timeout=SLOW)
    return a.run(f"cat {md}/mismatch_cnt").stdout.strip()


def written_sectors(host: Host, disk: str) -> int:
    """Sectors written to a disk since the host booted (its sysfs stat, field 7)."""
    return int(host.run(f"cat /sys/class/block/$(basename $(readlink -f {disk}))/stat").stdout.split()[6])


def replica_holds(b: Host, last: int, leg: str = B_LEG) -> str:
    """Whether records 0..last are on a DR site's leg alone: its data copied out, fsck'd, mounted."""
    examine = b.run(f"mdadm --examine {leg}").stdout
    offset = int(re.search(r"Data Offset : (\d+) sectors", examine).group(1))  # type: ignore[union-attr]
    b.run(f"dd if={leg} of=/var/tmp/leg.img bs=1M iflag=skip_bytes,direct skip={offset * 512} status=none")
    preen = b.run("e2fsck -fp /var/tmp/leg.img", check=False)
    assert preen.returncode in (0, 1), (
        f"the replica's file system needed more than replaying its journal: {preen}"
    )
    assert b.run("e2fsck -fn /var/tmp/leg.img", check=False).returncode == 0
    b.run("mkdir -p /mnt/leg && mount -o loop,ro /var/tmp/leg.img /mnt/leg")
    try:
        return b.run(f"python3 {WRITER} --check /mnt/leg/records {last}", check=False).stdout.strip()
    finally:
        b.run("umount /mnt/leg; rm -f /var/tmp/leg.img")


@pytest.fixture(scope="module")
def sites(work: Path) -> Iterator[HostsLab]:
    """Two hosts, remirror installed, the mirror applied and in sync, its file system mounted
    from fstab, the reconciler's unit enabled, and the writer on site-a and site-b."""
    lab = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"]}, checkout=CHECKOUT)
    try:
        set_up(lab, VIEWS)
        yield lab
    finally:
        lab.stop()


def set_up(lab: HostsLab, views: dict[str, str]) -> None:
    """Hosts booted, remirror installed, each site's view written, the mirror applied and in
    sync, its file system mounted from fstab, the start and reconciler units enabled at the
    primary (site-a), and the writer on every host."""
    lab.boot_all()
    lab.install()
    lab.write_profile("m", views)
    for host in lab.hosts.values():
        host.put(Path(writer.__file__), WRITER)
    a = lab["site-a"]
    a.run(f"remirror apply {PROFILE} --yes")
    wait_mirrored(a)
    # Inode tables zeroed now, not by ext4's lazy init after each mount (a background
    # writer that would blur what a resync wrote).
    a.run(f"mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 {MD} && mkdir -p {DATA}")
    a.write("/etc/fstab", a.run("cat /etc/fstab").stdout + FSTAB)
    a.run(
        f"systemctl daemon-reload && mount {DATA} && "
        "systemctl enable remirror-start@m.service && systemctl enable --now remirror-watch@m.service"
    )


def boot_together(hosts: list[Host]) -> None:
    """The power back at once on every host of `hosts`, each booting on its own."""
    booted = [threading.Thread(target=host.boot) for host in hosts]
    for thread in booted:
        thread.start()
    for thread in booted:
        thread.join()


def test_the_primary_s_power_cut_comes_back_unattended_with_every_acknowledged_write_on_both_legs(
    sites: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b = sites["site-a"], sites["site-b"]
    last = cut_while_writing(a, [a], 200)
    # Sync mode: what the application was told is written is on the DR site's leg too, and
    # that leg alone is a file system that only needs its journal replayed.
    assert replica_holds(b, last) == f"records 0..{last} are all in /mnt/leg/records"
    before = written_sectors(b, B_LEG)
    record_property("primary_boot_seconds", round(a.boot(), 1))
    # Nobody types anything: remirror-start@ assembles the mirror as apply would (udev took the
    # primary's leg into an inactive md127, which nothing else ever starts), and fstab's
    # entry checks and mounts its file system.
    wait_started_and_mounted(a)
    assert a.run(f"python3 {WRITER} --check {RECORDS} {last}").returncode == 0
    # The replica came back with it (both legs assembled together, as apply judged them), and
    # md resynchronised what the bitmap marked: the DR site's disk takes a few chunks, not the
    # whole disk again.
    started = a.run("journalctl -b -u remirror-start@m --no-pager -o cat").stdout
    assert "AssembleArray /dev/md/m0 from /dev/disk/by-id/virtio-a0 and 1 replica(s)" in started, started
    wait_mirrored(a)
    resynced = (written_sectors(b, B_LEG) - before) * 512
    record_property("replica_bytes_written_by_the_rejoin", resynced)
    assert 0 < resynced < 256 * 1024**2 // 4, resynced


def test_the_dr_site_s_power_cut_leaves_the_primary_writing_and_the_dr_site_rejoins_by_itself(
    sites: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b = sites["site-a"], sites["site-b"]
    wait_mirrored(a)
    load = Writer(a)
    load.wait_for_more(100)
    b.power_cut()
    cut_at = load.acknowledged
    # The primary degrades (the iSCSI session's replacement timeout) and goes on writing.
    load.wait_for(cut_at + 200)
    assert a.run("cat /sys/block/md*/md/degraded").stdout.strip() == "1"
    last = load.stop(a)
    record_property("dr_boot_seconds", round(b.boot(), 1))
    # Nobody types anything at either site. At the DR site's boot, Debian's initramfs takes
    # its disk into an inactive md127 (its copy of mdadm.conf predates the `<ignore>` line),
    # and Debian's rtslib-fb-targetctl cannot read the configuration remirror's rtslib saved
    # (docs/safety.md, "Boot"): the primary's reconciler stops the partial array there, makes
    # the target again and re-adds the leg by the bitmap: the DR site's disk takes the chunks
    # written while it was away, not the whole disk.
    wait_mirrored(a)
    watched = a.run("journalctl -b -u remirror-watch@m --no-pager -o cat").stdout
    assert "site-b StopArray" in watched, watched[-3000:]
    assert "site-a ReAddLeg" in watched, watched[-3000:]
    assert b.run("ls /sys/kernel/config/target/iscsi/*/tpgt_1/lun").stdout.strip()
    resynced = written_sectors(b, B_LEG) * 512
    record_property("replica_bytes_written_by_the_rejoin", resynced)
    assert 0 < resynced < 256 * 1024**2 // 4, resynced
    assert a.run(f"python3 {WRITER} --check {RECORDS} {last}").returncode == 0


def test_both_sites_power_cut_at_once_come_back_mirrored_with_no_split_brain_and_nothing_lost(
    sites: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b = sites["site-a"], sites["site-b"]
    # A site-wide outage: both hosts lose power in the same instant, and come back together.
    last = cut_while_writing(a, [a, b], 100)
    boot_together([a, b])
    # The primary's start waits for the DR site (it tries again until it can reach it), makes
    # its export again and assembles both legs: each leg's superblock says the other was in
    # sync when the power went, so nothing is taken for a split brain.
    wait_started_and_mounted(a)
    started = a.run("journalctl -b -u remirror-start@m --no-pager -o cat").stdout
    assert "AssembleArray /dev/md/m0 from /dev/disk/by-id/virtio-a0 and 1 replica(s)" in started, started
    assert "split brain" not in started.lower(), started
    wait_mirrored(a)
    assert a.run(f"python3 {WRITER} --check {RECORDS} {last}").returncode == 0
    resynced = written_sectors(b, B_LEG) * 512
    record_property("replica_bytes_written_after_the_outage", resynced)
    assert 0 < resynced < 256 * 1024**2 // 4, resynced
    assert legs_agree(a) == "0"


def test_a_reboot_of_the_primary_during_a_resync_resumes_it_and_the_legs_end_equal(
    sites: HostsLab, record_property: Callable[[str, object], None]
) -> None:
    a, b = sites["site-a"], sites["site-b"]
    wait_mirrored(a)
    # The link goes down; the primary degrades and takes 48 MiB the DR site misses.
    sites.link("site-a", "site-b", up=False)
    a.run(f"dd if=/dev/urandom of={DATA}/bulk bs=1M count=48 conv=fsync status=none", timeout=SLOW)
    assert a.run("cat /sys/block/md*/md/degraded").stdout.strip() == "1"
    bulk = a.run(f"sha256sum {DATA}/bulk").stdout
    # md's own rate limit (the host's, not the mirror's: the profile sets none) keeps the resync
    # running long enough to reboot during it; a boot forgets it.
    a.run("echo 2000 > /proc/sys/dev/raid/speed_limit_max")
    before = written_sectors(b, B_LEG)
    sites.link("site-a", "site-b", up=True)
    md = f"/sys/block/$(basename $(readlink -f {MD}))/md"
    deadline = time.monotonic() + SLOW
    while a.run(f"cat {md}/sync_action").stdout.strip() != "recover":
        assert time.monotonic() < deadline, a.run("cat /proc/mdstat").stdout
        time.sleep(2)
    time.sleep(5)
    progress = a.run(f"cat {md}/sync_completed").stdout.strip()
    record_property("resync_when_rebooted", progress)
    # A clean reboot in the middle: systemd unmounts, logs the session out, stops the array.
    record_property("primary_reboot_seconds", round(a.reboot(), 1))
    wait_started_and_mounted(a)
    # Early boot started the primary's own leg alone, under another name than /dev/md/m0 (md
    # had failed the replica's leg when its session ended at shutdown): start assembles it
    # again under its name, and the resync goes on from the bitmap.
    started = a.run("journalctl -b -u remirror-start@m --no-pager -o cat").stdout
    assert "AssembleArray /dev/md/m0 from /dev/disk/by-id/virtio-a0" in started, started
    record_property("started_under_another_name_first", "under another name" in started)
    wait_mirrored(a)
    resynced = (written_sectors(b, B_LEG) - before) * 512
    record_property("replica_bytes_written_by_the_resyncs", resynced)
    # What the bitmap marked, once and a part again: never the whole disk.
    assert 48 * 1024**2 <= resynced < 160 * 1024**2, resynced
    assert a.run(f"sha256sum {DATA}/bulk").stdout == bulk
    assert legs_agree(a) == "0"
