"""DRBD 8.4 as the bench's peer: a resource on two hosts of the hosts' lab, built and taken apart.

A user choosing a DR mirror for Linux compares remirror with DRBD, and Debian 12's kernel ships
DRBD 8.4's module (`drbd`) with drbd-utils beside it (drbdadm runs drbdadm-84 for that module).
The bench (bench/peer.py) builds a pair on the same modelled disks and the same link as
remirror's mirror and runs the same workloads through `/dev/drbdN`; tests/bench_lab's
test_drbd_peer, which `./dev bench` runs first, builds and tears down the same pair.

Why separate hosts: DRBD's kernel sockets are made in the initial network namespace, so the
single-VM lab (whose site B is a namespace) cannot hold both ends over its emulated link.

The resource file is built here from typed, checked fields (a name, a host, an address, a
disk path: each refused unless it is plainly one), never from text handed in. The tuning is
the DRBD 8.4 user guide's for throughput and for a WAN ("Optimizing DRBD throughput",
"Tuning recommendations"): enough buffers and a large epoch (max-buffers, max-epoch-size),
the TCP send buffer sized by the kernel (sndbuf-size 0), a large activity log (al-extents
3389), and the dynamic resync controller (c-plan-ahead, c-fill-target, c-max-rate) held to
the link's rate. Disk flushes stay on: the guide turns them off only behind a battery-backed
cache, which a mirror's disks here do not have (and remirror's do not either).

The module's parsing of /proc/drbd is pure; what runs on a host goes through `Host.run`.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

PORT = 7789  # the user guide's first port
GLOBAL = "/etc/drbd.d/global_common.conf"
# The lab reaches no network: drbd-utils' usage count (a packet to LINBIT at create-md) is off.
GLOBAL_TEXT = "global {\n\tusage-count no;\n}\ncommon {\n}\n"
SYNC_TIMEOUT = 1800.0
# DRBD's replication protocols the bench compares: C (a write completes once both disks hold
# it) against remirror's sync mode, A (once it is on the local disk and in the TCP send
# buffer) against its async mode.
WireProtocol = Literal["A", "C"]

_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")
_HOST = re.compile(r"[a-z][a-z0-9-]{0,62}")
_DEVICE = re.compile(r"/dev/[A-Za-z0-9_./-]+")
_SIZE = re.compile(r"\d+[kKmMgG]?")


class RunsCommands(Protocol):
    """What this module needs of a host: remirror.lab.hosts.machine.Host has it."""

    name: str

    def run(
        self, command: str, *, check: bool = ..., timeout: float = ...
    ) -> subprocess.CompletedProcess[str]: ...

    def write(self, dest: str, text: str, mode: str = ...) -> None: ...


class DrbdError(RuntimeError):
    """A DRBD resource that cannot be built from what was given, or that did not come up."""


@dataclass(frozen=True)
class End:
    """One end of a resource: the host's name (as `uname -n` says it), its address on the link,
    its backing disk."""

    host: str
    address: str
    disk: str

    def __post_init__(self) -> None:
        if not _HOST.fullmatch(self.host):
            raise DrbdError(f"drbd: {self.host!r} is not a host name")
        address = ipaddress.ip_address(self.address)  # ValueError names it
        if address.version != 4:
            raise DrbdError(f"drbd: {self.address} is not an IPv4 address")
        if not _DEVICE.fullmatch(self.disk) or "/../" in self.disk or self.disk.endswith("/.."):
            raise DrbdError(f"drbd: {self.disk!r} is not a device path")


@dataclass(frozen=True)
class Tuning:
    """The user guide's throughput and WAN settings, each recorded beside the bench's results.

    `c_max_rate` caps a resync at what the link carries (the guide: the replication link's
    bandwidth), `c_fill_target` keeps about one bandwidth-delay product in flight.
    """

    max_buffers: int = 8000
    max_epoch_size: int = 8000
    sndbuf_size: int = 0  # 0: sized by the kernel's TCP autotuning
    rcvbuf_size: int = 0
    al_extents: int = 3389
    c_plan_ahead: int = 20  # tenths of a second
    c_fill_target: str = "1M"
    c_max_rate: str = "100M"
    c_min_rate: str = "250k"  # the default: a resync yields to application writes down to this
    ping_timeout: int = 5  # tenths of a second for a ping's answer (the default, a LAN's)
    # Write ordering (the default: flush, /proc/drbd's wo:f). At each epoch's barrier the DR
    # site's receiver waits until every write of the epoch is on its disk, then flushes,
    # before it takes the next epoch's writes. False: none of it (disk-flushes, disk-barrier
    # and disk-drain off, wo:n), which the guide allows only behind a battery-backed cache; the
    # bench turns it off only to measure what the drain does to a tail (bench/peer_tail.py).
    drain: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.ping_timeout <= 300:
            raise DrbdError("drbd: ping-timeout is 1 to 300 tenths of a second")
        for name in ("max_buffers", "max_epoch_size", "al_extents", "c_plan_ahead"):
            if getattr(self, name) < 1:
                raise DrbdError(f"drbd: {name} must be positive")
        if self.sndbuf_size < 0 or self.rcvbuf_size < 0:
            raise DrbdError("drbd: buffer sizes are 0 (automatic) or positive")
        for name in ("c_fill_target", "c_max_rate", "c_min_rate"):
            if not _SIZE.fullmatch(getattr(self, name)):
                raise DrbdError(f"drbd: {name} {getattr(self, name)!r} is not a size")


@dataclass(frozen=True)
class Resource:
    """A DRBD 8.4 resource between two hosts; `text()` is its file in /etc/drbd.d."""

    name: str
    protocol: WireProtocol
    primary: End
    secondary: End
    minor: int = 0
    port: int = PORT
    tuning: Tuning = field(default_factory=Tuning)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise DrbdError(f"drbd: {self.name!r} is not a resource name")
        if self.protocol not in ("A", "C"):
            raise DrbdError(f"drbd: protocol {self.protocol!r}: the bench compares A and C")
        if not 0 <= self.minor < 256 or not 1024 <= self.port < 65536:
            raise DrbdError("drbd: minor 0-255 and a port 1024-65535")
        if self.primary.host == self.secondary.host:
            raise DrbdError("drbd: the two ends must be on two hosts")

    @property
    def device(self) -> str:
        return f"/dev/drbd{self.minor}"

    @property
    def path(self) -> str:
        return f"/etc/drbd.d/{self.name}.res"

    def text(self) -> str:
        tuning = self.tuning

        def on(end: End) -> str:
            return (
                f"\ton {end.host} {{\n\t\tdevice {self.device};\n\t\tdisk {end.disk};\n"
                f"\t\taddress {end.address}:{self.port};\n\t\tmeta-disk internal;\n\t}}\n"
            )

        no_drain = "\t\tdisk-flushes no;\n\t\tdisk-barrier no;\n\t\tdisk-drain no;\n"
        return (
            f"resource {self.name} {{\n"
            f"\tnet {{\n\t\tprotocol {self.protocol};\n"
            f"\t\tmax-buffers {tuning.max_buffers};\n\t\tmax-epoch-size {tuning.max_epoch_size};\n"
            f"\t\tsndbuf-size {tuning.sndbuf_size};\n\t\trcvbuf-size {tuning.rcvbuf_size};\n"
            f"\t\tping-timeout {tuning.ping_timeout};\n\t}}\n"
            f"\tdisk {{\n\t\tal-extents {tuning.al_extents};\n"
            f"\t\tc-plan-ahead {tuning.c_plan_ahead};\n\t\tc-fill-target {tuning.c_fill_target};\n"
            f"\t\tc-max-rate {tuning.c_max_rate};\n\t\tc-min-rate {tuning.c_min_rate};\n"
            f"{'' if tuning.drain else no_drain}\t}}\n"
            f"{on(self.primary)}{on(self.secondary)}}}\n"
        )

    def settings(self) -> dict[str, object]:
        """What the bench records beside the results: the protocol and every tuned option."""
        return {"protocol": self.protocol, "drbd": "8.4 (Debian 12's kernel module)", **asdict(self.tuning)}


@dataclass(frozen=True)
class DeviceState:
    """One minor's line in /proc/drbd (8.4): connection, roles, disk states, counters in KiB."""

    minor: int
    connection: str  # cs: Connected, SyncSource, WFConnection, StandAlone, ...
    roles: tuple[str, str]  # ro: this node's, the peer's
    disks: tuple[str, str]  # ds: UpToDate, Inconsistent, DUnknown, ...
    protocol: str
    counters: dict[str, int]  # ns, nr, dw, dr, al, bm, lo, pe, ua, ap, ep, oos
    write_ordering: str = ""  # wo: f (flush), d (drain), n (none); "" when not shown

    @property
    def in_sync(self) -> bool:
        return self.connection == "Connected" and self.disks == ("UpToDate", "UpToDate")


_LINE = re.compile(
    r"^\s*(?P<minor>\d+): cs:(?P<cs>\w+) ro:(?P<ro>\w+)/(?P<peer_ro>\w+) "
    r"ds:(?P<ds>\w+)/(?P<peer_ds>\w+) (?P<protocol>[ABC]) "
)
_COUNTER = re.compile(r"\b(ns|nr|dw|dr|al|bm|lo|pe|ua|ap|ep|oos):(\d+)")
_WRITE_ORDERING = re.compile(r"\bwo:([a-z])\b")


def parse_proc_drbd(text: str) -> dict[int, DeviceState]:
    """Every configured minor in /proc/drbd's text (8.4's format: a state line, then a line of
    counters, then, during a resync, its progress)."""
    states: dict[int, DeviceState] = {}
    lines = text.splitlines()
    for index, line in enumerate(lines):
        found = _LINE.match(line)
        if not found:
            continue
        below = lines[index + 1] if index + 1 < len(lines) else ""
        counters = {key: int(value) for key, value in _COUNTER.findall(below)}
        ordering = _WRITE_ORDERING.search(below)
        states[int(found["minor"])] = DeviceState(
            minor=int(found["minor"]),
            connection=found["cs"],
            roles=(found["ro"], found["peer_ro"]),
            disks=(found["ds"], found["peer_ds"]),
            protocol=found["protocol"],
            counters=counters,
            write_ordering=ordering[1] if ordering else "",
        )
    return states


def state(host: RunsCommands, resource: Resource) -> DeviceState | None:
    """The resource's minor as /proc/drbd shows it on `host`, or None when it is not configured."""
    return parse_proc_drbd(host.run("cat /proc/drbd 2>/dev/null || true").stdout).get(resource.minor)


def bring_up(
    primary: RunsCommands, secondary: RunsCommands, resource: Resource, *, initial_sync: bool = True
) -> None:
    """The resource on both hosts: its file, metadata on each disk, both ends up and connected,
    `primary` made primary. With `initial_sync` the primary's data is copied over whole (a new
    DRBD's first sync, from the primary's disk as it is); without, both disks are declared the
    same (the user guide's "skipping the initial resync", for disks known to be blank)."""
    quoted = shlex.quote(resource.name)
    for host in (primary, secondary):
        host.write(GLOBAL, GLOBAL_TEXT)
        host.write(resource.path, resource.text())
        host.run("modprobe drbd")
        # --force: drbdmeta would ask before writing metadata over a disk that holds data.
        host.run(f"drbdadm -- --force create-md {quoted}", timeout=300)
        host.run(f"drbdadm up {quoted}")
    wait_for(primary, resource, lambda s: s.connection == "Connected", "connected", 120)
    if initial_sync:
        primary.run(f"drbdadm primary --force {quoted}")
    else:
        primary.run(f"drbdadm -- --clear-bitmap new-current-uuid {quoted}")
        primary.run(f"drbdadm primary {quoted}")


def wait_for(
    host: RunsCommands,
    resource: Resource,
    condition: Callable[[DeviceState], bool],
    what: str,
    timeout: float = SYNC_TIMEOUT,
) -> DeviceState:
    """Until the resource's state on `host` meets `condition`."""
    deadline = time.monotonic() + timeout
    while True:
        now = state(host, resource)
        if now is not None and condition(now):
            return now
        if time.monotonic() > deadline:
            raise DrbdError(f"drbd {resource.name} on {host.name}: not {what} after {timeout:.0f}s: {now}")
        time.sleep(1)


def wait_synced(host: RunsCommands, resource: Resource, timeout: float = SYNC_TIMEOUT) -> DeviceState:
    return wait_for(host, resource, lambda s: s.in_sync, "UpToDate/UpToDate", timeout)


def tear_down(hosts: list[RunsCommands], resource: Resource) -> None:
    """The resource down on every host, its metadata wiped (drbdmeta's wipe-md) and its file
    gone: the disks hold no DRBD signature after it."""
    quoted = shlex.quote(resource.name)
    for host in hosts:
        host.run(f"drbdadm down {quoted} 2>/dev/null || true")
    for host in hosts:
        host.run(f"test ! -e {resource.path} || drbdadm -- --force wipe-md {quoted}", timeout=300)
        host.run(f"rm -f {resource.path}")
