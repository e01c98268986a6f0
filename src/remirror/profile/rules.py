"""Rules that relate several fields of a profile.

Each rule yields `(path, message)` pairs; the path names the key the
operator must change, so the loader can point at its line. Rules run only on
a profile whose fields are individually valid.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from remirror.profile.layers import Cache, Cdp
from remirror.profile.model import Chap, Mirror, Profile
from remirror.profile.schedule import DEFAULT_KEY, overlap
from remirror.profile.types import Portal

Path = tuple[str | int, ...]
Violation = tuple[Path, str]


def check(profile: Profile) -> list[Violation]:
    """Every rule violation in the profile, in document order."""
    return [
        *_legs_name_defined_sites(profile),
        *_ssh_options_only_for_ssh_sites(profile),
        *_unique_mirrors(profile),
        *_one_leg_per_site(profile),
        *_disks_used_once(profile),
        *_unique_target_names(profile),
        *_replication_consistent(profile),
        *_chap_consistent(profile),
        *_cdp_window(profile),
        *_keep_data_alone(profile),
        *_seeded_with_kept_data(profile),
        *_points_on_replicas_only(profile),
        *_drills_on_points(profile),
        *_hooks_where_the_application_runs(profile),
        *_portals_are_addresses(profile),
    ]


def _legs(mirror: Mirror, index: int) -> Iterator[tuple[Path, str, str, Cache | None]]:
    """(path, site, disk, cache) of each leg of a mirror."""
    yield ("mirrors", index, "primary"), mirror.primary.site, mirror.primary.disk, mirror.primary.cache
    for r, replica in enumerate(mirror.replicas):
        yield ("mirrors", index, "replicas", r), replica.site, replica.disk, replica.cache


def _legs_name_defined_sites(profile: Profile) -> Iterator[Violation]:
    defined = ", ".join(sorted(profile.sites))
    for m, mirror in enumerate(profile.mirrors):
        for path, site, _disk, _cache in _legs(mirror, m):
            if site not in profile.sites:
                yield (*path, "site"), f"site {site!r} is not defined under sites (defined: {defined})"


def _ssh_options_only_for_ssh_sites(profile: Profile) -> Iterator[Violation]:
    for name, site in profile.sites.items():
        if site.is_local and site.ssh is not None:
            yield ("sites", name, "ssh"), "ssh options given for a local site"


def _unique_mirrors(profile: Profile) -> Iterator[Violation]:
    names: dict[str, int] = {}
    devices: dict[str, int] = {}
    for m, mirror in enumerate(profile.mirrors):
        if mirror.name in names:
            yield (
                ("mirrors", m, "name"),
                f"mirror name {mirror.name!r} is already used by mirrors[{names[mirror.name]}]",
            )
        names.setdefault(mirror.name, m)
        if mirror.md_device in devices:
            yield (
                ("mirrors", m, "device"),
                f"device {mirror.md_device} is already used by mirrors[{devices[mirror.md_device]}]",
            )
        devices.setdefault(mirror.md_device, m)


def _one_leg_per_site(profile: Profile) -> Iterator[Violation]:
    # Two legs of one mirror on one site protect against nothing the site can
    # lose, and the replica's target would be exported to its own host.
    for m, mirror in enumerate(profile.mirrors):
        seen: dict[str, Path] = {}
        for path, site, _disk, _cache in _legs(mirror, m):
            if site in seen:
                yield (
                    (*path, "site"),
                    f"mirror {mirror.name!r} already has a leg on site {site!r} ({format_path(seen[site])})",
                )
            seen.setdefault(site, path)


def _disks_used_once(profile: Profile) -> Iterator[Violation]:
    used: dict[tuple[str, str], Path] = {}
    for m, mirror in enumerate(profile.mirrors):
        for path, site, disk, cache in _legs(mirror, m):
            places = [((*path, "disk"), disk)]
            if cache is not None:
                places.append(((*path, "cache", "disk"), cache.disk))
            for where, device in places:
                key = (site, device)
                if key in used:
                    yield where, f"disk {device} on site {site!r} is already used by {format_path(used[key])}"
                used.setdefault(key, where)


def _unique_target_names(profile: Profile) -> Iterator[Violation]:
    seen: dict[str, Path] = {}
    for m, mirror in enumerate(profile.mirrors):
        # The primary's leg too when it names one: a promotion exports it under that name (derived
        # names differ by mirror and site, which the rules above keep apart already).
        given = [mirror.primary.iqn] if mirror.primary.iqn else []
        targets: list[tuple[Path, str]] = [
            *((("mirrors", m, "primary", "iqn"), iqn) for iqn in given),
            *(
                (("mirrors", m, "replicas", r, "iqn"), profile.replica_iqn(mirror, replica))
                for r, replica in enumerate(mirror.replicas)
            ),
        ]
        if mirror.export is not None:
            targets.append((("mirrors", m, "export", "iqn"), mirror.export.iqn))
        for path, iqn in targets:
            if iqn in seen:
                yield path, f"target name {iqn} is already used by {format_path(seen[iqn])}"
            seen.setdefault(iqn, path)


def _replication_consistent(profile: Profile) -> Iterator[Violation]:
    for m, mirror in enumerate(profile.mirrors):
        replication = mirror.replication
        path = ("mirrors", m, "replication")
        if replication.mode == "sync" and replication.write_behind is not None:
            yield (*path, "write_behind"), "only allowed with mode: async"
        if replication.mode == "async" and replication.write_behind == 0:
            yield (*path, "write_behind"), "0 makes async mode synchronous; use mode: sync"
        schedule = replication.schedule or {}
        if DEFAULT_KEY in schedule and replication.resync_max is not None:
            yield (
                (*path, "schedule", DEFAULT_KEY),
                "says the same as resync_max (the limit outside the windows): keep one",
            )
        if clash := overlap(replication.windows):
            earlier, later = clash
            yield (
                (*path, "schedule", later.text),
                f"overlaps {earlier.text!r}: windows may not share a minute",
            )


def _chap_consistent(profile: Profile) -> Iterator[Violation]:
    for m, mirror in enumerate(profile.mirrors):
        chap = mirror.iscsi.chap
        places = [(("mirrors", m, "iscsi", "chap"), chap if isinstance(chap, Chap) else None)]
        if mirror.export is not None:
            places.append((("mirrors", m, "export", "chap"), mirror.export.chap))
        for path, chap in places:
            if chap is None:
                continue
            if not chap.mutual:
                for field in ("mutual_username", "mutual_password_file"):
                    if getattr(chap, field) is not None:
                        yield (*path, field), "only allowed with mutual: true"
            elif chap.target_password_file == chap.password_file:
                # RFC 3720 11.1.4: the two directions must not share a secret.
                yield (*path, "mutual_password_file"), "must differ from password_file"


# The index of points has room for this many (remirror.plan.cdp.INDEX_BYTES); a thin
# pool handles far more snapshots, but each costs metadata and a line in `cdp list`.
MAX_CDP_POINTS = 60_000


def _cdp_window(profile: Profile) -> Iterator[Violation]:
    """A mirror's `cdp` and a replica's own `points` keep points the same way."""
    for m, mirror in enumerate(profile.mirrors):
        kept: list[tuple[Path, Cdp | None]] = [(("mirrors", m, "cdp"), mirror.cdp)]
        kept += [
            (("mirrors", m, "replicas", r, "points"), leg.points) for r, leg in enumerate(mirror.replicas)
        ]
        for where, settings in kept:
            if settings is None:
                continue
            keep = settings.retention
            if keep.longest < settings.every:
                yield (*where, "keep"), "the protection window is shorter than the interval between points"
            elif keep.at_most(settings.every) > MAX_CDP_POINTS:
                yield (
                    (*where, "keep"),
                    f"keeps {keep.at_most(settings.every):.0f} points: at most {MAX_CDP_POINTS}"
                    " (a longer `every` or a shorter `keep`)",
                )


def _hooks_where_the_application_runs(profile: Profile) -> Iterator[Violation]:
    """A replica's own points are of a leg no application uses at its site: nothing to flush."""
    for m, mirror in enumerate(profile.mirrors):
        for r, replica in enumerate(mirror.replicas):
            if replica.points is not None and replica.points.hooks is not None:
                yield (
                    ("mirrors", m, "replicas", r, "points", "hooks"),
                    "hooks run where the application runs: the mirror's `cdp.hooks` (a drill's:"
                    " `drill.hooks`)",
                )


def _seeded_with_kept_data(profile: Profile) -> Iterator[Violation]:
    """A seed is of the file system keep_data keeps: md's 1.0 metadata keeps the data at byte 0
    of every leg, where the seed put it (docs/seeding.md)."""
    for m, mirror in enumerate(profile.mirrors):
        if mirror.replication.initial_sync == "seeded" and not mirror.primary.keep_data:
            yield (
                ("mirrors", m, "replication", "initial_sync"),
                "seeded needs primary.keep_data: true (a seed carries the primary's data; blank"
                " disks need none: initial_sync: skip)",
            )


def _keep_data_alone(profile: Profile) -> Iterator[Violation]:
    """`keep_data` keeps the file system at the primary disk's start where it is: nothing may be
    laid over it or claim the disk is blank (docs/keep-data.md). A cache may go in front of it:
    dm-writecache and dm-cache map the disk one to one."""
    for m, mirror in enumerate(profile.mirrors):
        if not mirror.primary.keep_data:
            continue
        path = ("mirrors", m, "primary", "keep_data")
        if mirror.cdp is not None:
            yield path, "cannot go with cdp: CDP's metadata and pool would be laid over the kept file system"
        if mirror.replication.initial_sync == "skip":
            yield path, "cannot go with initial_sync: skip: the replicas must be filled from the kept data"


def _points_on_replicas_only(profile: Profile) -> Iterator[Violation]:
    """A replica's own points lie under the volume it exports (docs/security.md): a cache in
    front of it, or a kept file system at the primary's start sized against the raw disk, would
    not see that. The primary's points are the mirror's `cdp`."""
    for m, mirror in enumerate(profile.mirrors):
        if mirror.primary.points is not None:
            yield (
                ("mirrors", m, "primary", "points"),
                "points are a replica's: on the primary, use the mirror's cdp",
            )
        for r, replica in enumerate(mirror.replicas):
            if replica.points is None:
                continue
            path = ("mirrors", m, "replicas", r, "points")
            if replica.cache is not None:
                yield (
                    path,
                    "cannot go with a cache on the same leg (not yet: the cache would sit under the points)",
                )
            if mirror.primary.keep_data:
                yield (
                    path,
                    "cannot go with keep_data (not yet: the kept file system is sized against the raw disk)",
                )


def _drills_on_points(profile: Profile) -> Iterator[Violation]:
    """A drill's copy is a thin snapshot of one of the leg's own points (docs/drill.md)."""
    for m, mirror in enumerate(profile.mirrors):
        for r, replica in enumerate(mirror.replicas):
            if replica.drill is not None and replica.points is None:
                yield (
                    ("mirrors", m, "replicas", r, "drill"),
                    "needs points on the same leg: a drill starts from a copy of one of them",
                )


def format_path(path: Path) -> str:
    """Render a key path the way the operator reads it: `mirrors[0].replication`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _portals_are_addresses(profile: Profile) -> Iterator[Violation]:
    """A portal LIO listens on is an IP address: LIO binds no host name, and the primary's
    sessions and /dev/disk/by-path name the address they reached. Through a WireGuard tunnel
    the target listens on its tunnel address, and the portal's host only says where the
    tunnel's endpoint is, which a name may."""
    for m, mirror in enumerate(profile.mirrors):
        legs: list[tuple[Path, Portal | None]] = [
            (("mirrors", m, "replicas", r, "portal"), replica.portal_address)
            for r, replica in enumerate(mirror.replicas)
        ]
        legs.append((("mirrors", m, "primary", "portal"), mirror.primary.portal_address))
        for path, portal in legs if mirror.transport == "plain" else []:
            if portal is not None and _ip(portal.address) is None:
                yield (
                    path,
                    (
                        f"{portal}: a portal is an IP address, not a host name (the site's target listens"
                        " on it, and the primary's sessions name it); write the address the primary"
                        " reaches the site on, or use `transport: wireguard`, whose endpoint may be a name"
                    ),
                )
        if mirror.export is not None and _ip(mirror.export.portal_address.address) is None:
            yield (
                ("mirrors", m, "export", "portal"),
                (f"{mirror.export.portal}: the export listens on an IP address, not a host name"),
            )


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address `text` is, or None for a host name."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def cautions(profile: Profile) -> list[Violation]:
    """What a valid profile leaves open to others on the network: shown by `validate` and
    `plan` as warnings, not refused (a lab, or a link that is private already)."""
    found: list[Violation] = []
    for m, mirror in enumerate(profile.mirrors):
        if mirror.iscsi.chap == "none":
            found.append(
                (
                    ("mirrors", m, "iscsi", "chap"),
                    "none: any host that reaches the replica's portal and sends the primary's"
                    " initiator name (not a secret) can read and write the replica (leave `chap`"
                    " out and apply generates secrets)",
                )
            )
        for r, replica in enumerate(mirror.replicas):
            if mirror.transport == "plain" and _is_public(replica.portal_address.address):
                found.append(
                    (
                        ("mirrors", m, "replicas", r, "portal"),
                        f"{replica.portal_address.address} is a public address: iSCSI carries the"
                        " mirror's data across it in clear text (CHAP authenticates, it does not"
                        " encrypt); keep the sites on a VPN or a private link",
                    )
                )
        if mirror.export is not None and _is_any(mirror.export.portal_address.address):
            found.append(
                (
                    ("mirrors", m, "export", "portal"),
                    "the export listens on every address of the site: name the one the application hosts use",
                )
            )
    return found


def _is_public(address: str) -> bool:
    """Whether an address is reachable from the internet (a host name: cannot tell, no)."""
    ip = _ip(address)
    return ip is not None and ip.is_global


def _is_any(address: str) -> bool:
    ip = _ip(address)
    return ip is not None and ip.is_unspecified
