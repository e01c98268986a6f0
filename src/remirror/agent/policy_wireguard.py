"""The DR site's wall around its WireGuard tunnels (remirror.agent.policy): a key only in
remirror's key directory, under its interface's name; a tunnel exactly as the site's own profiles
make it (its address and prefix, port, keepalive, peers' tunnel addresses and endpoints). Only
the peers' public keys come from elsewhere: each site makes its own key.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from remirror.agent.policy import Checker, Refused
from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR
from remirror.protocol.steps import WireguardKey, WireguardTunnel


def wireguard(check: Checker, step: WireguardKey | WireguardTunnel) -> None:
    if isinstance(step, WireguardKey):
        interface, key = Path(step.path).stem, step.path
    else:
        interface, key = step.interface, step.key_file
    if check.scope is not None and interface not in check.scope.interfaces:
        raise Refused(f"WireGuard interface {interface!r} is not one this site's profiles name")
    if not interface.startswith(INTERFACE_PREFIX) or key != f"{KEY_DIR}/{interface}.key":
        raise Refused(f"WireGuard {interface!r} with key {key!r}: not remirror's")


_PUBLIC_KEY = re.compile(r"[A-Za-z0-9+/]{43}=")


def wireguard_tunnel(check: Checker, step: WireguardTunnel) -> None:
    """This site's end of a tunnel, exactly as its own profiles make it: its address and prefix,
    port, keepalive, and its peers' tunnel addresses and endpoints (an address of `X/0` would
    route the host's traffic into the tunnel). Only the peers' public keys come from elsewhere
    (each site makes its own key): each must be one."""
    wireguard(check, step)
    peers = step.peers
    for peer in peers:
        if not _PUBLIC_KEY.fullmatch(peer.public_key):
            raise Refused(f"wireguard_tunnel: {peer.public_key[:60]!r} is not a WireGuard public key")
    found = (step.address, step.port, step.keepalive, frozenset((p.address, p.endpoint) for p in peers))
    if check.scope is not None:
        if found not in check.scope.tunnels.get(step.interface, frozenset()) or len(peers) != len(found[3]):
            raise Refused(
                f"wireguard_tunnel {step.interface}: not the tunnel {check._sources()} make here"
                f" ({step.address[:60]}, port {step.port}, peers {sorted(map(str, found[3]))[:4]})"
            )
        return
    # A site without profiles: remirror's shapes only (a link-local /24, peers' /32s in it).
    try:
        network = ipaddress.ip_interface(step.address).network
        inside = all(ipaddress.ip_address(p.address) in network for p in peers)
    except ValueError:
        network, inside = None, False
    if network is None or network.prefixlen != 24 or not network.is_link_local or not inside:
        raise Refused(
            f"wireguard_tunnel: {step.address[:60]!r} and its peers are not a tunnel remirror makes"
        )
