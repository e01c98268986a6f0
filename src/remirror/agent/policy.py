"""The closed protocol: what a remote controller may ask of this site's agent, checked here.

Every request that arrives over SSH (`remirror agent [--serve]`) is checked
whole before any of it runs; one that asks for anything else is refused with
one line, runs nothing and writes nothing (the refusal goes to the system
log, for the site's operator). The protocol is a fixed set of operations:
the steps of remirror.agent.steps, each with its arguments checked, and a
`run` step is one of a few command forms (mdadm, iscsiadm, dmsetup and a
dd that zeroes a cache's first block), never a program of the sender's
choosing. Files: mdadm.conf (only its ARRAY lines may change), LIO's saved
configuration, remirror's WireGuard keys, `resolve --save`'s new files.

What the arguments may name is the site's own business: the disks, arrays,
targets, portals and mirrors of the profiles in PROFILE_DIR, in the site's
own view (remirror.profile.scope). A site that holds no profile there still
gets the closed forms, with any block device allowed; `plan` warns of it.
The local site's requests (the controller's own process) are not checked:
whoever runs remirror there is root there already.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR

if TYPE_CHECKING:
    from remirror.profile.scope import SiteScope

# Where the site keeps its own profiles, one view per profile (the Ansible role writes them).
PROFILE_DIR = Path("/etc/remirror")
MDADM_CONF = "/etc/mdadm/mdadm.conf"
LIO_SAVE_PATHS = ("/etc/rtslib-fb-target/saveconfig.json", "/etc/target/saveconfig.json")
# Trees a `resolve --save` directory may not be in: the system's own.
SYSTEM_TREES = ("/etc", "/usr", "/boot", "/root", "/bin", "/sbin", "/lib", "/proc", "/sys", "/dev", "/run")

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_IQN = re.compile(r"(iqn\.\d{4}-\d{2}\.[A-Za-z0-9.:_-]+|eui\.[0-9A-Fa-f]{16}|naa\.[0-9A-Fa-f]{16,32})")
UUID = re.compile(r"[0-9a-f]{8}(:[0-9a-f]{8}){3}")
_MD_SYSFS = re.compile(
    r"/sys/block/(md\d+)/md/(suspend_hi|sync_action|bitmap/backlog|sync_speed_min|sync_speed_max"
    r"|dev-([A-Za-z0-9!_-]+)/state)"
)
_SESSION_SYSFS = re.compile(r"/sys/class/iscsi_session/(session\d+)/recovery_tmo")
_MAJOR_MINOR = re.compile(r"\d+:\d+")


class Refused(Exception):
    """A request outside the protocol; the message says what and why, in one line."""


def load_scope(directory: Path = PROFILE_DIR) -> SiteScope | None:
    """The scope of the profiles this site holds; None when it holds none."""
    files = sorted(p for p in directory.glob("*.yaml") if p.is_file())
    if not files:
        return None
    from remirror.errors import ProfileError  # only a site with profiles pays for their models
    from remirror.profile.loader import load_profile
    from remirror.profile.scope import site_scope

    profiles = []
    for file in files:
        try:
            profiles.append((str(file), load_profile(file)))
        except ProfileError as error:
            # Not a reason to open up: the other profiles still say what is this site's.
            raise Refused(f"this site's profile {file} does not load: {error.one_line()}") from None
    return site_scope(profiles)


def check_request(request: dict[str, Any], scope: SiteScope | None) -> None:
    """Refused unless the whole request is inside the protocol and the site's scope."""
    Checker(scope).request(request)


@dataclass
class Checker:
    scope: SiteScope | None
    _known: set[str] | None = field(default=None, init=False)  # kernel names of scoped devices

    # --- requests -------------------------------------------------------------------------

    def request(self, request: dict[str, Any]) -> None:
        op = request.get("op")
        checks: dict[Any, Callable[[dict[str, Any]], None]] = {
            "observe": self._observe,
            "digest": lambda r: self.device(r.get("disk")),
            "block_stats": lambda r: self.each(self.device, r.get("devices", [])),
            "lock": lambda r: self.name(r.get("name"), "lock"),
            "unlock": lambda r: self.name(r.get("name"), "lock"),
            "sink": lambda r: None,  # the data is counted and dropped
            "cdp": self._cdp,
            "run": lambda r: self.each(self.step, r.get("steps", [])),
        }
        if op not in checks:
            raise Refused(f"{op!r} is not an operation of remirror's agent protocol")
        checks[op](request)

    def _observe(self, request: dict[str, Any]) -> None:
        for key in ("disks", "probe", "records"):
            self.each(self.device, request.get(key, []))
        self.each(self.portal, request.get("portals", []))

    def _cdp(self, request: dict[str, Any]) -> None:
        self.mirror(request.get("mirror"))
        if "md" in request:
            self.device(request["md"])
        if request.get("target") is not None:
            self.device(request["target"])

    # --- steps ----------------------------------------------------------------------------

    def step(self, step: Any) -> None:
        if not isinstance(step, dict) or step.get("kind") not in _STEP_CHECKS:
            kind = step.get("kind") if isinstance(step, dict) else step
            raise Refused(f"step {kind!r} is not a step of remirror's agent protocol")
        _STEP_CHECKS[step["kind"]](self, step)

    def run(self, step: dict[str, Any]) -> None:
        from remirror.agent.policy_commands import check_argv

        argv = step.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise Refused("a run step's argv is a list of strings")
        check_argv(self, argv)

    def write_file(self, step: dict[str, Any]) -> None:
        if step.get("path") != MDADM_CONF:
            raise Refused(f"write_file {step.get('path')!r}: remirror's agent writes only {MDADM_CONF}")
        if int(step.get("mode", 0o644)) & 0o7022:
            raise Refused(f"write_file {MDADM_CONF}: mode {int(step['mode']):o} is writable by others")
        changed = lines_of(MDADM_CONF) ^ set(str(step.get("content", "")).splitlines())
        other = sorted(line for line in changed if line.strip() and not line.startswith(("ARRAY ", "#")))
        if other:
            raise Refused(f"write_file {MDADM_CONF}: only its ARRAY lines may change, not {other[0]!r}")

    def write_sysfs(self, step: dict[str, Any]) -> None:
        path = str(step.get("path"))
        md, session = _MD_SYSFS.fullmatch(path), _SESSION_SYSFS.fullmatch(path)
        if md:
            self.device(f"/dev/{md.group(1)}")
        elif session:
            target = Path(f"/sys/class/iscsi_session/{session.group(1)}/targetname")
            self.iqn(target.read_text().strip() if target.exists() else "")
        else:
            raise Refused(f"write_sysfs {path!r}: not an md or iSCSI session attribute remirror sets")

    def lio(self, step: dict[str, Any]) -> None:
        op = step.get("op")
        if op == "save":
            if step.get("path") not in LIO_SAVE_PATHS:
                raise Refused(
                    f"lio save {step.get('path')!r}: not where LIO's configuration is restored from"
                )
            return
        if op in ("create_backstore", "delete_backstore"):
            self.backstore(step.get("name"))
            if op == "create_backstore":
                self.device(step.get("dev"))
            return
        ops = {"delete_target", "create_target", "set_parameters", "create_portal", "create_lun", "set_acl"}
        if op not in ops:
            raise Refused(f"lio {op!r}: not an LIO operation of remirror's agent protocol")
        self.iqn(step.get("iqn"))
        if op == "create_portal":
            self.portal(f"{step.get('address')}:{step.get('port')}")
        elif op == "create_lun":
            self.backstore(step.get("backstore"))
        elif op == "set_acl" and not _IQN.fullmatch(str(step.get("initiator"))):
            raise Refused(f"lio set_acl: {step.get('initiator')!r} is not an initiator name")

    def save_ranges(self, step: dict[str, Any]) -> None:
        self.device(step.get("leg"))
        self.mirror(step.get("mirror"))
        self.name(step.get("site"), "site")
        where = os.path.normpath(str(step.get("dir")))
        if not where.startswith("/") or any(where == t or where.startswith(t + "/") for t in SYSTEM_TREES):
            raise Refused(f"save_ranges {step.get('dir')!r}: not a directory for saved writes")

    def wireguard(self, step: dict[str, Any]) -> None:
        interface = str(step.get("interface", Path(str(step.get("path"))).stem))
        key = step.get("key_file", step.get("path"))
        if self.scope is not None and interface not in self.scope.interfaces:
            raise Refused(f"WireGuard interface {interface!r} is not one this site's profiles name")
        if not interface.startswith(INTERFACE_PREFIX) or key != f"{KEY_DIR}/{interface}.key":
            raise Refused(f"WireGuard {interface!r} with key {key!r}: not remirror's")

    # --- what arguments may name ------------------------------------------------------------

    def each(self, check: Callable[[Any], None], values: Iterable[Any]) -> None:
        if not isinstance(values, list):
            raise Refused(f"{values!r} where a list was expected")
        for value in values:
            check(value)

    def name(self, value: Any, what: str) -> None:
        if not isinstance(value, str) or not NAME.fullmatch(value):
            raise Refused(f"{value!r} is not a {what} name")

    def mirror(self, value: Any) -> None:
        self.name(value, "mirror")
        if self.scope is not None and value not in self.scope.mirrors:
            raise Refused(f"mirror {value!r} is not one of {self._sources()}")

    def iqn(self, value: Any) -> None:
        if not isinstance(value, str) or not _IQN.fullmatch(value):
            raise Refused(f"{value!r} is not an iSCSI name")
        if self.scope is not None and value not in self.scope.iqns:
            raise Refused(f"target {value} is not one {self._sources()} name")

    def portal(self, value: Any) -> None:
        address, _, port = str(value).rpartition(":")
        if not address or not port.isdigit():
            raise Refused(f"{value!r} is not ADDRESS:PORT")
        if self.scope is not None and (address.strip("[]"), int(port)) not in self.scope.portals:
            raise Refused(f"portal {value} is not one {self._sources()} name")

    def backstore(self, value: Any) -> None:
        self.name(value, "backstore")
        mirrors = self.scope.mirrors if self.scope is not None else None
        if mirrors is not None and not any(str(value).startswith(f"{m}-") for m in mirrors):
            raise Refused(f"backstore {value!r} is not one of a mirror of {self._sources()}")

    def dm_name(self, value: Any) -> None:
        self.name(value, "device-mapper")
        mirrors = self.scope.mirrors if self.scope is not None else None
        ours = str(value).startswith("remirror-") and (
            mirrors is None or any(str(value).startswith(f"remirror-{m}-") for m in mirrors)
        )
        if not ours:
            raise Refused(f"device-mapper device {value!r} is not one remirror makes for {self._sources()}")

    def table(self, value: Any) -> None:
        for word in str(value).split():
            if word.startswith("/"):
                self.device(word)
            elif _MAJOR_MINOR.fullmatch(word):
                name = devno_name(word)
                if name is None or (self.scope is not None and name not in self.known()):
                    raise Refused(f"device {word} is not one {self._sources()} name for this site")

    def device(self, value: Any) -> None:
        """A block device the site's profiles name, or one made from them: the array, a cache or
        CDP device, a replica's iSCSI disk. With no profile: any block device."""
        if not isinstance(value, str) or not value.startswith("/dev/") or "/../" in value + "/":
            raise Refused(f"{value!r} is not a device path")
        if self.scope is None:
            # One that is not there yet (an array, a login's link) or is missing: its command fails.
            if Path(value).exists() and not stat.S_ISBLK(Path(value).stat().st_mode):
                raise Refused(f"{value} is not a block device")
            return
        if self._named(value) or Path(os.path.realpath(value)).name in self.known():
            return
        raise Refused(f"{value} is not a device {self._sources()} name for this site")

    def _named(self, path: str) -> bool:
        scope = self.scope
        if scope is None:
            return False
        if path in scope.disks or path in scope.arrays:
            return True
        name = path.removeprefix("/dev/mapper/")
        if name != path:
            return any(name.startswith(f"remirror-{m}-") for m in scope.mirrors)
        return path.startswith("/dev/disk/by-path/") and any(
            path.endswith(f"-iscsi-{iqn}-lun-0") for iqn in scope.iqns
        )

    def known(self) -> set[str]:
        """Kernel names of what the scope names that exists now, and of arrays made of it."""
        scope = self.scope
        if scope is None:
            return set()
        if self._known is None:
            paths = [*scope.disks, *scope.arrays]
            paths += [str(p) for m in scope.mirrors for p in Path("/dev/mapper").glob(f"remirror-{m}-*")]
            paths += [
                str(p) for i in scope.iqns for p in Path("/dev/disk/by-path").glob(f"*-iscsi-{i}-lun-0")
            ]
            known = {Path(os.path.realpath(p)).name for p in paths if Path(p).exists()}
            for md in Path("/sys/block").glob("md*"):
                slaves = md / "slaves"
                if slaves.is_dir() and {s.name for s in slaves.iterdir()} & known:
                    known.add(md.name)
            self._known = known
        return self._known

    def _sources(self) -> str:
        return "this site's profiles (" + ", ".join(self.scope.sources if self.scope else ()) + ")"


def devno_name(devno: str) -> str | None:
    """The kernel name of block device MAJOR:MINOR (None if there is none)."""
    link = Path(f"/sys/dev/block/{devno}")
    return Path(os.path.realpath(link)).name if link.exists() else None


def lines_of(path: str) -> set[str]:
    """The lines of a file as it is now (none if it is not there)."""
    try:
        return set(Path(path).read_text().splitlines())
    except FileNotFoundError:
        return set()


def _fields(**checks: str) -> Callable[[Checker, dict[str, Any]], None]:
    """A step whose named fields are devices, lists of them, mirrors, dm names and so on."""

    def check(self: Checker, step: dict[str, Any]) -> None:
        for key, what in checks.items():
            _FIELD_CHECKS[what](self, step.get(key))

    return check


def _refuse_path(value: Any) -> None:
    raise Refused(f"{value!r}: waits only for device paths")


def _uuid(value: Any) -> None:
    if not isinstance(value, str) or not UUID.fullmatch(value):
        raise Refused(f"{value!r} is not an md array UUID")


_FIELD_CHECKS: dict[str, Callable[[Checker, Any], None]] = {
    "device": Checker.device,
    "devices": lambda check, value: check.each(check.device, value),
    "mirror": Checker.mirror,
    "dm": Checker.dm_name,
    "dms": lambda check, value: check.each(check.dm_name, value),
    "table": lambda check, value: check.table(value or ""),
    "iqn": Checker.iqn,
    "path": lambda check, value: (
        check.device(value) if str(value).startswith("/dev/") else _refuse_path(value)
    ),
    "uuid": lambda check, value: _uuid(value),
}
_MEMBER_STATES = {"writemostly", "-writemostly"}


def _member_state(self: Checker, step: dict[str, Any]) -> None:
    _fields(md="device", device="device")(self, step)
    if step.get("value") not in _MEMBER_STATES:
        raise Refused(f"member state {step.get('value')!r}: remirror sets only write-mostly")


def _disk_sysfs(self: Checker, step: dict[str, Any]) -> None:
    self.device(step.get("device"))
    if step.get("attribute") not in ("queue/scheduler", "md/sync_speed_min", "md/sync_speed_max"):
        raise Refused(f"block device attribute {step.get('attribute')!r}: not one remirror sets")


_STEP_CHECKS: dict[str, Callable[[Checker, dict[str, Any]], None]] = {
    "run": Checker.run,
    "prove_blank": _fields(device="device"),
    "wait_path": _fields(path="path"),
    "assemble_array": _fields(md="device", uuid="uuid", devices="devices"),
    "node_secrets": _fields(target="iqn"),
    "write_file": Checker.write_file,
    "write_sysfs": Checker.write_sysfs,
    "member_state": _member_state,
    "disk_sysfs": _disk_sysfs,
    "local_leg_last": _fields(md="device", device="device"),
    "lio": Checker.lio,
    "dm_reload": _fields(name="dm", table="table"),
    "drain_cache": _fields(name="dm", cleaner_table="table", linear="table"),
    "cdp_stack": _fields(mirror="mirror", md="device"),
    "cdp_deactivate": _fields(mirror="mirror", views="dms"),
    "leg_record_create": _fields(mirror="mirror", devices="devices"),
    "leg_record_promote": _fields(devices="devices"),
    "leg_record_join": _fields(source="device", device="device"),
    "save_ranges": Checker.save_ranges,
    "wireguard_key": Checker.wireguard,
    "wireguard_tunnel": Checker.wireguard,
}
