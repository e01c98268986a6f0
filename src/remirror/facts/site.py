"""One site's facts, built from what its agent gathered (see remirror.agent.observe)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from remirror.facts.cdp import ThinPoolStatus, parse_thin_pool_status
from remirror.facts.cdp_index import CdpPoints
from remirror.facts.dm import parse_cache_status, parse_dm_table
from remirror.facts.drill import DrillRecord, Drills
from remirror.facts.drill import record_from_json as drill_record
from remirror.facts.filesystems import FileSystemExtent, file_system_extent
from remirror.facts.generations import LegRecord, record_from_json
from remirror.facts.iscsi import build_iscsi_session, parse_initiator_name
from remirror.facts.model import (
    BELIEVED_TIMES,
    CacheStatus,
    DmTable,
    IscsiSession,
    MdArray,
    MdBitmap,
    MdSuperblock,
    Signature,
)
from remirror.facts.parsers import (
    ParseError,
    build_md_array,
    parse_bitmap_examine,
    parse_examine,
    parse_wipefs_json,
)
from remirror.facts.seed import Role, SeedRecord, records_from_json
from remirror.facts.wireguard import WireguardFacts, wireguard_facts


@dataclass(frozen=True)
class DiskFacts:
    """A block device named by the profile."""

    path: str
    exists: bool
    kernel_name: str = ""
    size: int = 0
    signatures: tuple[Signature, ...] = ()
    superblock: MdSuperblock | None = None
    holders: tuple[str, ...] = ()  # kernel names using it (md, dm)
    mounts: tuple[str, ...] = ()  # where it is mounted (this site's mount namespace)
    openers: tuple[str, ...] = ()  # processes holding it open: "pid 42 (dd)"
    offline: str = ""  # a SCSI disk not `running` (its session is down): not looked into
    bitmap: MdBitmap | None = None  # an md member's write-intent bitmap, as on the disk
    devno: str = ""  # MAJ:MIN, as device-mapper tables name devices
    first_sector: str = ""  # zero | writecache | cdp | other: may it become a cache, or hold CDP?
    cdp_points: CdpPoints | None = None  # a mirror with CDP: its recovery points, in short
    leg_record: LegRecord | None = None  # a mirror's leg: its generations (docs/failover.md), when asked
    file_system: FileSystemExtent | None = None  # the ext2/3/4 or XFS it starts with, when probed

    def users(self) -> list[str]:
        """Everything using the device, as words for an error message."""
        return (
            [f"mounted on {m}" for m in self.mounts]
            + [f"held by {h}" for h in self.holders]
            + [f"open by {o}" for o in self.openers]
        )


@dataclass(frozen=True)
class LioAcl:
    """A NodeACL; CHAP passwords only as digests."""

    chap_userid: str
    chap_password: str
    chap_mutual_userid: str
    chap_mutual_password: str
    mapped_luns: tuple[int, ...]
    logged_in: bool = False

    @property
    def chap(self) -> tuple[str, str, str, str]:
        """Its CHAP: the user, the password's digest, the mutual user, its password's digest."""
        return (self.chap_userid, self.chap_password, self.chap_mutual_userid, self.chap_mutual_password)


@dataclass(frozen=True)
class LioTarget:
    """An iSCSI target's TPG 1: what remirror creates."""

    enabled: bool
    portals: tuple[str, ...]
    luns: dict[int, str] = field(hash=False)
    authentication: str = ""
    acls: dict[str, LioAcl] = field(default_factory=dict, hash=False)
    parameters: dict[str, str] = field(default_factory=dict, hash=False)  # iSCSI login parameters


@dataclass(frozen=True)
class DmDevice:
    """One of remirror's device-mapper devices: a leg's cache, or the linear mapping left of one."""

    name: str
    kernel_name: str
    table: DmTable | None  # None: a table remirror cannot read (not one target)
    cache: CacheStatus | None  # for writecache and cache targets
    pool: ThinPoolStatus | None = None  # for a CDP stack's thin pool

    @property
    def path(self) -> str:
        """Where users open it."""
        return f"/dev/mapper/{self.name}"


@dataclass(frozen=True)
class SiteFacts:
    """Everything observed on one site at one moment."""

    name: str
    hostname: str
    initiator: str | None
    disks: dict[str, DiskFacts] = field(hash=False)
    arrays: tuple[MdArray, ...]
    array_links: dict[str, tuple[str, ...]] = field(hash=False)  # md127 -> ("rec",)
    sessions: tuple[IscsiSession, ...]
    nodes: dict[tuple[str, str], dict[str, str]] = field(hash=False)  # (target, "addr,port,tpgt")
    lio_available: bool
    backstores: dict[str, str] = field(hash=False)  # name -> device
    targets: dict[str, LioTarget] = field(hash=False)
    lio_save_path: str
    mdadm_conf: str = ""
    portal_rtt: dict[str, float | None] = field(default_factory=dict, hash=False)  # "addr:port" -> s
    dm: dict[str, DmDevice] = field(default_factory=dict, hash=False)  # remirror's, by name
    # md127 -> members: arrays assembled in part (udev's incremental assembly), never started
    inactive_arrays: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    # `transport: wireguard`'s keys and interfaces; None: no wg(8) on the site
    wireguard: WireguardFacts | None = None
    # Drills run here, by the key of the drilled leg's points (MIRROR.SITE): remirror.drill
    drills: dict[str, Drills] = field(default_factory=dict, hash=False)
    # The site's local time when observed; None: not told (recorded facts)
    local_time: datetime | None = None
    # The seeds made or taken here (`remirror seed`), whose records check: remirror.facts.seed
    seeds: tuple[SeedRecord, ...] = ()

    def seed(self, profile: str, mirror: str, role: Role) -> SeedRecord | None:
        """The record of the seed of `profile`'s `mirror` made (`export`) or taken (`import`) here."""
        return next((r for r in self.seeds if r.of(profile, mirror, role)), None)

    def array_named(self, name: str, uuid: str) -> MdArray | None:
        """The running array with this UUID, or failing that, this /dev/md/NAME."""
        for array in self.arrays:
            if array.uuid == uuid:
                return array
        for array in self.arrays:
            if name in self.array_links.get(array.kernel_name, ()) or array.name == name:
                return array
        return None

    def session_for(self, target: str, address: str, port: int) -> IscsiSession | None:
        """The session to this target through this portal, if one exists."""
        for session in self.sessions:
            if session.target == target and session.address == address and session.port == port:
                return session
        return None

    def node_for(self, target: str, address: str, port: int) -> dict[str, str] | None:
        """The node record for this target and portal, if one exists."""
        for (name, portal), settings in self.nodes.items():
            if name == target and portal.split(",")[:2] == [address, str(port)]:
                return settings
        return None


def disk_facts(path: str, info: dict[str, Any]) -> DiskFacts:
    """Interpret what an agent saw of one disk."""
    return DiskFacts(
        path=path,
        exists=info["exists"],
        kernel_name=info.get("kernel_name", ""),
        size=info.get("size", 0),
        signatures=parse_wipefs_json(info.get("wipefs", "")),
        superblock=_superblock(info),
        holders=tuple(info.get("holders", ())),
        mounts=tuple(info.get("mounts", ())),
        openers=tuple(info.get("openers", ())),
        offline=info.get("offline", ""),
        bitmap=_bitmap(info.get("bitmap", "")),
        devno=info.get("devno", ""),
        first_sector=info.get("first_sector", ""),
        cdp_points=CdpPoints.from_json(info["cdp_points"]) if info.get("cdp_points") else None,
        leg_record=record_from_json(info["leg_record"]) if info.get("leg_record") else None,
        file_system=file_system_extent(bytes.fromhex(info["head"])) if info.get("head") else None,
    )


def site_facts(name: str, raw: dict[str, Any]) -> SiteFacts:
    """Interpret one agent observation."""
    try:
        initiator = parse_initiator_name(raw["initiator"]) if raw.get("initiator") else None
    except ParseError:
        initiator = None
    disks = {path: disk_facts(path, info) for path, info in raw.get("disks", {}).items()}
    arrays = tuple(
        build_md_array(kernel, info["sysfs"], info["detail"])
        for kernel, info in sorted(raw.get("arrays", {}).items())
        if info.get("detail")
    )
    links = {kernel: tuple(info.get("links", ())) for kernel, info in raw.get("arrays", {}).items()}
    sessions = tuple(
        session
        for session in (build_iscsi_session(s["sid"], s["sysfs"]) for s in raw.get("sessions", []))
        # This host's own: sessions logged in under another initiator name belong to someone
        # else sharing the kernel (the lab's two sites do).
        if not (initiator and session.initiator and session.initiator != initiator)
    )
    nodes = {tuple(key.split(" ", 1)): settings for key, settings in raw.get("nodes", {}).items()}
    lio = raw.get("lio", {})
    targets = {
        iqn: LioTarget(
            enabled=tpg["enabled"],
            portals=tuple(tpg["portals"]),
            luns={int(lun): so for lun, so in tpg["luns"].items()},
            authentication=str(tpg.get("authentication", "")),
            parameters={str(k): str(v) for k, v in tpg.get("parameters", {}).items()},
            acls={
                initiator_iqn: LioAcl(
                    acl["chap_userid"] or "",
                    acl["chap_password"] or "",
                    acl["chap_mutual_userid"] or "",
                    acl["chap_mutual_password"] or "",
                    tuple(acl["mapped_luns"]),
                    bool(acl.get("logged_in")),
                )
                for initiator_iqn, acl in tpg["acls"].items()
            },
        )
        for iqn, target in lio.get("targets", {}).items()
        for tag, tpg in target["tpgs"].items()
        if tag == "1"
    }
    return SiteFacts(
        name=name,
        hostname=raw.get("hostname", ""),
        initiator=initiator,
        disks=disks,
        arrays=arrays,
        array_links=links,
        sessions=sessions,
        nodes={(k[0], k[1]): v for k, v in nodes.items() if len(k) == 2},
        lio_available=bool(lio.get("available")),
        backstores={n: b.get("dev", "") for n, b in lio.get("backstores", {}).items()},
        targets=targets,
        lio_save_path=raw.get("lio_save_path", "/etc/target/saveconfig.json"),
        mdadm_conf=raw.get("mdadm_conf", ""),
        portal_rtt=dict(raw.get("portal_rtt", {})),
        dm={name: _dm_device(name, info) for name, info in raw.get("dm", {}).items()},
        inactive_arrays={md: tuple(members) for md, members in raw.get("inactive_arrays", {}).items()},
        wireguard=wireguard_facts(raw.get("wireguard")),
        drills={key: _drills(kept) for key, kept in raw.get("drills", {}).items()},
        local_time=_local_time(raw.get("clock")),
        seeds=records_from_json(raw.get("seeds")),
    )


# The offsets believed, as time zones have them (the times: BELIEVED_TIMES).
_OFFSET_RANGE = (-16 * 3600, 16 * 3600)


def _local_time(clock: Any) -> datetime | None:
    """The site's local time from its clock (seconds since the epoch, offset from UTC); None
    for a clock that says no time we believe."""
    try:
        seconds, offset = float(clock["time"]), float(clock["utc_offset"])
        believed = BELIEVED_TIMES[0] < seconds < BELIEVED_TIMES[1]
        if not believed or not _OFFSET_RANGE[0] <= offset <= _OFFSET_RANGE[1]:
            return None
        return datetime.fromtimestamp(seconds, timezone(timedelta(seconds=offset)))
    except (TypeError, KeyError, ValueError, OverflowError, OSError):
        return None


def _drills(kept: dict[str, Any]) -> Drills:
    """A leg's drill records as the site holds them; one that does not read is not there."""

    def read(key: str) -> DrillRecord | None:
        try:
            return drill_record(kept[key]) if kept.get(key) else None
        except (ValueError, KeyError, TypeError):
            return None

    return Drills(read("last"), read("last_pass"))


def _dm_device(name: str, info: dict[str, Any]) -> DmDevice:
    try:
        table: DmTable | None = parse_dm_table(info.get("table", ""))
    except ParseError:
        table = None
    cache = None
    if table is not None and table.target in ("writecache", "cache"):
        try:
            cache = parse_cache_status(info.get("status", ""))
        except ParseError:
            cache = None
        if cache is not None and table.target == "writecache" and "cleaner" in table.options:
            cache = dataclasses.replace(cache, cleaner=True)
    pool = None
    if table is not None and table.target == "thin-pool":
        try:
            pool = parse_thin_pool_status(info.get("status", ""))
        except ParseError:
            pool = None
    return DmDevice(name, info.get("kernel_name", ""), table, cache, pool)


def _bitmap(text: str) -> MdBitmap | None:
    """The bitmap `mdadm -X` printed; None for a disk without one (or no md member at all)."""
    if "Chunksize" not in text:
        return None
    try:
        return parse_bitmap_examine(text)
    except ParseError:
        return None


def _superblock(info: dict[str, Any]) -> MdSuperblock | None:
    return parse_examine(info.get("examine", ""))
