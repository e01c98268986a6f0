"""The closed protocol: what a remote controller may ask of this site's agent, checked here.

Every request that arrives over SSH (`remirror agent [--serve]`) is checked
whole before any of it runs; one that asks for anything else is refused with
one line, runs nothing and writes nothing (the refusal goes to the system
log, for the site's operator). The protocol is a fixed set of operations:
the requests below, and the steps of the protocol's catalogue
(remirror.protocol), each read into its class and its fields checked
(remirror.agent.policy_steps, policy_commands): no step carries a command
line; a command's argv is built here from its checked fields, never a
program or an option of the sender's. Files: mdadm.conf
(only its ARRAY lines may change), LIO's saved configuration, remirror's
WireGuard keys, `resolve --save`'s new files.

What the arguments may name is the site's own business: the disks, arrays,
targets, portals and mirrors of the profiles in PROFILE_DIR, in the site's
own view (remirror.profile.scope). The disk under a leg's own points may be
read, never written, and their stack only built or activated as the
profile says. A site that holds no profile there still gets the closed
forms, with any block device allowed (docs/security.md says how to scope
it). The local site's requests (the controller's own process) are not
checked: whoever runs remirror there is root there already.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.agent.lock import SITE_LOCK  # the one lock another site's controller takes here
from remirror.facts.cdp import LEG_POINTS_SEPARATOR, is_leg_points, is_view

if TYPE_CHECKING:
    from remirror.facts.scope import SiteScope
    from remirror.protocol.tables import DmTarget

# Where the site keeps its profiles (the same files as every other site's) and, in `site`, the
# name of its site in them where its host name does not say it (remirror.profile.identity).
PROFILE_DIR = Path("/etc/remirror")

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
IQN = re.compile(r"(iqn\.\d{4}-\d{2}\.[A-Za-z0-9.:_-]+|eui\.[0-9A-Fa-f]{16}|naa\.[0-9A-Fa-f]{16,32})")
UUID = re.compile(r"[0-9a-f]{8}(:[0-9a-f]{8}){3}")
DM_PREFIX = "remirror-"  # every device-mapper device remirror makes
REMOTE_LOCK_WAIT = 3600.0  # seconds a remote controller may wait for it
# What follows `remirror-KEY-cdp` in the names of a CDP stack's devices (remirror.facts.cdp.stack_names)
# and of a drill's copy (remirror.drill).
_STACK_PARTS = ("", "-tmeta", "-emeta", "-tdata", "-pool", "-thin", "-drill", "-drill-data")
# What follows `remirror-MIRROR-SITE`: a leg's cache, dm-cache's metadata and cache (remirror.plan.cache).
_CACHE_PARTS = ("", "-meta", "-fast")


RAW_SPANS = 1024  # ranges a raw digest may ask for at once (a catch-up asks 256)


def _raw_span(span: Any) -> bool:
    """[offset, length]: whole 4 KiB blocks, a MiB at most."""
    if not isinstance(span, list) or len(span) != 2:
        return False
    offset, length = span
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in span)
    return whole and offset >= 0 and 0 < length <= 1 << 20 and not offset % 4096 and not length % 4096


class Refused(Exception):
    """A request outside the protocol; the message says what and why, in one line."""


def profile_files(directory: Path | None = None) -> list[Path]:
    """The profiles this site holds (in PROFILE_DIR unless told)."""
    return sorted(p for p in (directory or PROFILE_DIR).glob("*.yaml") if p.is_file())


def profiles_state(directory: Path | None = None) -> tuple[tuple[str, int, int, int, int, int], ...]:
    """What changes when a profile of the site is written, added or removed (name, device,
    inode, size, modification and change times: a copy that keeps the size and sets the
    modification time back still changes the change time, which no program sets), or what
    says which site this host is in them (the site file, the host name): an agent that lives
    on reads them again when it changes."""
    state = []
    for file in [*profile_files(directory), (directory or PROFILE_DIR) / "site"]:
        with contextlib.suppress(OSError):  # removed meanwhile: it is not in the state
            seen = file.stat()
            state.append(
                (file.name, seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
            )
    state.append((os.uname().nodename, 0, 0, 0, 0, 0))
    return tuple(state)


def load_scope(directory: Path | None = None, cache: Path | None = None) -> SiteScope | None:
    """The scope of the profiles this site holds; None when it holds none. Read from the
    site's compiled scope while nothing it was built from changed (remirror.agent.compiled_scope;
    `cache`, for another `directory` than the site's, none unless given)."""
    from remirror.agent import compiled_scope

    files = profile_files(directory)
    if not files:
        return None
    cache = cache or (compiled_scope.CACHE if directory is None else None)
    site_file = (directory or PROFILE_DIR) / "site"
    texts = compiled_scope.read_texts(files)
    key = compiled_scope.scope_key(texts, site_file) if cache is not None else None
    if key is not None and cache is not None and (kept := compiled_scope.read(key, cache)) is not None:
        return kept
    from remirror.errors import ProfileError, UsageError  # only a site with profiles pays for their models
    from remirror.here import this_host
    from remirror.profile.identity import as_seen_here
    from remirror.profile.loader import load_profile, parse_profile
    from remirror.profile.scope import site_scope

    profiles = []
    for file, text in texts.items():
        try:
            # This site's part of each: the site it finds itself to be, by its own site file and
            # host name, never by a variable the SSH session could carry or a name a request sends.
            here = this_host(environment=False, site_file=site_file)
            # The text the key hashed, parsed; one that could not be read is loaded for its error.
            profile = load_profile(file) if text is None else parse_profile(text, str(file))
            profiles.append((str(file), as_seen_here(profile, here)))
        except (ProfileError, UsageError) as error:
            # Not a reason to open up: the other profiles still say what is this site's.
            raise Refused(f"this site's profile {file} does not load: {error.one_line()}") from None
    scope = site_scope(profiles)
    # Filed only under a key that still holds: a site file or code changed meanwhile files nothing.
    if key is not None and cache is not None and compiled_scope.scope_key(texts, site_file) == key:
        compiled_scope.write(key, scope, cache)
    return scope


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
            "digest": self._digest,
            "block_stats": lambda r: self.each(self.readable, r.get("devices", [])),
            "lock": self._lock,
            "unlock": lambda r: self._lock_name(r.get("name")),
            "sink": lambda r: None,  # the data is counted and dropped
            "cdp": self._cdp,
            "run": lambda r: self.each(self.step, r.get("steps", [])),
        }
        if op == "seed":
            # A seed is read from and written to the site's own files and disks: its operator's.
            raise Refused("seed: only by this site's operator, on this site (remirror seed)")
        if op not in checks:
            raise Refused(f"{op!r} is not an operation of remirror's agent protocol")
        checks[op](request)

    def _digest(self, request: dict[str, Any]) -> None:
        """A leg's digests; `raw` (from the disk's byte 0, a seed's catch-up) only of a seeded
        mirror's leg, in chunks of at most a MiB (remirror.catch_up's)."""
        disk, raw = request.get("disk"), request.get("raw", False)
        self.readable(disk)
        if not isinstance(raw, bool):
            raise Refused("digest: raw is true or false")
        if not raw:
            return
        if self.scope is not None and disk not in self.scope.seed_legs:
            raise Refused(f"digest raw: {disk} is not a seeded mirror's leg in {self._sources()}")
        spans = request.get("spans")
        if not isinstance(spans, list) or len(spans) > RAW_SPANS or not all(_raw_span(s) for s in spans):
            raise Refused(f"digest raw: at most {RAW_SPANS} ranges of whole 4 KiB blocks, a MiB each at most")

    def _observe(self, request: dict[str, Any]) -> None:
        for key in ("disks", "probe", "records"):
            self.each(self.readable, request.get(key, []))
        self.each(self.portal, request.get("portals", []))

    def _lock(self, request: dict[str, Any]) -> None:
        """A remote controller takes the site's lock for a verb, nothing else: never the lock of the
        site's own points (`cdp-KEY`) or drills, which would hold back its points and drills. It
        waits a bounded time; who holds it is said by this site (remirror.agent.serve)."""
        self._lock_name(request.get("name"))
        wait = request.get("wait", 0)
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= REMOTE_LOCK_WAIT:
            raise Refused(f"lock: a wait of {wait!r} s (at most {REMOTE_LOCK_WAIT:g})")
        if not isinstance(request.get("holder", ""), str):
            raise Refused("lock: its holder is a text")

    def _lock_name(self, value: Any) -> None:
        self.name(value, "lock")
        if value != SITE_LOCK:
            raise Refused(f"lock {value!r}: a remote controller takes only this site's {SITE_LOCK!r} lock")

    def _cdp(self, request: dict[str, Any]) -> None:
        if isinstance(request.get("mirror"), str) and is_leg_points(request["mirror"]):
            raise Refused(f"cdp: {request['mirror']} are this site's own points: only its operator's verbs")
        if request.get("do") in ("prune", "down", "up"):
            # An operator's deletion of history, or taking the points down or up: on the site
            # that keeps the points, never asked.
            raise Refused(f"cdp {request['do']}: only on the site that keeps the points, by its operator")
        self.mirror(request.get("mirror"))
        if (
            request.get("do") == "point"
            and self.scope is not None
            and request["mirror"] not in self.scope.retention
        ):
            raise Refused(f"cdp point: mirror {request['mirror']} has no cdp in {self._sources()}")
        if "md" in request:
            self.device(request["md"])
        if request.get("target") is not None:
            self.device(request["target"])

    # --- steps ----------------------------------------------------------------------------

    def step(self, obj: Any) -> None:
        """A step as it arrived: read into its class of the catalogue (each field of its type,
        nothing else), then checked by its class's check."""
        from remirror.agent.policy_steps import STEP_CHECKS
        from remirror.protocol import WireError, decode

        try:
            step = decode(obj)
        except WireError as error:
            raise Refused(str(error)) from None
        STEP_CHECKS[type(step)](self, step)

    # --- what arguments may name ------------------------------------------------------------

    def readable(self, value: Any) -> None:
        """A device a request may read: what it may write, and the disks under the site's own points
        (their facts; their points are written by the site alone)."""
        if self.scope is not None and any(value == disk for _, disk in self.scope.points):
            return
        self.device(value)

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
        if not isinstance(value, str) or not IQN.fullmatch(value):
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
        """A backstore of a mirror in scope, by its exact name (remirror.profile.names): a replica
        leg's `MIRROR-SITE` at one of the site's own names, or a mirror's `MIRROR-export`."""
        self.name(value, "backstore")
        scope = self.scope
        if scope is None:
            return
        ours = {f"{m}-{s}" for m in scope.mirrors for s in (*scope.sites, "export")}
        if value not in ours:
            raise Refused(f"backstore {value!r} is not one of a mirror of {self._sources()}")

    def dm_name(self, value: Any) -> None:
        self.name(value, "device-mapper")
        if LEG_POINTS_SEPARATOR in str(value):  # a leg's own points' (MIRROR.SITE), profiles or not
            raise Refused(f"device-mapper device {value!r} is one of this site's own points")
        if not str(value).startswith(DM_PREFIX) or not self.ours(str(value)):
            raise Refused(f"device-mapper device {value!r} is not one remirror makes for {self._sources()}")

    def ours(self, name: str, points: bool = False) -> bool:
        """Whether `name` is, exactly, a device-mapper name remirror makes for what the scope names
        (never by prefix: mirror `db` does not reach mirror `db-2`'s devices): a leg's cache
        (`remirror-MIRROR-SITE`, and dm-cache's `-meta` and `-fast` under it) at one of the site's
        own names; a mirror's CDP stack's devices, its points' views and a drill's copy
        (remirror.facts.cdp.stack_names). With `points`, those of the site's own points too, which
        no request names but to read them or to build and activate their stack as the profile says."""
        scope = self.scope
        if scope is None:
            return name.startswith(DM_PREFIX)
        caches = {
            f"{DM_PREFIX}{m}-{s}{part}" for m in scope.mirrors for s in scope.sites for part in _CACHE_PARTS
        }
        if name in caches:
            return True
        keys = {*scope.mirrors, *((key for key, _ in scope.points) if points else ())}
        for key in keys:
            stack = f"{DM_PREFIX}{key}-cdp"
            if name in {stack + part for part in _STACK_PARTS}:
                return True
            if is_view(name, key):
                return True
        return False

    def dm_target(self, value: DmTarget | None) -> None:
        """A typed device-mapper table (remirror.agent.policy_tables)."""
        from remirror.agent.policy_tables import dm_target

        dm_target(self, value)

    def device(self, value: Any) -> None:
        """A block device the site's profiles name, or one made from them: the array, a cache or
        CDP device, a replica's iSCSI disk. With no profile: any block device."""
        if not isinstance(value, str) or not value.startswith("/dev/") or "/../" in value + "/":
            raise Refused(f"{value!r} is not a device path")
        if self.scope is None:
            # One that is not there yet (an array, a login's link) or is missing: its command fails.
            if Path(value).exists() and not stat.S_ISBLK(Path(value).stat().st_mode):
                raise Refused(f"{value!r} is not a block device")
            if any(inside_points(name) for name in dm_names_of(value)):
                raise Refused(f"{value!r} is one of this site's own points' devices")
            return
        if self._named(value) or Path(os.path.realpath(value)).name in self.known():
            return
        raise Refused(f"{value!r} is not a device {self._sources()} name for this site")

    def _named(self, path: str) -> bool:
        scope = self.scope
        if scope is None:
            return False
        if path in scope.disks or path in scope.arrays:
            return True
        name = path.removeprefix("/dev/mapper/")
        if name != path:
            return "/" not in name and self.ours(name)
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
            paths += [str(p) for p in Path("/dev/mapper").glob(f"{DM_PREFIX}*") if self.ours(p.name)]
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


def dm_names_of(path: str) -> list[str]:
    """The device-mapper names of `path` (none if it is not a device-mapper device): its own name
    under /dev/mapper, and the kernel's for what it resolves to (`/dev/dm-3`, a link)."""
    names = [path.removeprefix("/dev/mapper/")] if path.startswith("/dev/mapper/") else []
    with contextlib.suppress(OSError):
        names.append(Path(f"/sys/block/{Path(os.path.realpath(path)).name}/dm/name").read_text().strip())
    return names


def inside_points(name: str) -> bool:
    """Whether dm device `name` is inside a leg's own points (MIRROR.SITE): their pool, metadata,
    views, a drill's copy; not their volume (`remirror-MIRROR.SITE-cdp`), which is the leg."""
    return LEG_POINTS_SEPARATOR in name and not (name.startswith(DM_PREFIX) and name.endswith("-cdp"))


def devno_name(devno: str) -> str | None:
    """The kernel name of block device MAJOR:MINOR (None if there is none)."""
    link = Path(f"/sys/dev/block/{devno}")
    return Path(os.path.realpath(link)).name if link.exists() else None
