"""What the benchmarks share: running commands, building and taking apart the lab's mirror.

The benchmarks run inside a lab (`./dev bench`); results go to $LAB_OUT
(bench/out/ on the host). Under an emulated CPU the absolute numbers mean
little: every figure is compared with its baseline measured in the same run.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from basics import log, run

from remirror.lab import probes
from remirror.lab.probes import LAB_PROFILE, lab_names

OUT = Path(os.environ.get("LAB_OUT", "bench/out"))
MD = lab_names().md
MIRROR = lab_names().mirror
CDP_VOLUME = lab_names().cdp_volume
REMOTE_LEG = lab_names().remote_leg
MIRROR_DISKS = ("/dev/lab/a0", "/dev/lab/b0", "/dev/lab/a-fast0", "/dev/lab/b-fast0")
CAUTION = (
    "The lab is a QEMU/TCG VM whose CPU is emulated, tens of times slower than native. Its"
    " disks and links are modelled (null_blk, netem) and slowed by the same measured factor,"
    " the dilation, so that CPU and physical costs keep the proportion they have on the modelled"
    " hardware: lab figures times (rates) or over (times) the dilation are physical estimates;"
    " the targets are ratios within this run."
)


def profile(
    name: str,
    *,
    mode: str = "sync",
    replica_cache: bool = False,
    primary_cache: bool = False,
    cdp_every: int = 0,
    replica_points_every: int = 0,
) -> Path:
    """The lab profile as a benchmark configuration; its path.

    Every configuration uses the `wan` iSCSI timeouts (on a slow link a NOP reply
    waits behind queued writes, and the grid must not lose its session) and
    remirror's default bitmap chunk, 64 MiB: the lab profile's 1 MiB chunk keeps
    its tests' resyncs short, but costs a remote bitmap write per MiB written.
    """
    text = LAB_PROFILE.read_text().replace("timeouts: lan", "timeouts: wan")
    text = re.sub(r" *bitmap_chunk: .*\n", "", text)
    if mode == "sync":
        text = text.replace("mode: async", "mode: sync")
        text = text.replace(
            "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", ""
        )
    if replica_cache:
        text = text.replace(
            "        disk: /dev/lab/b0\n",
            "        disk: /dev/lab/b0\n        cache: {disk: /dev/lab/b-fast0}\n",
        )
    if primary_cache:
        text = text.replace(
            "      disk: /dev/lab/a0\n", "      disk: /dev/lab/a0\n      cache: {disk: /dev/lab/a-fast0}\n"
        )
    if cdp_every:
        # A point every `cdp_every` seconds of lab time (the contract's 60 s or Mariner's 10 s
        # times the dilation; bench/suite.py, cdp_config). Random writes over the whole region
        # at QD16 diverge from each point by up to the region (128 MiB): a window of two
        # points and 60% of the pool for history keep the pool from filling (the volume is
        # 40% of the mirror, 204 MiB, enough for the region).
        text += f"    cdp: {{every: {cdp_every}s, keep: {2 * cdp_every}s, history: 60}}\n"
    if replica_points_every:
        # The DR site's own points under its leg (`replicas[].points`), taken by its own daemon
        # (site_b_view): as CDP above, two points' window and 60% of the pool for history.
        every = replica_points_every
        points = f"        points: {{every: {every}s, keep: {2 * every}s, history: 60}}\n"
        text = text.replace("        disk: /dev/lab/b0\n", "        disk: /dev/lab/b0\n" + points)
    path = Path("/run") / f"bench-{name}.yaml"
    path.write_text(text)
    return path


# The lab profile's sites as site A has them, and as site B's own view has them (itself local).
_SITES_AT_A = """sites:
  site-a:
    host: local
  site-b:
    host: ssh://root@site-b
    ssh:
      identity_file: /etc/remirror/lab/id_ed25519
      known_hosts: /etc/remirror/lab/known_hosts
"""
_SITES_AT_B = """sites:
  site-a:
    host: ssh://root@site-a
  site-b:
    host: local
"""
SITE_B_PROFILES = Path("/etc/remirror")  # where site B reads its own profiles (its agent's scope)


def site_b_view(path: Path) -> Path:
    """Site B's own view of the profile at `path` (the same mirrors, site B local), where site B
    reads its profiles, so that its own points are its to take (`replicas[].points`,
    docs/security.md); written before `apply`, whose requests site B holds to it. Removed by
    `destroy_with_site_b_points`."""
    text = path.read_text()
    if _SITES_AT_A not in text:
        sys.exit(f"bench: {path}: the lab profile's sites block changed; site_b_view cannot swap it")
    view = SITE_B_PROFILES / path.name
    view.write_text(text.replace(_SITES_AT_A, _SITES_AT_B))
    return view


def destroy_with_site_b_points(path: Path, view: Path) -> None:
    """`destroy` of a mirror whose DR leg holds site B's own points: the primary's destroy leaves
    them (only site B takes them down), so site B takes them down before the disks are wiped."""
    log(f"destroy {path.name}, then site B's own points")
    run("remirror", "destroy", "--yes", str(path), MIRROR, timeout=900)
    # 3: no stack there (an apply that failed before it built one): nothing to take down.
    run("site-b", "remirror", "cdp", "down", str(view), MIRROR, "--leg", ok=(0, 3), timeout=900)
    view.unlink(missing_ok=True)
    wipe(MIRROR_DISKS)


def md_sysfs(name: str, device: str = MD) -> str:
    return probes.md_sysfs(name, device)


def wait_idle(device: str = MD, timeout: float = 900) -> None:
    """Until md has nothing to resync and no leg missing."""
    try:
        probes.wait_idle(device, timeout)
    except TimeoutError as error:
        sys.exit(f"bench: {error}")


def apply(path: Path) -> None:
    log(f"apply {path.name}")
    run("remirror", "apply", "--yes", str(path), timeout=900)
    wait_idle()
    log(f"{path.name}: mirrored")


# What the next configuration reads as blank before it builds on a disk: signatures, md's
# superblock and bitmap, and CDP's metadata, which on these 512 MiB disks takes the first 28 MiB
# (remirror.facts.cdp.layout). 8 MiB left a CDP step's metadata on the DR leg, and the next
# stack there was refused as "holds data where CDP's metadata goes" (2026-12-04).
WIPE_BYTES = 32 << 20


def wipe(disks: tuple[str, ...]) -> None:
    """No signature or metadata left for the next configuration (remirror refuses disks that
    carry one)."""
    for disk in disks:
        run("wipefs", "--all", "--quiet", disk)
        count = f"count={WIPE_BYTES >> 20}"
        run("dd", "if=/dev/zero", f"of={disk}", "bs=1M", count, "oflag=direct", "status=none")


def destroy(path: Path) -> None:
    """Take the mirror apart and wipe its disks."""
    log(f"destroy {path.name}")
    run("remirror", "destroy", "--yes", str(path), "lab0", timeout=900)
    wipe(MIRROR_DISKS)


def wan(delay_ms: float = 0, rate_mbit: int | None = None) -> None:
    """Emulate a link on both ends (netem): `delay_ms` each way, `rate_mbit` if given; none: clear."""
    if not delay_ms and rate_mbit is None:
        run("remirror", "lab", "wan", "--clear")
        return
    argv = ["remirror", "lab", "wan", "--delay", f"{delay_ms:g}ms"]
    if rate_mbit is not None:
        argv += ["--rate", f"{rate_mbit}mbit"]
    run(*argv)
