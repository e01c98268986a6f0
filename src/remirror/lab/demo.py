"""`remirror lab demo`: a narrated tour of remirror on the lab, for a newcomer.

It does as much as remirror can do today and says plainly what is not there
yet; each capability, as it lands, adds its step here.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from remirror.facts.parsers import parse_bitmap_examine
from remirror.lab import net
from remirror.lab.probes import array_size, lab_names, legs_hold_the_same_data, wait_idle
from remirror.lab.spec import LAB_FILE, Wan
from remirror.profile import load_profile
from remirror.runner.local import LocalRunner
from remirror.units import format_size

PROFILE = "profiles/lab.yaml"
_NAMES = lab_names()
MD, LOCAL, REMOTE_DISK = _NAMES.md, _NAMES.local_disk, _NAMES.remote_disk

_run = LocalRunner("site-a").run


class Timeline:
    """Prints each step with the seconds since the tour began."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.started = time.monotonic()
        self.say = say

    def __call__(self, message: str) -> None:
        self.say(f"[{time.monotonic() - self.started:6.1f}s] {message}")


def _mdstat_line() -> str:
    text = Path("/proc/mdstat").read_text()
    match = re.search(r"^md\w+ : .*$\n.*(\[[U_]+\])", text, flags=re.M)
    return f"{match.group(0).split(chr(10))[0]} {match.group(1)}" if match else "(no array)"


def _size(device: str) -> str:
    return format_size(int(_run(["blockdev", "--getsize64", device]).stdout))


def _write(device: str, offset_mib: int, mib: int) -> None:
    _run(
        [
            "dd",
            "if=/dev/urandom",
            f"of={device}",
            "bs=1M",
            f"count={mib}",
            f"seek={offset_mib}",
            "oflag=direct",
        ],
        timeout=600,
    )


def _reconcile_until_mirrored(step: Timeline, timeout: float = 600.0) -> bool:
    """`remirror reconcile` passes, as cron or `remirror watch` would run them, until MIRRORED."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = _run(["remirror", "reconcile", PROFILE], ok_codes=(0, 1, 2), timeout=900)
        step(f"remirror reconcile (exit {done.returncode}): {done.stdout.strip().splitlines()[-1]}")
        if done.returncode == 0:
            return True
        time.sleep(5)
    return False


def tour(say: Callable[[str], None]) -> int:
    """Run the tour; return 0 when every step that exists worked."""
    net.require_lab()
    step = Timeline(say)
    step(f"the lab: site A is this VM's root namespace, site B is namespace site-b ({LAB_FILE})")
    profile = load_profile(PROFILE)
    mirror = profile.mirrors[0]
    step(
        f"validated {PROFILE}: mirror {mirror.name} from {mirror.primary.site}:{mirror.primary.disk}"
        f" to {mirror.replicas[0].site}:{mirror.replicas[0].disk} ({mirror.replication.mode})"
    )
    hostname, version = _run(["ssh", "root@site-b", "hostname && remirror --version"]).stdout.splitlines()
    step(f"ssh root@site-b answers as {hostname!r}, where {version} runs too")
    step(f"link round trip site A -> site B: {net.round_trip_ms():.2f} ms")
    wan = Wan(delay="7ms")
    net.apply_wan(wan)
    step(f"emulated WAN (netem delay 7ms each way): round trip {net.round_trip_ms():.1f} ms")
    net.clear_wan()
    built = _run(["remirror", "apply", "--yes", PROFILE], timeout=900).stdout
    step(f"remirror apply built the mirror: {built.strip().splitlines()[-1]}")
    step(f"/proc/mdstat: {_mdstat_line()} (W = the remote leg, write-mostly: reads stay local)")
    # Until the initial sync has copied the whole disk, every bitmap chunk is dirty:
    # what a cut costs shows only on a mirror that is in sync.
    synced = wait_idle(MD, timeout=900)
    step(f"initial sync done {synced:.0f}s later: both legs hold the same {_size(MD)}, the bitmap is clean")
    _write(MD, offset_mib=0, mib=16)
    step("wrote 16 MiB through /dev/md/lab0 (O_DIRECT)")
    net.set_link(False)
    step("cut the link; writing 8 MiB more (md fails the remote leg after the iSCSI timeouts)")
    _write(MD, offset_mib=64, mib=8)
    step(f"/proc/mdstat: {_mdstat_line()} (F = failed: writes went on locally)")
    bitmap = parse_bitmap_examine(_run(["mdadm", "-X", LOCAL]).stdout)
    step(
        f"the bitmap marks {bitmap.dirty} of its {bitmap.bits} chunks ({format_size(bitmap.dirty_bytes)} of"
        f" {_size(MD)}) to resync: what was written during the cut, not the whole disk"
    )
    net.set_link(True)
    step(f"link restored: site B reachable? {net.wait_until_reachable()}")
    step("the reconciler brings the leg back (iscsid logs in by itself; md needs a --re-add):")
    if not _reconcile_until_mirrored(step):
        step("the mirror did not come back: that is a bug, please report it")
        return 1
    step(f"bitmap-based recovery done; /proc/mdstat: {_mdstat_line()}")
    same = legs_hold_the_same_data(LOCAL, REMOTE_DISK, array_size(MD))
    step(f"both legs' data regions identical: {same}")
    step("done" if same else "the legs differ: that is a bug, please report it")
    return 0 if same else 1
