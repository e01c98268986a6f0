"""The profile: what the operator wants, as immutable pydantic models.

Every model rejects unknown keys (a typo must not silently become a default).
Field-level checks live in `types.py`; rules that relate several fields in
`rules.py`. Build a Profile through `remirror.profile.load_profile` or
`parse_profile`, which run both and point errors at file:line:col.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, PrivateAttr, Tag, field_validator

from remirror.profile.base import ProfileModel
from remirror.profile.layers import KEEP_AGE, KEEP_GRID, Cache, Cdp, Drill, Points
from remirror.profile.schedule import DEFAULT_KEY, ResyncLimit, Window, parse_window, resync_limit
from remirror.profile.timeouts import (
    REPLACEMENT_FOR,
    REPLACEMENT_TIMEOUT,
    OnLinkLoss,
    is_reserved_key,
    node_settings,
)
from remirror.profile.types import (
    AbsolutePath,
    BitmapChunk,
    DevicePath,
    Iqn,
    JumpHost,
    Name,
    Portal,
    PortalText,
    PositiveDuration,
    ResyncRate,
    ScheduledRate,
    SiteHost,
    SshAddress,
    parse_ssh_address,
)

PROFILE_VERSION = 1

# Derived target names: the iSCSI naming authority part is fixed so that a
# profile re-applied on another controller derives the same names.
DERIVED_IQN_PREFIX = "iqn.2026-11.org.remirror"

# Where `apply` keeps the CHAP secrets it generates for mirrors whose profile gives none (0600,
# in a 0700 directory, on the host that runs remirror's commands).
GENERATED_CHAP_DIR = "/etc/remirror/chap"

# md's default write-behind backlog (mdadm.8), used when async gives none.
DEFAULT_WRITE_BEHIND = 256


class SshOptions(ProfileModel):
    """How to reach a remote site over SSH."""

    identity_file: AbsolutePath | None = Field(
        None, description="private key; default: the controller user's ~/.ssh keys"
    )
    known_hosts: AbsolutePath | None = Field(
        None, description="host keys to check against; default ~/.ssh/known_hosts"
    )
    connect_timeout: PositiveDuration = Field(10.0, description="give up connecting after this")
    proxy_jump: JumpHost | None = Field(
        None,
        description="reach the site through this bastion, ssh://[user@]host[:port], as ssh -J does;"
        " with the same key, and its host key in the same known_hosts",
    )


class Site(ProfileModel):
    """A host that carries legs: this machine (`local`) or one reached over SSH."""

    host: SiteHost = Field(description="'local' or ssh://[user@]host[:port]")
    ssh: SshOptions | None = None
    initiator: Iqn | None = Field(
        None,
        description="this site's iSCSI initiator name (its /etc/iscsi/initiatorname.iscsi): when"
        " named, apply refuses a site that says another, and the other sites' targets take an ACL"
        " for no other initiator of this mirror's (docs/security.md)",
    )

    @property
    def is_local(self) -> bool:
        """Whether remirror runs on this site itself."""
        return self.host == "local"

    @property
    def ssh_address(self) -> SshAddress:
        """The parsed ssh:// address (only for remote sites)."""
        return parse_ssh_address(self.host)


class PrimaryLeg(ProfileModel):
    """The leg on the site that runs the array (its home: a promotion moves it); reads are served from it."""

    site: Name
    disk: DevicePath
    keep_data: bool = Field(
        False,
        description="the disk's file system becomes the mirror's, in place (md metadata 1.0 at its"
        " end; docs/keep-data.md); the replicas are filled from it by the initial sync",
    )
    cache: Cache | None = None
    portal: PortalText | None = Field(
        None,
        description="ADDRESS[:PORT] the other sites reach this site on when it serves as a replica"
        " after a promotion elsewhere (docs/failover.md); without it, it cannot rejoin as one",
    )
    iqn: Iqn | None = Field(None, description="target name when it serves as a replica; derived when absent")
    # A replica's `points` that a promotion brought along (remirror.roles.as_run): they stay its
    # leg's. A profile's primary leg cannot have them (rules: its mirror's `cdp` is that).
    points: Points | None = Field(None, description="refused here: see the replicas' points")

    @property
    def portal_address(self) -> Portal | None:
        """The portal as address and port, if it has one."""
        return Portal.parse(self.portal) if self.portal else None


class ReplicaLeg(ProfileModel):
    """A remote leg: a disk exported by its site over iSCSI, write-mostly in the array."""

    site: Name
    disk: DevicePath
    portal: PortalText = Field(description="ADDRESS[:PORT] the primary reaches this site on")
    iqn: Iqn | None = Field(None, description="target name; derived from the names when absent")
    cache: Cache | None = None
    points: Points | None = Field(
        None,
        description="recovery points this site keeps of its leg, on its own schedule (a thin pool"
        " under the exported volume, snapshots by the site's own `cdp run`): no other site can"
        " list, take or delete them (docs/security.md)",
    )
    drill: Drill | None = Field(
        None, description="DR drills of this leg at its site, on a copy of one of its points (docs/drill.md)"
    )

    @property
    def portal_address(self) -> Portal:
        """The portal as address and port."""
        return Portal.parse(self.portal)


class Replication(ProfileModel):
    """How writes reach the replicas and what a lost link does."""

    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: ack when every leg has the write; async: md write-behind"
    )
    write_behind: int | None = Field(
        None,
        ge=0,
        le=16383,
        description=f"writes allowed to trail the replicas (async only, default {DEFAULT_WRITE_BEHIND})",
    )
    bitmap_chunk: BitmapChunk = Field(64 * 1024**2, description="write-intent bitmap chunk")
    resync_max: ResyncRate | None = Field(
        None,
        description="per second (50Mbit, 6MB/s), for resyncs and the initial sync: md's"
        " sync_speed_max for this array, changed live (none: the system's,"
        " /proc/sys/dev/raid/speed_limit_max)",
    )
    schedule: dict[str, ScheduledRate] | None = Field(
        None,
        description="resync limits by the clock: windows of the week ('Mon-Fri 08:00-18:00') to a"
        " rate or 'unlimited', and 'default' outside them; applied at each window's edge",
    )
    on_link_loss: OnLinkLoss = Field(
        "degrade", description="degrade: fail the leg fast, resync later; wait: queue I/O"
    )
    initial_sync: Literal["full", "skip", "seeded"] = Field(
        "full",
        description="full: a new mirror copies the primary leg onto the replicas; skip: no copy,"
        " when each site proves its disk all zeros; seeded: the replicas hold a seed (remirror"
        " seed), and only chunks whose digests differ cross the link",
    )

    @field_validator("schedule")
    @classmethod
    def _windows(cls, schedule: dict[str, int | None] | None) -> dict[str, int | None] | None:
        """Each key a window (or `default`); windows that overlap are refused (rules.py says where)."""
        for text in schedule or {}:
            if text != DEFAULT_KEY:
                parse_window(text)
        return schedule

    @property
    def windows(self) -> list[Window]:
        """The schedule's windows, in the profile's order."""
        return [parse_window(text) for text in self.schedule or {} if text != DEFAULT_KEY]

    @property
    def effective_write_behind(self) -> int:
        """The md backlog to configure: 0 in sync mode."""
        if self.mode == "sync":
            return 0
        return DEFAULT_WRITE_BEHIND if self.write_behind is None else self.write_behind


def scheduled_limit(replication: Replication, now: datetime | None) -> ResyncLimit | None:
    """With a schedule, its limit at `now` (the primary's local time), as every plan sets it."""
    if not replication.schedule:
        return None
    return resync_limit(replication.resync_max, replication.schedule, now)


class Chap(ProfileModel):
    """CHAP credentials; the secrets are read from files, never written inline."""

    username: str = Field(min_length=1, max_length=255, pattern=r"^[^\s]+$")
    password_file: AbsolutePath
    mutual: bool = Field(False, description="the initiator also authenticates the target")
    mutual_username: str | None = Field(
        None, min_length=1, max_length=255, pattern=r"^[^\s]+$", description="default: username"
    )
    mutual_password_file: AbsolutePath | None = Field(
        None, description="default: password_file with '.mutual' appended"
    )

    @property
    def target_username(self) -> str:
        """The name the target answers mutual CHAP with."""
        return self.mutual_username or self.username

    @property
    def target_password_file(self) -> str:
        """Where the target's mutual CHAP secret is kept."""
        return self.mutual_password_file or f"{self.password_file}.mutual"


# The tags of `iscsi.chap`'s two forms; pydantic puts them in an error's location, and the
# loader leaves them out of the key path it shows (UNION_TAGS).
CHAP_MAPPING, CHAP_NONE = "<chap mapping>", "<chap none>"
UNION_TAGS = frozenset({CHAP_MAPPING, CHAP_NONE, KEEP_AGE, KEEP_GRID})

TimeoutPreset = Literal["lan", "wan"]


class Iscsi(ProfileModel):
    """iSCSI settings of the session from the primary to each replica."""

    chap: (
        Annotated[
            Annotated[Chap, Tag(CHAP_MAPPING)] | Annotated[Literal["none"], Tag(CHAP_NONE)],
            # The mapping or the word, chosen by what was written: an error names only what it got wrong.
            Discriminator(lambda value: CHAP_NONE if isinstance(value, str) else CHAP_MAPPING),
        ]
        | None
    ) = Field(
        None,
        description="CHAP on the replicas' targets: a mapping; `none` for no CHAP at all; absent:"
        " mutual CHAP with secrets `apply` generates (Profile.replica_chap)",
    )
    timeouts: TimeoutPreset | dict[str, str] = Field(
        "lan", description="lan | wan | a mapping of iscsiadm node keys to values"
    )

    @field_validator("timeouts", mode="before")
    @classmethod
    def _custom_timeouts(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value not in ("lan", "wan"):
                raise ValueError(f"{value!r} is not a preset (lan, wan) or a mapping of iscsiadm keys")
            return value
        if not isinstance(value, dict) or not value:
            raise ValueError("expected lan, wan or a non-empty mapping of iscsiadm node keys")
        custom: dict[str, str] = {}
        for key, setting in value.items():
            if not isinstance(key, str) or not key.startswith("node."):
                raise ValueError(f"{key!r} is not an iscsiadm node key (they start with 'node.')")
            if key == REPLACEMENT_TIMEOUT:
                raise ValueError(
                    f"{key} is chosen by replication.on_link_loss (degrade: fail the leg after"
                    f" {REPLACEMENT_FOR['degrade']} s, wait: queue writes for {REPLACEMENT_FOR['wait']} s):"
                    " set that instead"
                )
            if is_reserved_key(key):
                raise ValueError(f"{key} is managed by remirror and cannot be set here")
            if isinstance(setting, bool) or not isinstance(setting, int | str):
                raise ValueError(f"{key}: expected a number or a word")
            custom[key] = str(setting)
        return custom

    def node_settings(self, on_link_loss: OnLinkLoss) -> dict[str, str]:
        """The iscsiadm node keys to set on the primary for each replica."""
        return node_settings(self.timeouts, on_link_loss)


class Export(ProfileModel):
    """Serve the mirror device itself over iSCSI to application hosts."""

    iqn: Iqn
    portal: PortalText = Field("0.0.0.0:3260", description="where the export listens")
    initiators: list[Iqn] = Field(min_length=1, description="initiator names allowed to log in")
    chap: Chap | None = None

    @property
    def portal_address(self) -> Portal:
        """The portal as address and port."""
        return Portal.parse(self.portal)


class Mirror(ProfileModel):
    """One mirrored device: a primary leg and one or more replica legs."""

    name: Name
    device: DevicePath | None = Field(None, description="default /dev/md/NAME")
    primary: PrimaryLeg
    replicas: list[ReplicaLeg] = Field(min_length=1)
    transport: Literal["plain", "wireguard"] = Field(
        "plain",
        description="plain: iSCSI straight to the replicas' portals; wireguard: through a WireGuard"
        " tunnel between the sites (docs/transport.md), keys made on each site",
    )
    replication: Replication = Field(default_factory=Replication)
    iscsi: Iscsi = Field(default_factory=Iscsi)
    cdp: Cdp | None = None
    export: Export | None = None

    @field_validator("device")
    @classmethod
    def _md_device(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/dev/md/"):
            raise ValueError(f"{value!r}: the mirror device is an md array, /dev/md/NAME")
        return value

    @property
    def md_device(self) -> str:
        """The path applications use."""
        return self.device or f"/dev/md/{self.name}"

    @property
    def legs(self) -> list[PrimaryLeg | ReplicaLeg]:
        """The primary leg, then the replica legs in profile order."""
        return [self.primary, *self.replicas]

    @property
    def sites(self) -> list[str]:
        """The sites of its legs, the primary's first."""
        return [leg.site for leg in self.legs]


class Profile(ProfileModel):
    """A whole profile: sites and the mirrors between them."""

    version: Literal[1] = Field(description="profile format version")
    name: Name
    sites: dict[Name, Site] = Field(min_length=1)
    mirrors: list[Mirror] = Field(min_length=1)

    @field_validator("version", mode="before")
    @classmethod
    def _known_version(cls, value: Any) -> Any:
        if value != PROFILE_VERSION or isinstance(value, bool):
            raise ValueError(
                f"unsupported profile version {value!r} (this remirror reads version {PROFILE_VERSION})"
            )
        return value

    _source: str = PrivateAttr("<profile>")
    _positions: dict[tuple[str | int, ...], tuple[int, int]] = PrivateAttr(default_factory=dict)

    def replica_chap(self, mirror: Mirror) -> Chap | None:
        """The CHAP of the mirror's replica targets: the profile's; None for `chap: none`; else
        mutual CHAP with secrets `apply` generates on the controller (GENERATED_CHAP_DIR), so
        that no profile leaves a replica open to any host on the path by leaving CHAP out."""
        chap = mirror.iscsi.chap
        if chap == "none":
            return None
        if chap is not None:
            return chap
        return Chap(
            username=f"remirror-{self.name}-{mirror.name}",
            password_file=f"{GENERATED_CHAP_DIR}/{self.name}.{mirror.name}",
            mutual=True,
        )

    def replica_iqn(self, mirror: Mirror, replica: PrimaryLeg | ReplicaLeg) -> str:
        """The target name of a replica leg (or of the primary's, as one after a promotion):
        given, or derived from the names."""
        return replica.iqn or f"{DERIVED_IQN_PREFIX}:{self.name}.{mirror.name}.{replica.site}"

    def mirror(self, name: str) -> Mirror:
        """The mirror with this name (KeyError if there is none)."""
        for mirror in self.mirrors:
            if mirror.name == name:
                return mirror
        raise KeyError(name)

    def where(self, *path: str | int) -> str:
        """`file:line:col` of a key in the profile, for errors found after loading."""
        for end in range(len(path), -1, -1):
            if path[:end] in self._positions:
                line, column = self._positions[path[:end]]
                return f"{self._source}:{line}:{column}"
        return self._source
