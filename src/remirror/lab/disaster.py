"""Rehearse losing site A: a database under load, the link cut and site A gone at once, site B
promoted by force, then site B's copy checked the way its users would.

One rehearsal, in the lab:

1. `remirror apply` builds the mirror (site A primary) and it syncs.
2. ext4 on the mirror, PostgreSQL on ext4, pgbench's tables (remirror.lab.database).
3. pgbench runs; after `warm` seconds the link is cut and, at that same
   moment, every PostgreSQL process on site A is killed: site A is lost.
   (Nothing site A does afterwards can reach site B: the link is down.)
4. Site A's array stops (its leftovers: as if its power had gone).
5. On site B, as its operator would: `remirror promote --force`.
6. The file system: mounted (ext4 replays its journal), unmounted, then
   `e2fsck -fn` must find nothing.
7. PostgreSQL started on site B's copy (crash recovery), then its checks:
   balances, amcheck, and the transactions pgbench saw committed before
   the cut that site B lacks.

The mirror syncs and the database loads over the plain link; the WAN
(`wan`, netem on both ends) is on from the workload's start to the end.
The caller chooses the profile (mode, write_behind) and cleans up
(`cleanup`, which also takes the WAN off).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from remirror.lab import database, net, probes
from remirror.lab.spec import Wan
from remirror.profile import load_profile

# A remirror verb on site A: (*argv, ok_codes=...) -> (exit code, stdout, stderr).
Verb = Callable[..., tuple[int, str, str]]
MIRROR, MD, DISKS = "lab4", "/dev/md/lab4", ("/dev/lab/a3", "/dev/lab/b3")  # a mirror of its own
MOUNT_A, MOUNT_B = "/run/remirror-disaster-a", "/run/remirror-disaster-b"  # the lab's / is read-only
# The sites as site A's operator has them, and as site B's has them: site B local, site A over
# SSH (unreachable: the lab runs no sshd there, right for a site that is lost).
_SSH = (
    "    ssh:\n      identity_file: /etc/remirror/lab/id_ed25519\n"
    "      known_hosts: /etc/remirror/lab/known_hosts\n"
)
_SITE_A_LOCAL = f"  site-a:\n    host: local\n  site-b:\n    host: ssh://root@site-b\n{_SSH}"
_SITE_B_LOCAL = f"  site-a:\n    host: ssh://root@site-a\n{_SSH}  site-b:\n    host: local\n"
_WRITE_BEHIND = "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n"


def profiles(
    directory: Path, mode: str, write_behind: int = 1024, bitmap_chunk: str = "1MiB"
) -> tuple[str, str]:
    """The lab profile for MIRROR on DISKS in `mode`, as site A's operator keeps it and as site
    B's does; their paths (written into `directory`). The lab's 1 MiB bitmap chunk keeps resyncs
    short; remirror's default, 64 MiB, writes the bitmap (to every leg, site B's too) 64 times
    less often: a writer through a slow link then runs into it only rarely."""
    text = (
        probes.LAB_PROFILE.read_text()
        .replace("  - name: lab0\n    device: /dev/md/lab0\n", f"  - name: {MIRROR}\n    device: {MD}\n")
        .replace("      disk: /dev/lab/a0\n", f"      disk: {DISKS[0]}\n      portal: 192.0.2.1:3260\n")
        .replace("        disk: /dev/lab/b0\n", f"        disk: {DISKS[1]}\n")
    )
    if _SITE_A_LOCAL not in text or _WRITE_BEHIND not in text:
        raise RuntimeError("profiles/lab.yaml changed: update remirror.lab.disaster.profiles")
    wanted = f"      write_behind: {write_behind}\n" if mode == "async" else ""
    text = text.replace(_WRITE_BEHIND, wanted).replace("mode: async", f"mode: {mode}")
    text = text.replace("bitmap_chunk: 1MiB ", f"bitmap_chunk: {bitmap_chunk} ")
    site_a, site_b = directory / f"disaster-{mode}.yaml", directory / f"disaster-{mode}-site-b.yaml"
    site_a.write_text(text)
    site_b.write_text(text.replace(_SITE_A_LOCAL, _SITE_B_LOCAL))
    return str(site_a), str(site_b)


@dataclass
class Rehearsal:
    """What one rehearsal saw."""

    mode: str
    acknowledged: int = 0  # transactions pgbench saw committed before the cut
    missing: int = 0  # of those, the ones site B lacks
    write_behind_high_water: int | None = None  # md's max_backlog_used during the run
    fsck_clean: bool = False
    fsck_output: str = ""
    database: dict[str, object] = field(default_factory=dict)
    sound: bool = False  # the database started, its balances agree, amcheck found nothing
    seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        """For a test's record or the experiment's results."""
        return dict(self.__dict__)


def _sh(argv: list[str], timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {(done.stderr or done.stdout)[-800:]}")
    return done


def _on_b(*argv: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _sh(net.in_site_b(list(argv)), timeout, check)


def rehearse(
    remirror: Verb,
    profile: str,
    site_b_profile: str,
    *,
    wan: Wan | None = None,
    warm: float = 20.0,
    clients: int = 4,
    prepare: Callable[[], None] | None = None,
) -> Rehearsal:
    """One rehearsal (see the module's docstring) of MIRROR; `prepare` runs once the mirror is in
    sync, before anything is written to it."""
    mirror, md = MIRROR, MD
    started = time.monotonic()
    remirror("apply", "--yes", profile)
    probes.wait_idle(md, 900)
    if prepare is not None:
        prepare()
    mode = "async" if int(probes.md_sysfs("bitmap/backlog", md)) else "sync"
    _sh(["mkfs.ext4", "-q", "-F", md])
    _sh(["mkdir", "-p", MOUNT_A])
    _sh(["mount", md, MOUNT_A])
    cluster = database.create("a", MOUNT_A)
    cluster.start()
    database.load(cluster)
    _sh(["sync"])
    probes.wait_idle(md, 900)
    kernel = Path(md).resolve().name
    Path(f"/sys/block/{kernel}/md/bitmap/max_backlog_used").write_text("0")
    logs = f"{database.RUN_DIR}/pgbench-{int(time.time())}"
    workload = database.Workload(cluster, logs).start(clients, 3600)
    deadline = time.monotonic() + warm
    while time.monotonic() < deadline:
        if not workload.running():
            raise RuntimeError(f"pgbench ended before the cut: {workload.wait()}")
        time.sleep(0.2)
    found = Rehearsal(mode)
    # The cut, and site A lost with it: nothing it does from here reaches site B.
    cut = time.time()
    net.set_link(False)
    cluster.kill()
    found.write_behind_high_water = int(probes.md_sysfs("bitmap/max_backlog_used", md))
    workload.wait()
    acknowledged = workload.committed_before(cut)
    found.acknowledged = sum(acknowledged.values())
    _sh(["umount", MOUNT_A], timeout=300)  # its last writes fail the remote leg: the link is down
    _sh(["mdadm", "--stop", md], timeout=300)
    _on_b("remirror", "promote", site_b_profile, mirror, "--site", "site-b", "--force", "--yes")
    _on_b("mkdir", "-p", MOUNT_B)
    _on_b("mount", md, MOUNT_B)  # ext4 replays its journal here
    _on_b("umount", MOUNT_B)
    fsck = _on_b("e2fsck", "-fn", md, check=False)
    found.fsck_clean = fsck.returncode == 0
    found.fsck_output = (fsck.stdout + fsck.stderr)[-2000:]
    _on_b("mount", md, MOUNT_B)
    copy = database.Cluster("b", f"{MOUNT_B}/pg", 5433)
    try:
        verdict = database.judge(copy)
    finally:
        copy.stop()
        _on_b("umount", MOUNT_B, check=False)
    found.database = verdict.as_json()
    found.sound = verdict.sound
    found.missing = verdict.missing(acknowledged)
    found.seconds = round(time.monotonic() - started, 1)
    return found


def cleanup(remirror: Verb, profile: str) -> None:
    """The link back (no WAN), the mirror taken apart (it runs on site B now), both disks wiped."""
    net.clear_wan()
    net.set_link(True)
    net.wait_until_reachable()
    # A rehearsal cut short leaves its servers running on the mounts (on either site: one
    # `pkill` from site A reaches both, the lab's sites sharing its processes).
    database.Cluster("a", f"{MOUNT_A}/pg", 5432).kill()
    _sh(["umount", MOUNT_A], check=False)
    _on_b("umount", MOUNT_B, check=False)
    _sh(["mdadm", "--stop", MD], check=False)
    remirror("destroy", "--yes", profile, MIRROR, ok_codes=(0, 1))
    # Site A's session to the target site B fenced at its promotion is still there, failed: the
    # mirror as it runs now (site B primary) knows nothing of it. A next mirror of the same name
    # would log in to it again and find the dead session's disk.
    loaded = load_profile(profile)
    (wanted,) = [m for m in loaded.mirrors if m.name == MIRROR]
    iqn = loaded.replica_iqn(wanted, wanted.replicas[0])
    _sh(["iscsiadm", "-m", "node", "-T", iqn, "--logout"], check=False)
    _sh(["iscsiadm", "-m", "node", "-T", iqn, "-o", "delete"], check=False)
    # Whatever md still holds of the disks (the promoted array, udev's partial assemblies).
    disks = {Path(disk).resolve().name for disk in DISKS}
    for md in Path("/sys/block").glob("md*"):
        if disks & {p.name for p in (md / "slaves").iterdir()}:
            _sh(["mdadm", "--stop", f"/dev/{md.name}"], check=False)
    _sh(["wipefs", "--all", "--quiet", DISKS[0]])
    _on_b("wipefs", "--all", "--quiet", DISKS[1])
