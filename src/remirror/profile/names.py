"""Names remirror gives what it makes, derived from the profile so that any controller derives the same.

The array UUID is uuid5 of the profile's and the mirror's names: known
before the array exists, so a plan can name it and adopt it. The replica
target IQN is `Profile.replica_iqn`; `transport: wireguard`'s names are in
`remirror.profile.wireguard`.
"""

from __future__ import annotations

import uuid
from collections.abc import Container

from remirror.facts.cdp import LEG_POINTS_SEPARATOR, stack_names
from remirror.profile.model import Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.types import Portal
from remirror.profile.wireguard import replica_portal

# Fixed forever: changing it would change every derived array UUID.
_UUID_NAMESPACE = uuid.UUID("6f1d3c2e-2b1a-4d6e-9a57-72656d697272")


def array_uuid(profile: Profile, mirror: Mirror) -> str:
    """The md array UUID in mdadm's colon form, derived from the names."""
    raw = uuid.uuid5(_UUID_NAMESPACE, f"{profile.name}/{mirror.name}").hex
    return ":".join(raw[i : i + 8] for i in range(0, 32, 8))


def backstore_name(mirror: Mirror, replica: PrimaryLeg | ReplicaLeg) -> str:
    """The LIO backstore exporting a replica disk (a primary leg's, once a promotion makes it one)."""
    return f"{mirror.name}-{replica.site}"


def export_backstore_name(mirror: Mirror) -> str:
    """The LIO backstore serving the mirror device itself (`export`)."""
    return f"{mirror.name}-export"


def by_path(portal: Portal, iqn: str) -> str:
    """The udev link of LUN 0 of target `iqn`, logged in to at `portal`."""
    return f"/dev/disk/by-path/ip-{portal.address}:{portal.port}-iscsi-{iqn}-lun-0"


def replica_path(profile: Profile, mirror: Mirror, replica: ReplicaLeg) -> str:
    """The udev link of the replica's LUN 0 on the primary: what md has as the replica leg."""
    return by_path(replica_portal(profile, mirror, replica), profile.replica_iqn(mirror, replica))


def cache_name(mirror: Mirror, site: str) -> str:
    """The device-mapper device in front of a leg's disk (`/dev/mapper/NAME`)."""
    return f"remirror-{mirror.name}-{site}"


def points_key(mirror: Mirror, site: str) -> str:
    """What names a leg's own points (its CDP index, its devices `remirror-KEY-cdp*`): never a
    mirror's name (those have no dot), so no request about a mirror's CDP reaches them."""
    return f"{mirror.name}{LEG_POINTS_SEPARATOR}{site}"


def points_volume(mirror: Mirror, site: str) -> str:
    """The thin volume over a leg's own points: what md or LIO opens for that leg."""
    return f"/dev/mapper/{stack_names(points_key(mirror, site))['volume']}"


def leg_device(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, dm_devices: Container[str] = ()) -> str:
    """What the leg's user opens (md on the primary, LIO on a replica): the volume over its own
    points, its cache device, else its disk.

    `dm_devices`: the dm names that exist on the leg's site. A cache dropped
    from the profile leaves its device behind as a linear mapping (its user
    keeps it open), so the leg is still used through it.
    """
    if leg.points is not None:
        return points_volume(mirror, leg.site)
    name = cache_name(mirror, leg.site)
    return f"/dev/mapper/{name}" if leg.cache is not None or name in dm_devices else leg.disk
