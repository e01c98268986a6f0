"""Move a running array's local leg to its last slot, so that async writes can go behind.

md (raid1.c of Debian 12's 6.1) decides whether a write goes behind on the
first leg it writes to, in slot order: only a write-mostly leg there lets
the write be acknowledged before the replicas have it (bench/
write_behind_order.sh). New arrays are built that way round
(remirror.plan.md); an array made before, or one assembled on a promoted
site (whose own leg was a replica's, first), has the local leg first.

md has no command to swap slots, but two of its operations keep the order
of the legs they keep: a RAID1 shrunk to fewer slots packs its legs into
the lowest ones in order, and a returning leg whose slot is taken goes
into the first free one with only what its bitmap marks resynced
(raid1_add_disk: "we don't need a full recovery if this was recently any
drive of the array"). So: hold every write to the array (md's
`suspend_lo`/`suspend_hi`, which also waits for the writes in flight,
behind ones included), wait until the bitmap is clean (bits clear a few
daemon passes after the last write, sped up through `bitmap/time_base`),
take the local leg out, shrink the array to the legs left, give it back
its slot, and `--re-add` the local leg, into the last slot, with nothing to
resync. Reads go on throughout (from a replica for the moment the local leg
is out); writes wait a few seconds. The whole move runs to its end once
begun (remirror.agent.critical) and puts the leg back if a command fails.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from remirror.agent.critical import must_finish
from remirror.errors import RemirrorError
from remirror.facts.parsers import parse_bitmap_examine
from remirror.runner.local import LocalRunner

if TYPE_CHECKING:  # the agent imports the catalogue where it decodes a step
    from remirror.protocol.steps import LocalLegLast

_runner = LocalRunner("agent")
BITMAP_CLEAN_WAIT = 60.0  # seconds; with writes held, md clears bits in two daemon passes
REMOVE_WAIT = 60.0  # seconds for md to release a failed leg
IN_SYNC_WAIT = 120.0  # seconds for the returning leg's (empty) bitmap recovery
FAST_DAEMON = "1"  # seconds between bitmap daemon passes while writes are held


def local_leg_last(step: LocalLegLast) -> None:
    """The agent's `local_leg_last` step: `device` (the local leg) into the last slot of `md`."""
    md = Path(os.path.realpath(step.md)).name
    leg = Path(os.path.realpath(step.device)).name
    base = Path(f"/sys/block/{md}/md")
    slots = _slots(base)
    if leg not in slots:
        raise RemirrorError(f"{step.device} is not a member of {step.md}")
    if slots[leg] == max(slots.values()):
        return  # already last
    _check_whole(base, step.md, slots)
    with must_finish():
        time_base = _read(base / "bitmap/time_base")
        _write(base / "suspend_lo", "0")
        # Writes below suspend_hi wait in md; setting it first waits for those in flight.
        _write(base / "suspend_hi", _read(Path(f"/sys/block/{md}/size")))
        try:
            _write(base / "bitmap/time_base", FAST_DAEMON)
            _wait_bitmap_clean(step.device)
            _move_last(base, step.md, f"/dev/{leg}", len(slots))
        finally:
            _write(base / "bitmap/time_base", time_base)
            _write(base / "suspend_hi", "0")
    if _slots(base).get(leg) != len(slots) - 1:
        raise RemirrorError(f"{step.device} did not come back into the last slot of {step.md}")


def _move_last(base: Path, md: str, leg: str, legs: int) -> None:
    """Out, shrink (the other legs pack down in order), grow, back in: the last slot."""
    _runner.run(["mdadm", md, "--fail", leg])
    remove_failed(md, leg)
    try:
        _write(base / "raid_disks", str(legs - 1))
        _write(base / "raid_disks", str(legs))
    finally:
        # Whatever happened above, the leg goes back: into the last slot when the shrink
        # went through, into its own otherwise (the move is then tried again by a later apply).
        if _read(base / "raid_disks") != str(legs):
            _write(base / "raid_disks", str(legs))
        _runner.run(["mdadm", md, "--re-add", leg])
        _wait_in_sync(base, Path(leg).name)


def remove_failed(md: str, leg: str) -> None:
    """`--remove` of a failed leg, once md has let go of it (a read in flight holds it a moment)."""
    deadline = time.monotonic() + REMOVE_WAIT
    while _runner.run(["mdadm", md, "--remove", leg], ok_codes=(0, 1)).returncode != 0:
        if time.monotonic() > deadline:
            raise RemirrorError(
                f"md failed {leg} in {md} but did not let go of it within {REMOVE_WAIT:.0f}s: put it back"
                f" with `mdadm {md} --remove {leg}` then `mdadm {md} --re-add {leg}` (a bitmap resync)"
            )
        time.sleep(0.5)


def _check_whole(base: Path, md: str, slots: dict[str, int]) -> None:
    """Only an array with every leg in sync and nothing running is reshaped."""
    if _read(base / "degraded") != "0" or _read(base / "sync_action") != "idle":
        raise RemirrorError(f"{md} is degraded or resyncing: its legs are moved once it is MIRRORED")
    if _read(base / "raid_disks") != str(len(slots)):
        raise RemirrorError(f"{md} has a slot without a leg: its legs are moved once it is MIRRORED")
    for member in slots:
        if "in_sync" not in _read(base / f"dev-{member}/state"):
            raise RemirrorError(f"{member} is not in sync in {md}: its legs are moved once it is MIRRORED")


def _slots(base: Path) -> dict[str, int]:
    """The members in a slot, by kernel name."""
    found = {}
    for member in base.glob("dev-*"):
        slot = _read(member / "slot")
        if slot.isdigit():
            found[member.name.removeprefix("dev-")] = int(slot)
    return found


def _wait_bitmap_clean(leg: str) -> None:
    deadline = time.monotonic() + BITMAP_CLEAN_WAIT
    while True:
        bitmap = parse_bitmap_examine(_runner.run(["mdadm", "--examine-bitmap", leg]).stdout)
        if bitmap.dirty == 0:
            return
        if time.monotonic() > deadline:
            raise RemirrorError(
                f"the bitmap on {leg} still marks {bitmap.dirty} chunk(s) {BITMAP_CLEAN_WAIT:.0f}s after"
                " writes were held: legs not moved"
            )
        time.sleep(0.5)


def _wait_in_sync(base: Path, member: str) -> None:
    deadline = time.monotonic() + IN_SYNC_WAIT
    while "in_sync" not in _read(base / f"dev-{member}/state"):
        if time.monotonic() > deadline:
            raise RemirrorError(f"{member} is not in sync {IN_SYNC_WAIT:.0f}s after it was added back")
        time.sleep(0.2)


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    path.write_text(value)
