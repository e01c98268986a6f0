"""Replica legs without md's bad block log: added that way, or switched to it in place.

Why (docs/safety.md, "A write a leg did not take"): with a bad block log, md
answers a write that one leg failed by recording the sectors in that leg's
log and going on. The write is acknowledged, mdstat still shows the leg in
sync, and the write-intent bitmap's chunk is cleared as if every leg had it
(raid1.c, narrow_write_error; found in the lab, kernel 6.1): the DR copy
lacks acknowledged writes and nothing will send them. Without a log md fails
the leg at its first failed write, the bitmap keeps every chunk the leg
misses from then on, and the reconciler's `--re-add` resyncs exactly those:
DRBD's `on-io-error detach`. So a replica leg has no log.

mdadm (4.2) gives every device it adds a log, and drops one only on a
re-add: `--re-add --update=no-bbl` (refused while the log lists sectors),
`--update=force-no-bbl` (drops them). Both steps here go through such a
re-add, each run to its end once begun (remirror.agent.critical):

- `add_replica_legs`: new legs into a running array, their first recovery
  (a whole copy) not yet begun: held at sector 0 (`sync_max`), each leg added,
  failed, removed and re-added without a log, then let go, so that nothing is
  copied before the switch and the recovery starts from the first sector.
- `drop_bad_block_log`: a leg in sync that has a log (an array made before,
  the old primary's leg after a promotion), perhaps with sectors in it (a
  write that leg failed): failed, its listed sectors read while md still
  shows them and again from its superblock once it is out, the chunks that
  hold them marked dirty in the array's bitmap (`bitmap_set_bits`), then
  re-added without a log: the bitmap recovery rewrites them with the rest of
  what it missed meanwhile, and from then on a failed write fails the leg.

The primary's own leg keeps its log (mdadm's default): a sector it cannot
write is then read from a replica, the only good copy, and `status` and
`check` say so (health/report.py), which keeps reads local for the rest.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from remirror.agent.critical import must_finish
from remirror.agent.md_slots import remove_failed
from remirror.errors import CommandError, RemirrorError
from remirror.facts.parsers import parse_bad_blocks, parse_examine_badblocks, parse_member_state
from remirror.runner.local import LocalRunner

if TYPE_CHECKING:  # the agent imports the catalogue where it decodes a step
    from remirror.protocol.steps import AddReplicaLegs, DropBadBlockLog

_runner = LocalRunner("agent")
IDLE_WAIT = 60.0  # seconds for md to end a recovery held at its first sector once its leg failed


def add_replica_legs(step: AddReplicaLegs) -> None:
    """The agent's `add_replica_legs` step: `devices` into `md`'s free slots, each without a bad
    block log, their recovery (the copy of the primary's leg) starting at the first sector."""
    md, devices = step.md, list(step.devices)
    base = _md_base(md)
    if _read(base / "sync_action") != "idle":
        # A recovery under way cannot be held at sector 0 (md refuses to lower sync_max while
        # it runs): plain adds, each with a log the planner drops once the leg is in sync.
        for device in devices:
            _runner.run(["mdadm", md, "--add", device])
        return
    with must_finish():
        # One at a time: md gives a new leg its slot only while no recovery runs, and a leg
        # that never held a slot cannot be re-added. Each failed leg keeps its slot until all are
        # in (so each takes a slot of its own: two legs re-added into one slot, the second is
        # refused, seen in the lab), and leaves the array idle again.
        for device in devices:
            _write(base / "sync_max", "0")  # its recovery waits at sector 0: nothing copied yet
            try:
                _runner.run(["mdadm", md, "--add", device])
                _wait_for_slot(base, device)
                _runner.run(["mdadm", md, "--fail", device])
            finally:
                # Let go: the held recovery wakes, finds its leg failed and ends.
                _write(base / "sync_max", "max")
            _wait_idle(base, md)
        for device in devices:
            remove_failed(md, device)
        for device in devices:
            try:
                _runner.run(["mdadm", md, "--re-add", "--update=no-bbl", device])
            except CommandError:
                # Not taken back (its superblock is only a new leg's): a new leg, with a log the
                # planner drops once it is in sync.
                _runner.run(["mdadm", "--zero-superblock", device])
                _runner.run(["mdadm", md, "--add", device])


def drop_bad_block_log(step: DropBadBlockLog) -> None:
    """The agent's `drop_bad_block_log` step: the member `device` of `md`, in sync, re-added
    without a bad block log, what its log listed rewritten by the bitmap recovery."""
    md, device = step.md, step.device
    base = _md_base(md)
    member = base / f"dev-{Path(os.path.realpath(device)).name}"
    if not member.is_dir():
        raise RemirrorError(f"{device} is not a member of {md}")
    _check_others_whole(base, md, member)
    state = parse_member_state(_read(member / "state"))
    if "in_sync" not in state or "faulty" in state:
        raise RemirrorError(f"{device} is not in sync in {md}: its log is dropped once it is")
    chunk = int(_read(base / "bitmap/chunksize") or "0")
    if chunk <= 0:
        raise RemirrorError(f"{md} has no write-intent bitmap: a leg's log is not dropped without one")
    offset = int(_read(member / "offset"))
    with must_finish():
        _runner.run(["mdadm", md, "--fail", device])
        # Still listed while md holds the failed member: what it recorded up to now. Writes in
        # flight when it failed may add to it before it lets go; md marks their chunks in the
        # bitmap (the array is degraded by then), and those it persisted are in the superblock,
        # read once it is out.
        listed = parse_bad_blocks(
            _read(member / "bad_blocks") + "\n" + _read(member / "unacknowledged_bad_blocks")
        )
        remove_failed(md, device)
        stored = parse_examine_badblocks(_runner.run(["mdadm", "--examine-badblocks", device]).stdout)
        sectors = sorted(set(listed) | set(stored))
        for first, last in dirty_chunks(sectors, offset, chunk):
            _write(base / "bitmap_set_bits", f"{first}-{last}")
        update = "force-no-bbl" if sectors else "no-bbl"
        try:
            _runner.run(["mdadm", md, "--re-add", f"--update={update}", device])
        except CommandError as refused:
            # Back with its log and what it lists (nothing hidden), and said.
            _runner.run(["mdadm", md, "--re-add", device])
            raise RemirrorError(
                f"mdadm kept the bad block log of {device} in {md} (`--re-add --update={update}`:"
                f" {refused.stderr_tail}): re-added with it"
            ) from None
    if "write_mostly" in state:
        # mdadm's re-add restores it from the superblock; should it not have, set it again.
        back = base / f"dev-{Path(os.path.realpath(device)).name}" / "state"
        if back.exists() and "write_mostly" not in _read(back):
            _write(back, "writemostly")


def _check_others_whole(base: Path, md: str, member: Path) -> None:
    """Only a leg whose every fellow holds the whole array is taken out, even for a second: md
    idle and not degraded, every other member in sync with nothing in its own log (the
    primary's sectors its disk failed are read from this very leg), not read-only, and this
    leg's disk reachable (a leg whose session is down would hang its removal)."""
    if _read(base / "sync_action") != "idle" or _read(base / "degraded") != "0":
        raise RemirrorError(f"{md} is degraded or resyncing: a leg's log is dropped once it is MIRRORED")
    if _read(base / "array_state") in ("read-auto", "readonly"):
        raise RemirrorError(f"{md} is read-only: a leg's log is dropped once it takes writes")
    for other in base.glob("dev-*"):
        if other == member:
            continue
        state = parse_member_state(_read(other / "state"))
        if "in_sync" not in state or "faulty" in state or _read(other / "bad_blocks"):
            raise RemirrorError(
                f"{other.name.removeprefix('dev-')} in {md} is not whole (not in sync, or its disk failed"
                " writes): this leg may hold the only good copy, so it stays"
            )
    disk_state = Path(f"/sys/class/block/{member.name.removeprefix('dev-')}/device/state")
    if disk_state.exists() and _read(disk_state) != "running":
        raise RemirrorError(f"{member.name.removeprefix('dev-')} is {_read(disk_state)}: its link is down")


def dirty_chunks(sectors: list[tuple[int, int]], data_offset: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """The bitmap chunks (first, last) that hold these device sectors ((first sector, sectors),
    md's bad block entries, counted from the device's start), the array's data starting at
    `data_offset` sectors."""
    chunks = []
    for start, length in sectors:
        first_byte = max(0, start - data_offset) * 512
        last_byte = max(0, start + length - data_offset) * 512 - 1
        if last_byte < first_byte:
            continue  # before the data (md's own metadata): no chunk of the array
        chunks.append((first_byte // chunk_bytes, last_byte // chunk_bytes))
    return chunks


def _wait_for_slot(base: Path, device: str) -> None:
    """Until md has given the new leg a slot (its superblock then names its role: a re-add needs it)."""
    slot = base / f"dev-{Path(os.path.realpath(device)).name}" / "slot"
    deadline = time.monotonic() + IDLE_WAIT
    while not (slot.exists() and _read(slot).isdigit()):
        if time.monotonic() > deadline:
            raise RemirrorError(f"md gave {device} no slot within {IDLE_WAIT:.0f}s")
        time.sleep(0.2)


def _wait_idle(base: Path, md: str) -> None:
    deadline = time.monotonic() + IDLE_WAIT
    while _read(base / "sync_action") != "idle":
        if time.monotonic() > deadline:
            raise RemirrorError(f"{md} did not end its recovery {IDLE_WAIT:.0f}s after its new legs failed")
        time.sleep(0.2)


def _md_base(md: str) -> Path:
    return Path(f"/sys/block/{Path(os.path.realpath(md)).name}/md")


def _read(path: Path) -> str:
    return path.read_text().strip()


def _write(path: Path, value: str) -> None:
    path.write_text(value)
