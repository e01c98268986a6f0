"""What each step of the protocol's catalogue may ask of this site (remirror.agent.policy).

A step arrives read into its class of the catalogue (remirror.protocol.steps:
every field of its type, nothing else); here it is checked field by field
against the site's scope through the Checker's vocabulary (devices, mirrors,
targets, dm names); a `run` step is one of a few command forms, never a
program of the sender's choosing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.agent.policy import NAME, UUID, Checker, Refused
from remirror.agent.policy_commands import COMMAND_CHECKS
from remirror.agent.policy_iscsi import node_secrets
from remirror.agent.policy_lio import LIO_CHECKS
from remirror.agent.policy_wireguard import wireguard, wireguard_tunnel
from remirror.errors import RemirrorError
from remirror.facts.cdp import is_leg_points
from remirror.facts.generations import HOW, SAVE_NAME
from remirror.protocol import steps as catalogue

if TYPE_CHECKING:
    from remirror.facts.scope import SiteScope

# What the planner writes to an md array's attributes, each with the values it writes there: a
# resync's limits (KiB/s, or `system`: the system-wide one, a schedule's `unlimited`),
# write-behind's count (at most md's 16383), safe mode's delay (remirror's one value,
# plan/md.SAFE_MODE_DELAY), and its repairs of a move or an add cut short: writes resumed
# (suspend_hi 0: never a suspension), resyncs released (sync_max max: never held), a check
# stopped (sync_action idle: never a resync started). Nothing else.
_LIMIT = re.compile(r"\d{1,12}|system")
_SYSFS_VALUES = {
    "sync_speed_min": _LIMIT,
    "sync_speed_max": _LIMIT,
    "suspend_hi": re.compile("0"),
    "sync_action": re.compile("idle"),
    "sync_max": re.compile("max"),
    "backlog": re.compile(r"\d{1,4}|1[0-5]\d{3}|16[0-2]\d\d|163[0-7]\d|1638[0-3]"),
    "safe_mode_delay": re.compile("10"),
}


MAX_STEP_TIMEOUT = 86400  # a command of remirror's that runs longer is hung


def mdadm_conf(check: Checker, step: catalogue.MdadmConfArrays) -> None:
    """remirror's block of mdadm.conf (the site writes the file, and keeps every line of its block
    the step does not name): each line one of the site's own mirrors' arrays, by its device
    (`/dev/md/NAME`) and UUID, once; `<ignore>` (boot never assembles it) only of one of them: of
    another array, the host's own system array's, it would leave the host unbootable."""
    ours = {uuid for ids in check.scope.array_ids.values() for _, uuid in ids} if check.scope else None
    seen: set[str] = set()
    for line in step.arrays:
        if not UUID.fullmatch(line.uuid):
            raise Refused(f"mdadm_conf: {line.uuid[:40]!r} is not an md array UUID")
        for said in (line.uuid, line.device):
            if said in seen:  # two lines of one array or device: mdadm assembles none of them
                raise Refused(f"mdadm_conf: {said} is in two lines")
            if said is not None:
                seen.add(said)
        if line.device is None:
            if line.metadata is not None or line.name is not None:
                raise Refused("mdadm_conf: an <ignore> line names no device, metadata or name")
            if ours is not None and line.uuid not in ours:
                raise Refused(f"mdadm_conf: <ignore> of {line.uuid}, not an array of {check._sources()}")
            continue
        md_name = line.device.removeprefix("/dev/md/")
        if (
            line.name is None
            or line.metadata is None
            or md_name == line.device
            or not NAME.fullmatch(md_name)
        ):
            raise Refused(f"mdadm_conf: {line.device[:60]!r} is not /dev/md/NAME with its metadata and name")
        check.mirror(line.name)
        if check.scope is not None and (line.device, line.uuid) not in check.scope.array_ids.get(
            line.name, ()
        ):
            raise Refused(
                f"mdadm_conf: {line.device} with UUID {line.uuid} is not mirror {line.name}'s array here"
            )
        if check.scope is not None:
            _runs_here(check.scope, line.name, line.uuid)


def _runs_here(scope: SiteScope, mirror: str, uuid: str) -> None:
    """An array assembles at boot only where the mirror runs: as its leg here says (the newest
    record of the array among the leg's devices, remirror.agent.generations), or, before the leg
    has one, as the profiles' home roles say. A replica's disk assembled at its own site's boot
    would be written there (its superblock) and held from LIO."""
    from remirror.agent.generations import read_record

    records = []
    for device in sorted(scope.leg_devices.get(mirror, ())):
        try:
            record = read_record(device)
        except (OSError, RemirrorError):
            continue  # not there (a cache device not made), or unreadable: no evidence
        if record is not None and record.array_uuid == uuid:
            records.append(record)
    if records:
        current = max(records, key=lambda r: (r.current.n, r.sequence)).current
        if current.site not in scope.sites:
            raise Refused(
                f"mdadm_conf: mirror {mirror} runs at site {current.site} (generation {current.n},"
                " its leg's record here): its array does not assemble here"
            )
    elif mirror not in scope.home_primaries:
        raise Refused(
            f"mdadm_conf: mirror {mirror}'s leg here is a replica: its array does not assemble here"
        )


def md_attribute(check: Checker, step: catalogue.SetMdAttribute) -> None:
    """An md attribute of an array of the scope, with a value the planner writes there."""
    check.device(step.md)
    if not _SYSFS_VALUES[step.attribute.rsplit("/", 1)[-1]].fullmatch(step.value):
        raise Refused(
            f"md_attribute {step.attribute}: {step.value[:40]!r} is not a value remirror writes there"
        )


def session_timeout(check: Checker, step: catalogue.SetSessionTimeout) -> None:
    """The replacement time-out of a live session to a target of the scope: the one the site's
    profiles make for that target (a day's would hang the leg's I/O where the profile says
    degrade), and only once the session is seen logged in to it (its handler looks again)."""
    check.iqn(step.target)
    if not 0 <= step.seconds < 1 << 31:
        raise Refused(f"session_timeout: {step.seconds} s")
    if session_target(f"session{step.session}") != step.target:
        raise Refused(f"session_timeout: iSCSI session {step.session} is not logged in to {step.target}")
    if check.scope is not None:
        # The profile layer is loaded already: the scope was made from it.
        from remirror.profile.timeouts import REPLACEMENT_TIMEOUT

        wanted = (REPLACEMENT_TIMEOUT, str(step.seconds))
        if wanted not in check.scope.node_settings.get(step.target, frozenset()):
            raise Refused(
                f"session_timeout: {step.seconds} s is not {step.target}'s replacement time-out here"
            )


def session_target(session: str) -> str:
    """The target iSCSI session `session` (`session7`) is logged in to; "" if there is none."""
    target = Path(f"/sys/class/iscsi_session/{session}/targetname")
    return target.read_text().strip() if target.exists() else ""


def save_ranges(check: Checker, step: catalogue.SaveRanges) -> None:
    """A discarded leg's writes kept aside: only ever into /var/lib/remirror/saved/NAME, the path
    made at the site from a name (remirror.agent.generations), never a directory of the sender's."""
    check.device(step.leg)
    check.mirror(step.mirror)
    check.name(step.site, "site")
    if check.scope is not None and step.site not in check.scope.sites:
        raise Refused(f"save_ranges: site {step.site!r} is not one of this site's own names")
    if not SAVE_NAME.fullmatch(step.save):
        raise Refused(f"save_ranges {step.save!r}: a name under /var/lib/remirror/saved, not a path")


def prove_blank(check: Checker, step: catalogue.ProveBlank) -> None:
    check.readable(step.device)  # it only reads; its time-out is the controller's wait, not the site's


# At most what one copy_spans step may carry across the link (remirror.catch_up sends less).
MAX_COPY_BYTES = 1 << 40


def copy_spans(check: Checker, step: catalogue.CopySpans) -> None:
    """A seed's catch-up: from the primary leg of a seeded mirror whose primary is here, onto one
    of its replicas' iSCSI disks, exactly as this site's profiles pair them; never onto a
    device of this site's own, nor from one that is not the mirror's primary leg. (The agent
    opens both exclusively: not onto a leg an array holds.)"""
    check.mirror(step.mirror)
    check.device(step.source)
    check.device(step.target)
    if check.scope is None:
        raise Refused("copy_spans: only where a profile pairs the disks (a seeded mirror's primary)")
    if (step.source, step.target) not in check.scope.seed_copies.get(step.mirror, frozenset()):
        raise Refused(
            f"copy_spans: {step.source} onto {step.target} is not a seeded mirror's catch-up in"
            f" {check._sources()}"
        )
    total = 0
    for span in step.spans:
        if span.offset < 0 or span.length <= 0 or span.offset % 4096 or span.length % 4096:
            raise Refused(f"copy_spans: {span.offset}+{span.length} is not a range of whole 4 KiB blocks")
        total += span.length
    if total > MAX_COPY_BYTES or not 0 < step.timeout <= 7 * 86400:
        raise Refused("copy_spans: more bytes or a longer wait than a catch-up's step")


def device_unwritten(check: Checker, step: catalogue.DeviceUnwritten) -> None:
    check.readable(step.device)  # it only reads the device's counters


def points_stack(check: Checker, step: catalogue.CdpStack) -> None:
    """`cdp_stack`: a mirror's CDP (on its array), or a leg's own points, exactly as named. A
    leg's own points are built on a blank disk or activated as their index says, never laid
    over data or fresh at another site's word: that is its operator's (`remirror cdp`)."""
    key, disk = step.mirror, step.md
    for field, number, limit in (("chunk", step.chunk, 1 << 30), ("history", step.history, 100)):
        if not 1 <= number <= limit:
            raise Refused(f"cdp_stack: {field} {str(number)[:40]!r} is not a number from 1 to {limit}")
    laid = step.fresh or step.allow_data
    if is_leg_points(key) and laid:  # with or without profiles here
        raise Refused(f"the points of {key} are laid over data only by this site's operator (apply here)")
    if check.scope is not None and any(key == k for k, _ in check.scope.points):
        if (key, disk) not in check.scope.points:
            raise Refused(f"the points of {key} are on another disk than {disk!r}")
        return
    check.mirror(key)
    check.device(disk)


def points_down(check: Checker, step: catalogue.CdpDeactivate) -> None:
    """`cdp_deactivate`: a mirror's CDP stack, and its views. Never a leg's own points: only the
    site that keeps them takes them down (`remirror cdp down --leg`, its operator's)."""
    key = step.mirror
    if is_leg_points(key):  # with or without profiles here
        raise Refused(f"the points of {key} are taken down only by this site's operator (cdp down --leg)")
    check.mirror(key)
    views = list(step.views)
    check.each(lambda view: check.name(view, "view"), views)
    ours = (f"remirror-{key}-cdp-at-", f"remirror-{key}-cdp-drill")  # a point's view, a drill's copy
    if not all(str(view).startswith(ours) and check.ours(str(view), points=True) for view in views):
        raise Refused(f"views {views!r} are not those of {key}'s points")


def _fields(**checks: str) -> Callable[[Checker, Any], None]:
    """A step whose named fields are devices, lists of them, mirrors, dm names and so on."""

    def fields(check: Checker, step: catalogue.Step) -> None:
        for key, what in checks.items():
            _FIELD_CHECKS[what](check, getattr(step, key))

    return fields


def _refuse_path(value: Any) -> None:
    raise Refused(f"{value!r}: waits only for device paths")


def _uuid(value: Any) -> None:
    if not isinstance(value, str) or not UUID.fullmatch(value):
        raise Refused(f"{value!r} is not an md array UUID")


def _shaped(value: Any, shape: re.Pattern[str], what: str) -> None:
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise Refused(f"{str(value)[:40]!r} is not {what}")


def _count(value: Any, absent_ok: bool = False) -> None:
    if value is None and absent_ok:
        return
    if type(value) is not int or not 0 <= value < 1 << 62:
        raise Refused(f"{str(value)[:40]!r} is not a count")


def _site_name(check: Checker, value: Any) -> None:
    """A site a leg record names primary: one the site's profiles name (the generation decides who
    may run the mirror: a name of no site would leave the DR site's own promotion nobody to trust)."""
    _shaped(value, NAME, "a site's name")
    if check.scope is not None and value not in check.scope.known_sites:
        raise Refused(f"site {value!r} is not one {check._sources()} name")


def _one_of(value: Any, allowed: tuple[Any, ...], what: str) -> None:
    if value not in allowed:
        raise Refused(f"{str(value)[:40]!r} is not {what} ({', '.join(allowed)})")


_FIELD_CHECKS: dict[str, Callable[[Checker, Any], None]] = {
    "device": Checker.device,
    "devices": lambda check, value: check.each(check.device, list(value)),
    "mirror": Checker.mirror,
    "dm": Checker.dm_name,
    "table": Checker.dm_target,
    "iqn": Checker.iqn,
    "path": lambda check, value: (
        check.device(value) if str(value).startswith("/dev/") else _refuse_path(value)
    ),
    "uuid": lambda check, value: _uuid(value),
    "seconds": lambda check, value: _seconds(value, absent_ok=True),
    "site_name": lambda check, value: _site_name(check, value),
    "count": lambda check, value: _count(value),
    "count_or_none": lambda check, value: _count(value, absent_ok=True),
    "how": lambda check, value: _one_of(value, HOW, "how a generation begins"),
}


def _seconds(value: Any, absent_ok: bool = False) -> None:
    """A time-out; `absent_ok`: left out (None), the handler's own default."""
    if value is None and absent_ok:
        return
    if type(value) not in (int, float) or not 0 < value <= MAX_STEP_TIMEOUT:
        raise Refused(f"{str(value)[:40]!r} is not a number of seconds up to {MAX_STEP_TIMEOUT}")


_DISK_SYSFS_VALUES = {"queue/scheduler": re.compile("none")}  # a replica leg's: no scheduler


def _disk_sysfs(check: Checker, step: catalogue.WriteDiskSysfs) -> None:
    check.device(step.device)
    shape = _DISK_SYSFS_VALUES.get(step.attribute)
    if shape is None:
        raise Refused(f"block device attribute {step.attribute[:60]!r}: not one remirror sets")
    if not shape.fullmatch(step.value):
        raise Refused(f"block device attribute {step.attribute}: {step.value[:40]!r} is not a value it takes")


# Each step of the catalogue, its check (a unit test holds the two together).
STEP_CHECKS: dict[type[catalogue.Step], Callable[[Checker, Any], None]] = {
    **COMMAND_CHECKS,  # remirror.agent.policy_commands
    catalogue.ProveBlank: prove_blank,
    catalogue.CopySpans: copy_spans,
    catalogue.DeviceUnwritten: device_unwritten,
    catalogue.WaitPath: _fields(path="path", timeout="seconds"),
    catalogue.AssembleArray: _fields(md="device", uuid="uuid", devices="devices"),
    catalogue.NodeSecrets: node_secrets,  # remirror.agent.policy_iscsi
    catalogue.MdadmConfArrays: mdadm_conf,
    catalogue.SetMdAttribute: md_attribute,
    catalogue.SetSessionTimeout: session_timeout,
    catalogue.SetMemberState: _fields(md="device", device="device"),  # its value: a Literal, as read
    catalogue.WriteDiskSysfs: _disk_sysfs,
    catalogue.LocalLegLast: _fields(md="device", device="device"),
    catalogue.AddReplicaLegs: _fields(md="device", devices="devices"),
    catalogue.DropBadBlockLog: _fields(md="device", device="device"),
    **LIO_CHECKS,  # remirror.agent.policy_lio
    catalogue.DmReload: _fields(name="dm", table="table"),
    catalogue.DrainCache: _fields(name="dm", cleaner_table="table", linear="table", timeout="seconds"),
    catalogue.CdpStack: points_stack,
    catalogue.CdpDeactivate: points_down,
    catalogue.LegRecordCreate: _fields(mirror="mirror", array="uuid", site="site_name", devices="devices"),
    catalogue.LegRecordPromote: _fields(
        devices="devices", array="uuid", site="site_name", after="count", how="how", n="count_or_none"
    ),
    catalogue.LegRecordJoin: _fields(source="device", device="device"),
    catalogue.SaveRanges: save_ranges,
    catalogue.WireguardKey: wireguard,
    catalogue.WireguardTunnel: wireguard_tunnel,
}
