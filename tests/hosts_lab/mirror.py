"""What the hosts' lab tests share: the two sites' mirror (m0, sync) in the one profile both
hosts hold; a writer that records what was acknowledged; waiting for MIRRORED, for
start's unit and fstab's mount; and what is on a DR site's leg alone."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from pathlib import Path

from remirror.facts.parsers import parse_bitmap_examine
from remirror.lab.hosts import writer
from remirror.lab.hosts.lab import KNOWN_HOSTS, SITE_KEY, HostsLab
from remirror.lab.hosts.machine import Host

PROFILE = "/etc/remirror/m.yaml"
MD = "/dev/md/m0"
# md's sysfs directory of the mirror, for a shell on its host (the array's kernel name varies).
MD_SYSFS = f"/sys/block/$(basename $(readlink -f {MD}))/md"
WATCH = "remirror-watch@m.service"  # the primary's reconciler, where a test runs it
DATA = "/srv/data"
RECORDS = f"{DATA}/records"
WRITER = "/root/writer.py"
A_LEG = "/dev/disk/by-id/virtio-a0"
B_LEG = "/dev/disk/by-id/virtio-b0"
MIRRORS = """\
mirrors:
  - name: m0
    device: /dev/md/m0
    primary: {site: site-a, disk: /dev/disk/by-id/virtio-a0, portal: "192.0.2.1:3260"}
    replicas:
      - {site: site-b, disk: /dev/disk/by-id/virtio-b0, portal: "192.0.2.2:3260"}
    replication: {mode: sync, bitmap_chunk: 1MiB, on_link_loss: degrade}
"""
SSH = f"ssh: {{identity_file: {SITE_KEY}, known_hosts: {KNOWN_HOSTS}}}"
# One profile, copied unchanged to both hosts: each finds its own site by its host name
# (remirror.profile.identity), every site written with the address the other reaches it at.
ONE_PROFILE = (
    f"version: 1\nname: m\nsites:\n  site-a: {{host: 'ssh://root@site-a', {SSH}}}\n"
    f"  site-b: {{host: 'ssh://root@site-b', {SSH}}}\n{MIRRORS}"
)
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


def mirror_state(a: Host, profile: str = PROFILE) -> str:
    out = a.run(f"remirror status {profile} -o json", check=False).stdout
    try:
        return str(json.loads(out)["mirrors"][0]["state"])
    except (ValueError, KeyError, IndexError):
        return "unknown"


def wait_mirrored(a: Host, timeout: float = SLOW, *, profile: str = PROFILE, md: str = MD) -> None:
    """Until status says MIRRORED and md has nothing left to resync.

    md's own word is read first, until the array has every leg and nothing to resync, and only
    then status asked: a status (both sites observed) costs seconds of the host's one emulated
    CPU, which the resync being waited for needs too."""
    deadline = time.monotonic() + timeout
    state = "not asked"
    sysfs = f"/sys/block/$(basename $(readlink -f {md}))/md"
    while True:
        said = a.run(f"cat {sysfs}/degraded {sysfs}/sync_action", check=False).stdout.split()
        if said == ["0", "idle"]:
            state = mirror_state(a, profile)
            if state == "MIRRORED":
                return
        assert time.monotonic() < deadline, f"still {state}: {a.run('cat /proc/mdstat').stdout}"
        time.sleep(3)


def unit_outcome(host: Host, unit: str, through_retries: bool = False) -> dict[str, str]:
    """How a oneshot unit's run ended, once it is done or waits to try again (or, with
    `through_retries`, once it is done for good): its ActiveState, SubState, Result and
    ExecMainStatus ("active", "exited", "success", "0" when it ran well)."""
    deadline = time.monotonic() + SLOW
    while True:
        shown = dict(
            line.split("=", 1)
            for line in host.run(
                f"systemctl show -p ActiveState -p SubState -p Result -p ExecMainStatus {unit}"
            ).stdout.splitlines()
        )
        waiting = shown["ActiveState"] == "activating" and (
            through_retries or shown["SubState"] != "auto-restart"
        )
        if not waiting or time.monotonic() > deadline:
            return shown
        time.sleep(3)


def wait_bitmap_clean(a: Host, member: str) -> None:
    """Until md's write-intent bitmap, as `member` (a leg at `a`) holds it, marks no chunk
    dirty. md clears a chunk's bit two to three of its daemon's 5 s passes after the chunk's
    last write, and mkfs's discard marks every chunk: a resync measured after a cut that
    came sooner would count mkfs's chunks beside what the cut left (a clean-clone run's did,
    the whole disk). A bit that never clears fails here, with md's own account of it."""
    deadline = time.monotonic() + 120
    while True:
        shown = a.run(f"mdadm --examine-bitmap {member}").stdout
        if parse_bitmap_examine(shown).dirty == 0:
            return
        assert time.monotonic() < deadline, shown
        time.sleep(2)


def cut_while_writing(a: Host, cut: list[Host], count: int, clean_from: str | None = None) -> int:
    """From MIRRORED (and, with `clean_from`, a leg at `a`, its bitmap clean), the writer on the
    primary until `count` of its records are acknowledged, then the power of `cut` (in that
    order, at once); the last record acknowledged."""
    wait_mirrored(a)
    if clean_from is not None:
        wait_bitmap_clean(a, clean_from)
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
    outcome = unit_outcome(a, "remirror-start@m.service")
    assert (outcome["ActiveState"], outcome["Result"]) == ("active", "success"), a.run(
        "journalctl -b -u remirror-start@m --no-pager -o cat | tail -30"
    ).stdout


def legs_agree(a: Host) -> str:
    """md's own check of the mirror (every block of both legs read and compared) run to its
    end: its mismatch count, "0" when the legs hold the same data. The reconciler stops a
    check it finds running (md would read the replica over the link: remirror.plan.md,
    STOP_CHECK), and an interrupted check's count covers only what it read: the watch, where
    it runs, is held still (SIGSTOP) for the check, and a check a pass stopped first is run
    again."""
    a.run(f"systemctl kill --signal=SIGSTOP {WATCH} 2>/dev/null || true")
    try:
        for _ in range(3):
            a.run(
                f"echo check > {MD_SYSFS}/sync_action && sleep 1 && mdadm --wait {MD}",
                check=False,
                timeout=SLOW,
            )
            ended = a.run("dmesg | grep -E 'md: md[0-9]+: data-check (done|interrupted)' | tail -n 1").stdout
            if ended.strip().endswith("done."):
                return a.run(f"cat {MD_SYSFS}/mismatch_cnt").stdout.strip()
    finally:
        a.run(f"systemctl kill --signal=SIGCONT {WATCH} 2>/dev/null || true")
    raise AssertionError(f"md's check did not run to its end three times: {ended}")


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


def install_sites(lab: HostsLab, profile: str) -> None:
    """As README's steps install a site, up to `apply`: hosts booted, remirror installed, the
    same profile copied to every site, the start unit enabled at every site (a DR site makes
    its own export again at boot)."""
    lab.boot_all()
    lab.install()
    lab.write_profile("m", profile)
    for host in lab.hosts.values():
        host.run("systemctl enable remirror-start@m.service")


def mirror_in_use(lab: HostsLab) -> None:
    """Once the mirror is applied: in sync, ext4 on it, mounted from fstab, and the writer on
    every host."""
    for host in lab.hosts.values():
        host.put(Path(writer.__file__), WRITER)
    a = lab["site-a"]
    wait_mirrored(a)
    # Inode tables zeroed now, not by ext4's lazy init after each mount (a background
    # writer that would blur what a resync wrote).
    a.run(f"mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 {MD} && mkdir -p {DATA}")
    a.write("/etc/fstab", a.run("cat /etc/fstab").stdout + FSTAB)
    a.run(f"systemctl daemon-reload && mount {DATA}")


def boot_together(hosts: list[Host]) -> None:
    """The power back at once on every host of `hosts`, each booting on its own."""
    booted = [threading.Thread(target=host.boot) for host in hosts]
    for thread in booted:
        thread.start()
    for thread in booted:
        thread.join()
