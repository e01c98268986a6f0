"""`transport: wireguard`: the tunnel a profile's sites share, derived from the names. Pure.

Each site has one WireGuard interface for the profile, with a peer for each
other site it shares a wireguard mirror with: both ways, so that a promotion
(docs/failover.md) finds the tunnel already there. Its address, interface
name and UDP port derive from the profile's name and the site's place in
`sites`, so that every controller derives the same, and two profiles on one
host get different ones:

- address: 169.254.B.N/24, B from a digest of the profile's name (never
  169: 169.254.169.254 is where clouds answer for instance metadata), N the
  site's place in `sites`, from 1. Link-local: never routed beyond the link,
  so it cannot clash with a site's own networks;
- port: 51821 to 52820, from the same digest (docs/transport.md: open it
  between the sites);
- interface: `rmwg-NAME` (`rmwg-` and a digest when the name is too long for
  Linux's 15 characters).

iSCSI then goes to the replica's tunnel address on its portal's port, and
the replica's target listens there only; WireGuard's own packets go to the
address the profile gives for the site (a replica's `portal`, a primary's
`portal` if it has one): the endpoint.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR
from remirror.profile.model import Mirror, Profile, ReplicaLeg
from remirror.profile.types import Portal

# Sent by the side that knows the other's endpoint, so that a NAT or stateful firewall on the
# way keeps the tunnel open while the mirror is idle (wg(8)'s suggested interval).
KEEPALIVE_SECONDS = 25
PREFIX = 24
FIRST_PORT = 51821
PORTS = 1000
_LINUX_IFNAMSIZ = 15
_BLOCKS = [b for b in range(1, 255) if b != 169]


@dataclass(frozen=True)
class Peer:
    """Another site at the far end of the tunnel."""

    site: str
    address: str  # its tunnel address: what it allows in from this peer
    endpoint: str | None  # "ADDRESS:PORT" its WireGuard listens on, when the profile says where it is


@dataclass(frozen=True)
class TunnelEnd:
    """One site's side of the profile's tunnel."""

    site: str
    interface: str
    address: str
    port: int
    peers: tuple[Peer, ...]

    @property
    def key_file(self) -> str:
        """The site's private key."""
        return f"{KEY_DIR}/{self.interface}.key"

    @property
    def cidr(self) -> str:
        """The address with the tunnel's prefix, as `ip address` takes it."""
        return f"{self.address}/{PREFIX}"


def _digest(profile: Profile) -> int:
    return int.from_bytes(hashlib.sha256(profile.name.encode()).digest()[:8], "big")


def interface_name(profile: Profile) -> str:
    """The WireGuard interface of the profile, on every site."""
    name = f"{INTERFACE_PREFIX}{profile.name}"
    if len(name) <= _LINUX_IFNAMSIZ:
        return name
    return f"{INTERFACE_PREFIX}{_digest(profile):016x}"[:_LINUX_IFNAMSIZ]


def tunnel_port(profile: Profile) -> int:
    """The UDP port WireGuard listens on, on every site."""
    return FIRST_PORT + (_digest(profile) // len(_BLOCKS)) % PORTS


def tunnel_address(profile: Profile, site: str) -> str:
    """The site's address inside the tunnel."""
    block = _BLOCKS[_digest(profile) % len(_BLOCKS)]
    return f"169.254.{block}.{list(profile.sites).index(site) + 1}"


def replica_portal(profile: Profile, mirror: Mirror, replica: ReplicaLeg) -> Portal:
    """Where the primary's iSCSI reaches the replica's target, and where the target listens: its
    portal, or with `transport: wireguard` its tunnel address on the portal's port."""
    portal = replica.portal_address
    if mirror.transport != "wireguard":
        return portal
    return Portal(tunnel_address(profile, replica.site), portal.port)


def tunnel_ends(profile: Profile) -> dict[str, TunnelEnd]:
    """Each site's side of the tunnel, for the sites that share a wireguard mirror."""
    peers: dict[str, set[str]] = {}
    for mirror in profile.mirrors:
        if mirror.transport == "wireguard":
            for site in mirror.sites:
                peers.setdefault(site, set()).update(s for s in mirror.sites if s != site)
    port = tunnel_port(profile)
    ends = {}
    for site in (s for s in profile.sites if s in peers):  # profile order
        ends[site] = TunnelEnd(
            site=site,
            interface=interface_name(profile),
            address=tunnel_address(profile, site),
            port=port,
            peers=tuple(
                Peer(other, tunnel_address(profile, other), _endpoint(profile, other, port))
                for other in profile.sites
                if other in peers[site]
            ),
        )
    return ends


def _endpoint(profile: Profile, site: str, port: int) -> str | None:
    """Where the site's WireGuard is reached: the address of a portal the profile gives it."""
    for mirror in profile.mirrors:
        for leg in mirror.legs:
            if leg.site == site and leg.portal is not None:
                address = Portal.parse(leg.portal).address
                return str(Portal(address, port))
    return None
