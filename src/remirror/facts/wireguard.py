"""A site's WireGuard as `wg show IFACE dump` and `ip -j address` print it. Pure.

The agent (remirror.agent.wireguard) blanks the private key out of the dump
before it leaves the site; only public keys are parsed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from remirror.facts.parsers import ParseError

# Where each site keeps its private keys (0600, in a 0700 directory), one per interface, and
# what remirror's interfaces are called: read by the agent, named by remirror.profile.wireguard.
KEY_DIR = "/etc/remirror/wireguard"
INTERFACE_PREFIX = "rmwg-"


@dataclass(frozen=True)
class WireguardPeer:
    """A peer as the kernel has it."""

    public_key: str
    endpoint: str | None
    allowed_ips: tuple[str, ...]
    latest_handshake: int  # seconds since the epoch; 0: never
    keepalive: int | None


@dataclass(frozen=True)
class WireguardInterface:
    """One of remirror's WireGuard interfaces."""

    public_key: str
    listen_port: int
    peers: dict[str, WireguardPeer] = field(hash=False)  # by public key
    addresses: tuple[str, ...]  # "ADDRESS/PREFIX"
    up: bool


@dataclass(frozen=True)
class WireguardFacts:
    """The public keys of the site's tunnel keys (by interface) and its interfaces (by name)."""

    keys: dict[str, str] = field(hash=False)
    interfaces: dict[str, WireguardInterface] = field(hash=False)


def _none(value: str) -> str | None:
    return None if value == "(none)" else value


def parse_wg_dump(dump: str, addresses: str, up: bool) -> WireguardInterface:
    """`wg show IFACE dump` (wg(8): the interface's line, then a line per peer, tab-separated)
    and `ip -j address show dev IFACE`."""
    lines = [line.split("\t") for line in dump.splitlines() if line.strip()]
    if not lines or len(lines[0]) != 4 or any(len(line) != 8 for line in lines[1:]):
        raise ParseError(f"not a `wg show dump`: {dump[:80]!r}")
    _, public_key, port, _ = lines[0]
    peers = {
        key: WireguardPeer(
            public_key=key,
            endpoint=_none(endpoint),
            allowed_ips=tuple(a for a in allowed.split(",") if a and a != "(none)"),
            latest_handshake=int(handshake),
            keepalive=None if keepalive == "off" else int(keepalive),
        )
        for key, _, endpoint, allowed, handshake, _, _, keepalive in lines[1:]
    }
    try:
        links = json.loads(addresses or "[]")
    except json.JSONDecodeError as error:
        raise ParseError(f"not `ip -j address` output: {error}") from None
    cidrs = tuple(
        f"{info['local']}/{info['prefixlen']}" for link in links for info in link.get("addr_info", [])
    )
    return WireguardInterface(_none(public_key) or "", int(port), peers, cidrs, up)


def wireguard_facts(raw: dict[str, Any] | None) -> WireguardFacts | None:
    """What the agent gathered; None when the site has no wg(8)."""
    if raw is None:
        return None
    interfaces = {}
    for name, info in raw.get("interfaces", {}).items():
        try:
            interfaces[name] = parse_wg_dump(info["dump"], info.get("addresses", ""), bool(info.get("up")))
        except ParseError:
            continue  # not remirror's to read: planned as missing, and set up again
    return WireguardFacts(dict(raw.get("keys", {})), interfaces)
