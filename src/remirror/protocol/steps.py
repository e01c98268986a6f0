"""The catalogue: every step a controller may ask of a site's agent, typed. Pure: no I/O.

The planner builds these dataclasses; they become JSON objects only at the
agent boundary (`as_dict`, called by the controller) and are read back into
the same classes by the agent (`decode`, remirror.protocol.wire), so the
planner, the reconciler's repairs, the agent's policy and its handlers all
read fields, not dictionary keys. A new step is a class here, its check in
remirror.agent.policy_steps and its handler in remirror.agent.steps (a unit
test holds the three together).

Exit codes a step accepts or explains are named here, from the tools' own
headers: open-iscsi's `include/iscsi_err.h`, mdadm's and dmsetup's "1 for
any failure".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from remirror.protocol.commands import COMMANDS
from remirror.protocol.lio import LIO_STEPS
from remirror.protocol.tables import DmTarget
from remirror.protocol.wire import Step as Step  # re-exported: every step is one
from remirror.protocol.wire import WireError, from_wire

# open-iscsi, include/iscsi_err.h
ISCSI_ERR_SESS_EXISTS = 15  # a login to a target already logged in to
ISCSI_ERR_NO_OBJS_FOUND = 21  # no session (a logout) or no node record (a delete)
ISCSI_ERR_LOGIN_AUTH_FAILED = 24  # the target refused the CHAP credentials
# mdadm and dmsetup: 1 for "it failed" (nothing to remove, no such device).
TOOL_FAILED = 1


@dataclass(frozen=True)
class WaitPath(Step):
    """Wait until udev makes a device node or link."""

    kind: ClassVar[str] = "wait_path"
    path: str
    timeout: float = 60


@dataclass(frozen=True)
class ArrayLine:
    """One ARRAY line of remirror's block in mdadm.conf: the array `device` (`/dev/md/NAME`) of
    UUID `uuid` assembled by name at boot, or (`device` None) `<ignore>`: never assembled."""

    uuid: str
    device: str | None = None
    metadata: Literal["1.0", "1.2"] | None = None
    name: str | None = None

    def text(self) -> str:
        if self.device is None:
            return f"ARRAY <ignore> UUID={self.uuid}"
        return f"ARRAY {self.device} metadata={self.metadata} UUID={self.uuid} name={self.name}"


@dataclass(frozen=True)
class MdadmConfArrays(Step):
    """remirror's block of the site's mdadm.conf, these lines in this order (none: no block);
    the site writes the file, the rest of it as it was (remirror.facts.mdadm_conf.merged_conf)."""

    kind: ClassVar[str] = "mdadm_conf"
    arrays: tuple[ArrayLine, ...]


MdAttributeName = Literal[
    "sync_speed_min",
    "sync_speed_max",
    "suspend_hi",
    "sync_max",
    "sync_action",
    "bitmap/backlog",
    "safe_mode_delay",
]


@dataclass(frozen=True)
class SetMdAttribute(Step):
    """One write of an md array's sysfs attribute (`/sys/block/MD/md/ATTRIBUTE`), the array named
    by its device, resolved at the site: a resync's limits, write-behind's count, how long md waits
    before it marks the array clean, and the repairs of a move or an add cut short (writes resumed,
    resyncs released, a check stopped)."""

    kind: ClassVar[str] = "md_attribute"
    md: str
    attribute: MdAttributeName
    value: str


@dataclass(frozen=True)
class SetSessionTimeout(Step):
    """A live iSCSI session's replacement time-out (`recovery_tmo`): session `session`, which the
    site finds logged in to `target`, or the step fails."""

    kind: ClassVar[str] = "session_timeout"
    session: int
    target: str
    seconds: int


@dataclass(frozen=True)
class WriteDiskSysfs(Step):
    """One write of a block device's sysfs attribute (`queue/scheduler`), the device named by a
    path resolved on the site: a replica leg's disk is known only once logged in."""

    kind: ClassVar[str] = "disk_sysfs"
    device: str
    attribute: str
    value: str


@dataclass(frozen=True)
class SetMemberState(Step):
    """Write an md member's sysfs `state` (`writemostly`, `-writemostly`). The member is named
    by its device path, resolved on the site: a replica leg's disk is known only once logged in."""

    kind: ClassVar[str] = "member_state"
    md: str
    device: str
    value: Literal["writemostly", "-writemostly"]


@dataclass(frozen=True)
class LocalLegLast(Step):
    """The local leg of a running array into its last slot, writes held meanwhile
    (remirror.agent.md_slots): md sends writes behind only from the first leg."""

    kind: ClassVar[str] = "local_leg_last"
    md: str
    device: str


@dataclass(frozen=True)
class AddReplicaLegs(Step):
    """New replica legs into a running array, without md's bad block log, their recovery (the
    initial sync) from the first sector (remirror.agent.md_legs): a write a leg fails then
    fails the leg, and the bitmap keeps what it misses."""

    kind: ClassVar[str] = "add_replica_legs"
    md: str
    devices: tuple[str, ...]


@dataclass(frozen=True)
class DropBadBlockLog(Step):
    """A replica leg in sync re-added without its bad block log, the sectors the log lists
    marked in the bitmap first so that the re-add rewrites them (remirror.agent.md_legs)."""

    kind: ClassVar[str] = "drop_bad_block_log"
    md: str
    device: str


@dataclass(frozen=True)
class NodeSecrets(Step):
    """CHAP secrets into an iSCSI node record's file, not through iscsiadm's argv."""

    kind: ClassVar[str] = "node_secrets"
    target: str
    address: str
    port: int
    values: Mapping[str, str]
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class DmReload(Step):
    """Swap a device-mapper table live (load, then resume)."""

    kind: ClassVar[str] = "dm_reload"
    name: str
    table: DmTarget


@dataclass(frozen=True)
class DrainCache(Step):
    """Write a cache back until clean, then swap in `linear` (remirror.agent.steps._drain_cache)."""

    kind: ClassVar[str] = "drain_cache"
    name: str
    target: Literal["writecache", "cache"]
    cleaner_table: DmTarget | None  # None: in cleaner mode already
    linear: DmTarget
    timeout: float


@dataclass(frozen=True)
class AssembleArray(Step):
    """`mdadm --assemble --run`, past udev's partial assemblies."""

    kind: ClassVar[str] = "assemble_array"
    md: str
    uuid: str
    devices: tuple[str, ...]
    # Give the legs md's bad block log (`--update=bbl`): a leg that runs the array alone keeps
    # one, so that a sector its disk cannot write fails that write, not the array (docs/safety.md).
    bad_block_log: bool = False


@dataclass(frozen=True)
class CdpStack(Step):
    """A mirror's CDP stack (remirror.agent.cdp.ensure_stack)."""

    kind: ClassVar[str] = "cdp_stack"
    mirror: str
    md: str
    chunk: int
    history: int
    fresh: bool
    allow_data: bool


@dataclass(frozen=True)
class CdpDeactivate(Step):
    """Take a CDP stack and its views down; the data stays on the mirror."""

    kind: ClassVar[str] = "cdp_deactivate"
    mirror: str
    views: tuple[str, ...]


@dataclass(frozen=True)
class ProveBlank(Step):
    """Read the whole device on its own site and fail at its first byte that is not zero
    (`initial_sync: skip`: only the verdict crosses the link)."""

    kind: ClassVar[str] = "prove_blank"
    device: str
    timeout: float  # seconds the controller waits for it: a whole disk is read


@dataclass(frozen=True)
class WireguardKey(Step):
    """Make this site's WireGuard private key in `path` unless it has one: it never leaves the site."""

    kind: ClassVar[str] = "wireguard_key"
    path: str


@dataclass(frozen=True)
class WireguardPeer:
    """A peer of a tunnel step: its public key, tunnel address and endpoint (or None)."""

    public_key: str
    address: str
    endpoint: str | None


@dataclass(frozen=True)
class WireguardTunnel(Step):
    """This site's end of the tunnel: interface, key file, port, address/prefix, exactly these peers."""

    kind: ClassVar[str] = "wireguard_tunnel"
    interface: str
    key_file: str
    port: int
    address: str
    peers: tuple[WireguardPeer, ...]
    keepalive: int


@dataclass(frozen=True)
class LegRecordCreate(Step):
    """Generation 1 on new legs; `check_room`: first check md leaves each leg's last MiB alone."""

    kind: ClassVar[str] = "leg_record_create"
    mirror: str
    array: str
    site: str
    devices: tuple[str, ...]
    check_room: bool = False


@dataclass(frozen=True)
class LegRecordPromote(Step):
    """A new generation naming `site` primary, if the legs still know generation `after`."""

    kind: ClassVar[str] = "leg_record_promote"
    devices: tuple[str, ...]
    array: str
    site: str
    after: int
    how: str
    n: int | None = None


@dataclass(frozen=True)
class LegRecordJoin(Step):
    """A leg back in the array takes the array's generation from `source`."""

    kind: ClassVar[str] = "leg_record_join"
    source: str
    device: str


@dataclass(frozen=True)
class SaveRanges(Step):
    """Keep aside what a discarded leg wrote on its own (remirror.agent.generations)."""

    kind: ClassVar[str] = "save_ranges"
    leg: str
    save: str  # a name: the directory /var/lib/remirror/saved/NAME at the leg's site
    mirror: str
    site: str


@dataclass(frozen=True)
class ByteRange:
    """Bytes of a device: [offset, offset + length)."""

    offset: int
    length: int


@dataclass(frozen=True)
class CopySpans(Step):
    """Copy ranges of the primary disk onto a replica leg's iSCSI disk, both held exclusively:
    the chunks a seed's catch-up found different (remirror.agent.seed, remirror.catch_up)."""

    kind: ClassVar[str] = "copy_spans"
    mirror: str
    source: str  # the primary's leg, as the plan names it
    target: str  # the replica leg, as this site sees it
    spans: tuple[ByteRange, ...]
    timeout: float  # seconds the controller waits for it: the bytes cross the link


@dataclass(frozen=True)
class DeviceUnwritten(Step):
    """Fail unless `device` has had exactly `written` sectors written and `discarded` discarded
    since boot, with nothing in flight: right before a seeded mirror's `md_create`, nothing wrote
    its legs since the catch-up measured them. -1: not measured (the controller fills them in
    from the catch-up of the same apply, remirror.catch_up; unmeasured, the step fails)."""

    kind: ClassVar[str] = "device_unwritten"
    device: str
    written: int = -1
    discarded: int = -1


_EVERY_STEP: tuple[type[Step], ...] = (
    *COMMANDS, *LIO_STEPS, WaitPath, MdadmConfArrays, SetMdAttribute, SetSessionTimeout, WriteDiskSysfs,
    SetMemberState, LocalLegLast, AddReplicaLegs, DropBadBlockLog, NodeSecrets, DmReload, DrainCache,
    AssembleArray, CdpStack, CdpDeactivate, ProveBlank, WireguardKey, WireguardTunnel, LegRecordCreate,
    LegRecordPromote, LegRecordJoin, SaveRanges, CopySpans, DeviceUnwritten,
)  # fmt: skip
CATALOGUE: dict[str, type[Step]] = {cls.kind: cls for cls in _EVERY_STEP}


def decode(obj: Any) -> Step:
    """The step JSON object `obj` says, of its kind's class, or WireError naming what is wrong."""
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    if not isinstance(kind, str) or kind not in CATALOGUE:
        raise WireError(f"step {str(kind if kind is not None else obj)[:40]!r} is not a step of the protocol")
    return from_wire(CATALOGUE[kind], obj)
