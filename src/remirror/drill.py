"""`remirror drill`: prove at the DR site that the replica can take over, without touching it.

A drill runs at the site of a replica with its own points (`replicas[].points`,
docs/security.md), where the points are (docs/drill.md):

1. It refuses when this site runs the mirror's array (promoted) or the leg's
   record makes it the primary (a promotion, or a split brain waiting for
   `remirror resolve`): a drill proves a DR copy, and there is none then.
2. It removes what an earlier drill left (one killed, or a crash): the
   processes on its mount, the mount, its devices, its snapshot.
3. The copy: a thin snapshot (DRILL_THIN_ID) of the point asked for, or of
   one it takes now, made under the index lock so that no pruning deletes
   the point meanwhile. The point itself is never written; neither is the
   replica's volume, which LIO goes on exporting: the snapshot shares the
   pool's blocks copy-on-write, and the primary's writes cost what they cost
   after any point (bench/points_cost.py).
4. Over the snapshot, a linear device past md's data offset: the file
   system as the mirror holds it. Mounted writable (a journal replays), it
   is the view the operator's checks run on.
5. The checks, one after another, each in a process group of its own with a
   time limit; then everything is torn down (what the checks left running
   on the mount is killed) and the record is written (remirror.facts.drill).

Nothing of it is exported: no target, no LUN, so no initiator can mistake
the copy for the replica, and nothing in its output says "promote".
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

from remirror.agent import cdp as points
from remirror.agent import lock
from remirror.agent.cdp_requests import Refused, point_named
from remirror.agent.digest import data_offset
from remirror.agent.drill_records import write_record
from remirror.agent.hooks import Hooks, around, forget_owed, run_line
from remirror.errors import CommandError, RemirrorError, UsageError
from remirror.facts.cdp import Layout, RecoveryPoint, snapshot_table, stack_names
from remirror.facts.cdp_index import CdpIndex
from remirror.facts.drill import CheckRun, DrillRecord
from remirror.facts.site import SiteFacts
from remirror.files import make_dirs
from remirror.profile.layers import Hooks as HooksGiven
from remirror.profile.model import Mirror, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, leg_device, points_key
from remirror.roles import leg_records, roles
from remirror.runner.local import LocalRunner

# Thin device ids are 24 bits; a leg's points count up from 1. The drill's copy takes the last.
DRILL_THIN_ID = (1 << 24) - 1
MOUNT_DIR = Path("/run/remirror/drill")
# A drill's writes (a journal replayed, a database's recovery) take pool space the replica's
# writes need: a leg's pool refuses writes when full (facts.cdp.is_leg_points). Above this, no drill.
POOL_USE_REFUSED = 0.9
# ... and a drill whose writes take it to this is stopped (its copy removed: that space freed).
POOL_USE_STOPPED = 0.95
CHECK_TIMEOUT = 3600.0
GRACE_SECONDS = 10.0  # between SIGTERM and SIGKILL for what the checks left running

_runner = LocalRunner("drill")


class DrillRefused(UsageError):
    """A drill that must not run now (the site promoted, no points here): one line, nothing done."""


@dataclass(frozen=True)
class DrillDevices:
    """The names a drill of one leg uses, all derived from the points' key (MIRROR.SITE)."""

    key: str

    @property
    def snapshot(self) -> str:
        """The writable thin snapshot of the point (the whole leg, md's superblock too)."""
        return f"{stack_names(self.key)['volume']}-drill"

    @property
    def data(self) -> str:
        """The linear device over the snapshot's data: the mirror's content, its file system."""
        return f"{self.snapshot}-data"

    @property
    def mount(self) -> Path:
        return MOUNT_DIR / self.key


def drilled_leg(profile: Profile, mirror: Mirror) -> ReplicaLeg:
    """The replica leg this host keeps points of, which a drill here starts from."""
    for replica in mirror.replicas:
        if profile.sites[replica.site].is_local:
            if replica.points is None:
                raise DrillRefused(
                    f"drill: {mirror.name}'s leg at {replica.site} keeps no points of its own"
                    " (replicas[].points): a drill starts from a copy of one of them"
                )
            return replica
    raise DrillRefused(
        f"drill: no replica of {mirror.name} is this host's (run the drill at the DR site, with its"
        " own view of the profile: the DR site `local`)"
    )


def refuse_unless_a_dr_copy(profile: Profile, mirror: Mirror, leg: ReplicaLeg, site: SiteFacts) -> None:
    """Refused when this site runs the mirror or its leg's record makes it the primary."""
    uuid_ = array_uuid(profile, mirror)
    array = site.array_named(mirror.name, uuid_)
    own = site.disks.get(leg_device(mirror, leg, site.dm))
    # On its own leg: another site's array is no promotion here (the lab's sites share one kernel).
    if array is not None and own is not None and own.kernel_name and array.member(own.kernel_name):
        raise DrillRefused(
            f"drill: {site.name} runs {mirror.name}'s array (promoted): a drill proves a DR copy,"
            " and this site is the primary now"
        )
    found = roles(mirror, leg_records(mirror, uuid_, {site.name: site}))
    if found.conflict:
        raise DrillRefused(f"drill: {mirror.name}: {found.conflict}")
    if found.primary == site.name:
        raise DrillRefused(
            f"drill: {mirror.name}'s leg at {site.name} records it as the primary (promoted, or a"
            " split brain waiting for `remirror resolve`): no drill until that is settled"
        )


def pool_danger(key: str) -> str:
    """Why a drill must stop now: the leg's pool nearly full (the replica's writes would fail)."""
    pool = points.pool_status(key)
    if pool.mode != "rw" or (pool.data_total and pool.data_used / pool.data_total >= POOL_USE_STOPPED):
        used = pool.data_used * 100 // max(pool.data_total, 1)
        return f"stopped: {key}'s pool is {used}% full ({pool.mode}): the replica's writes need it"
    return ""


def refuse_unless_room(key: str) -> None:
    """Refused when the leg's pool is not writable or too full for a drill's writes."""
    pool = points.pool_status(key)
    if pool.mode != "rw":
        raise DrillRefused(f"drill: {key}'s pool is {pool.mode}, not rw: `remirror check` says why")
    if pool.data_total and pool.data_used / pool.data_total > POOL_USE_REFUSED:
        raise DrillRefused(
            f"drill: {key}'s pool is {pool.data_used * 100 // pool.data_total}% full: a drill's writes"
            f" could fill it and fail the replica's (no drill above {POOL_USE_REFUSED:.0%})"
        )


# --- the copy ------------------------------------------------------------------------------


def _mounted(path: Path) -> bool:
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    return any(line.split()[4] == str(path) for line in mounts if len(line.split()) > 4)


def _users(path: Path) -> list[int]:
    """Processes with a file, a directory or a mapping under `path` (as fuser -m finds them)."""
    prefix, found = str(path), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            links = [proc / "cwd", proc / "root", *(proc / "fd").iterdir()]
            targets = [str(link.readlink()) for link in links]
            targets += [line.split()[-1] for line in (proc / "maps").read_text().splitlines() if "/" in line]
        except OSError:
            continue  # gone, or a kernel thread
        if any(t == prefix or t.startswith(prefix + "/") for t in targets):
            found.append(int(proc.name))
    return found


def _stop_users(path: Path) -> None:
    """What the checks left running on the copy (a database they started): TERM, then KILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        users = _users(path)
        for pid in users:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + GRACE_SECONDS
        while users and time.monotonic() < deadline:
            time.sleep(0.2)
            users = _users(path)
        if not users:
            return


def remove_copy(devices: DrillDevices) -> bool:
    """Tear down a drill's copy, whatever is left of it; whether anything was."""
    found = False
    if _mounted(devices.mount):
        found = True
        _stop_users(devices.mount)
        _runner.run(["umount", str(devices.mount)], timeout=300)
    for name in (devices.data, devices.snapshot):
        if points.dm_exists(name):
            found = True
            points.remove_dm(name)
    pool = stack_names(devices.key)["pool"]
    deleted = _runner.run(["dmsetup", "message", pool, "0", "delete", str(DRILL_THIN_ID)], ok_codes=[0, 1])
    return found or deleted.returncode == 0


PickPoint = Callable[[CdpIndex], RecoveryPoint]


def point_picker(asked: dict[str, object]) -> PickPoint:
    """The point `--at` names (as `cdp` verbs read it); no such point is refused."""

    def pick(index: CdpIndex) -> RecoveryPoint:
        try:
            return point_named(asked, index)
        except Refused as refused:  # bad input: no drill
            raise DrillRefused(f"drill: {refused}") from None

    return pick


def snapshot_point(key: str, disk: str, at: PickPoint | None) -> tuple[RecoveryPoint, Layout]:
    """A thin snapshot (DRILL_THIN_ID) of the point `at` picks, or of one taken now; the point,
    and the stack's layout. Under the index lock: a pruning meanwhile could delete the point."""
    with points.index_locked(key, "drill"):
        index = points.read_index(disk)
        if index is None or index.mirror != key:
            raise DrillRefused(f"drill: {disk} carries no points of {key} (apply builds them)")
        if at is None:
            index = points.take_point(key, disk, index)
            point = index.points[-1]
        else:
            point = at(index)
        pool = stack_names(key)["pool"]
        _runner.run(["dmsetup", "message", pool, "0", "create_snap", str(DRILL_THIN_ID), str(point.id)])
    return point, index.layout


def activate_copy(devices: DrillDevices, plan: Layout, offset: int) -> str:
    """The copy as devices: the snapshot, and over it the mirror's content past md's data offset
    (`offset` sectors, the leg's). Built so that md never takes the copy for a leg of the mirror:
    the snapshot carries the mirror's md superblock, and udev runs `mdadm --incremental` on what
    shows one (a DR site's mdadm.conf ignores it, a hand-made one may not). So the snapshot
    starts as zeros, the data device claims it (dm holds what it maps exclusively), and only
    then does the snapshot's own table go in: md's attempt then finds it busy."""
    sectors = plan.volume_sectors
    snapshot = f"/dev/mapper/{devices.snapshot}"
    _runner.run(["dmsetup", "create", devices.snapshot, "--table", f"0 {sectors} zero"])
    table = f"0 {sectors - offset} linear {snapshot} {offset}"
    _runner.run(["dmsetup", "create", devices.data, "--table", table])
    _runner.run(
        ["dmsetup", "load", devices.snapshot, "--table", snapshot_table(devices.key, plan, DRILL_THIN_ID)]
    )
    _runner.run(["dmsetup", "resume", devices.snapshot])
    return f"/dev/mapper/{devices.data}"


def _file_system(device: str) -> str:
    found = _runner.run(["blkid", "-p", "-o", "value", "-s", "TYPE", device], ok_codes=[0, 2])
    return found.stdout.strip()


# --- the checks ----------------------------------------------------------------------------


def own_check(file_system: str, device: str) -> str:
    """The file system's own read-only check (after a mount replayed its journal)."""
    if file_system == "xfs":
        return f"xfs_repair -n {device}"
    return f"fsck -f -n {device}"


@contextmanager
def _mounted_copy(device: str, mount: Path, file_system: str) -> Iterator[None]:
    if not file_system:
        yield  # no file system blkid knows (a database on the raw device): the checks get the device
        return
    make_dirs(mount, 0o755)  # the application the hooks start reaches its data through it
    _runner.run(["mount", "-t", file_system, device, str(mount)], timeout=600)
    try:
        yield
    finally:
        _stop_users(mount)
        _runner.run(["umount", str(mount)], timeout=300)


# --- the drill -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DrillRequest:
    """What the operator asked for."""

    mirror: Mirror
    leg: ReplicaLeg
    at: PickPoint | None  # None: a point taken as the drill begins
    commands: tuple[str, ...]  # empty: the file system's own check
    keep_for: float = 0.0
    timeout: float = CHECK_TIMEOUT
    hooks: HooksGiven | None = None  # the drill's `hooks`, around the checks


def _hooks(request: DrillRequest) -> Hooks | None:
    return Hooks.from_json(request.hooks.as_json()) if request.hooks is not None else None


def drill(request: DrillRequest, say: Callable[[str], None]) -> DrillRecord:
    """Run one drill (the preconditions are the caller's: refuse_unless_*); its record, written."""
    mirror, leg = request.mirror, request.leg
    key = points_key(mirror, leg.site)
    devices = DrillDevices(key)
    with lock.holding(f"drill-{key}", lock.holder("drill"), 0.0):
        if remove_copy(devices):
            say(f"removed what an earlier drill of {mirror.name} left (it did not end)")
        # An after-hook an earlier drill owed stopped what it started on that copy's mount: the
        # removal above stopped it whole.
        forget_owed(f"drill-{key}")
        started = time.time()
        record = DrillRecord(mirror.name, leg.site, started, started, 0, started, False, ())
        checks: list[CheckRun] = []
        try:
            offset = data_offset(leg_device(mirror, leg)) // 512  # the copy's is the leg's
            point, plan = snapshot_point(key, leg.disk, request.at)
            taken = request.at is None
            record = replace(record, point=point.id, point_time=point.time, point_taken_by_drill=taken)
            say(f"drill copy of point #{point.id} ({started - point.time:.0f}s old): {devices.data}")
            device = activate_copy(devices, plan, offset)
            file_system = _file_system(device)
            env = {
                "REMIRROR_DRILL_DEVICE": device,
                "REMIRROR_DRILL_MOUNT": str(devices.mount) if file_system else "",
                "REMIRROR_DRILL_MIRROR": mirror.name,
            }
            # The hooks around the checks, on the mounted copy (a database started, then stopped
            # whatever the checks did); the checks only if the before-hook started it.
            danger = lambda: pool_danger(key)  # noqa: E731 - asked of the hooks and the checks alike
            hooks = around(_hooks(request), env, f"drill-{key}", danger)
            with _mounted_copy(device, devices.mount, file_system), hooks as ran:
                for command in request.commands if not ran.failures else ():
                    checks.append(run_line(command, env, request.timeout, danger))
                    say(f"check {'ok' if checks[-1].passed else 'FAILED'}: {command}")
                    if not checks[-1].passed:
                        break
                passed_at = time.time()
                if request.keep_for and all(c.passed for c in checks):
                    where = devices.mount if file_system else device
                    say(f"the copy stays at {where} for {request.keep_for:g}s (then it is removed)")
                    time.sleep(request.keep_for)
            # The hooks' runs are in the record as checks: the drill passes only if they pass.
            checks = [*([ran.before] if ran.before else []), *checks, *([ran.after] if ran.after else [])]
            for failure in ran.failures:
                say(f"FAILED: {failure}")
            if not request.commands and not ran.failures:
                own = own_check(file_system, device)
                checks.append(run_line(own, env, request.timeout, lambda: pool_danger(key)))
                say(f"check {'ok' if checks[-1].passed else 'FAILED'}: {checks[-1].command}")
                passed_at = time.time()
            if all(c.passed for c in checks):
                record = replace(record, checks_passed_at=passed_at)
        except UsageError:
            raise  # refused (no such point): no drill was run, so no record; the copy still goes
        except (RemirrorError, OSError) as error:
            text = error.one_line() if isinstance(error, RemirrorError) else str(error)
            record = replace(record, error=text)
        finally:
            try:
                remove_copy(devices)
            except (CommandError, OSError) as error:
                record = replace(record, cleaned_up=False, error=record.error or f"cleaning up: {error}")
        record = replace(record, checks=tuple(checks), finished=time.time())
        write_record(key, record)
    return record
