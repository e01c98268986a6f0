"""The profile layer: what the operator wants, loaded and checked. Pure: no side effects."""

from remirror.profile.layers import Cache, Cdp
from remirror.profile.loader import cautions, load_profile, parse_profile
from remirror.profile.model import (
    Chap,
    Export,
    Iscsi,
    Mirror,
    PrimaryLeg,
    Profile,
    ReplicaLeg,
    Replication,
    Site,
    SshOptions,
)

__all__ = [
    "Cache",
    "Cdp",
    "Chap",
    "Export",
    "Iscsi",
    "Mirror",
    "PrimaryLeg",
    "Profile",
    "ReplicaLeg",
    "Replication",
    "Site",
    "SshOptions",
    "cautions",
    "load_profile",
    "parse_profile",
]
