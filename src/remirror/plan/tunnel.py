"""Plan `transport: wireguard`'s tunnel (remirror.profile.wireguard): keys, then each site's end. Pure.

Each site makes its own private key (MakeTunnelKey); its public key, which
the other sites' ends need, exists only once the key does. So a plan with a
key still to make cannot set the tunnel up yet, nor what goes through it:
it makes the keys and leaves the rest `pending`, which apply plans and
carries out next, once the keys are observed (remirror.cli.mirror).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from remirror.facts.site import SiteFacts
from remirror.facts.wireguard import WireguardInterface
from remirror.plan.actions import CHANGE, CREATE, Action, PlanError, Verb
from remirror.profile.model import Profile
from remirror.profile.wireguard import KEEPALIVE_SECONDS, TunnelEnd, tunnel_ends
from remirror.protocol.steps import WireguardKey, WireguardPeer, WireguardTunnel

PENDING = "the WireGuard tunnel and the mirrors that use it: planned once every site has its key"


def tunnel_actions(profile: Profile, facts: Mapping[str, SiteFacts]) -> tuple[list[Action], str]:
    """The actions that make each site's end of the tunnel match the profile, and what waits for
    the keys they make ("" when nothing does)."""
    ends = tunnel_ends(profile)
    keys: dict[str, str] = {}
    interfaces: dict[str, WireguardInterface | None] = {}
    make = []
    for site, end in ends.items():
        wireguard = facts[site].wireguard
        if wireguard is None:
            raise PlanError(f"site {site}: transport: wireguard needs wg(8) there: install wireguard-tools")
        interfaces[site] = wireguard.interfaces.get(end.interface)
        if end.interface in wireguard.keys:
            keys[site] = wireguard.keys[end.interface]
        else:
            make.append(
                Action(
                    site,
                    Verb.MAKE_TUNNEL_KEY,
                    f"{end.key_file} (made on {site}: the private key never leaves it)",
                    CREATE,
                    (WireguardKey(end.key_file),),
                )
            )
    if make:
        return make, PENDING
    actions = []
    for site, end in ends.items():
        step = _tunnel_step(end, keys)
        current = interfaces[site]
        if current is not None and _matches(current, step, keys[site]):
            continue
        peers = ", ".join(f"{p.site} {p.address}" for p in end.peers)
        actions.append(
            Action(
                site,
                Verb.SET_TUNNEL,
                f"{end.interface} {end.cidr}, UDP port {end.port}, peers {peers}",
                CREATE if current is None else CHANGE,
                (step,),
                repair=True,  # gone after a reboot: the reconciler sets it up again
            )
        )
    return actions, ""


def _tunnel_step(end: TunnelEnd, keys: Mapping[str, str]) -> WireguardTunnel:
    return WireguardTunnel(
        interface=end.interface,
        key_file=end.key_file,
        port=end.port,
        address=end.cidr,
        peers=tuple(WireguardPeer(keys[p.site], p.address, p.endpoint) for p in end.peers),
        keepalive=KEEPALIVE_SECONDS,
    )


def _matches(current: WireguardInterface, step: WireguardTunnel, public_key: str) -> bool:
    """Whether the interface is what the step would make it."""
    if not (
        current.up
        and current.public_key == public_key
        and current.listen_port == step.port
        and step.address in current.addresses
        and set(current.peers) == {p.public_key for p in step.peers}
    ):
        return False
    for wanted in step.peers:
        peer = current.peers[wanted.public_key]
        if peer.allowed_ips != (f"{wanted.address}/32",):
            return False
        # A host name is resolved when set: the kernel shows its address, never the name.
        if (
            wanted.endpoint is not None
            and _is_address(wanted.endpoint)
            and (peer.endpoint != wanted.endpoint or peer.keepalive != KEEPALIVE_SECONDS)
        ):
            return False
    return True


def _is_address(endpoint: str) -> bool:
    host = endpoint.rpartition(":")[0].strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
