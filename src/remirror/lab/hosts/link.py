"""Inside a host of the hosts' lab: cut and shape its links to the other hosts, as `remirror lab
link` and `lab wan` do between the single-VM lab's sites (remirror.lab.net).

A host learns its links from its kernel command line (`lab.link=MAC,ADDRESS/PREFIX` for each of
its NICs on a link, `lab.peer=NAME,ADDRESS` for each other host: remirror.lab.hosts.machine),
so a link is found by its NIC's MAC and a peer by the subnet its address is on.

A cut, made at one end, drops everything that crosses the link both ways (tc filters on the
NIC's clsact qdisc, at its ingress and its egress): the link goes silent, as a WAN does when a
router between the sites fails, while the carrier stays up at both hosts. (The link's other
failure, a host losing power, is the test runner's: Host.power_cut.) A WAN, set at one end,
shapes both directions there: netem at the NIC's egress, and at an IFB device its ingress is
redirected through, so a round trip grows by twice the delay, as in the single-VM lab.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from remirror.errors import RemirrorError
from remirror.lab.spec import Wan
from remirror.runner.local import LocalRunner

CMDLINE = Path("/proc/cmdline")
NET = Path("/sys/class/net")
# Filter priorities on a NIC's clsact qdisc: the cut's drops first, then the WAN's redirect.
CUT, SHAPE = "1", "2"

_run = LocalRunner("lab").run


@dataclass(frozen=True)
class Link:
    """One of this host's links: its NIC and the hosts at its other end."""

    nic: str
    peers: tuple[str, ...]

    @property
    def ifb(self) -> str:
        """The IFB device the link's ingress is shaped through (an interface name: 15 bytes)."""
        return f"ifb-{self.nic}"[:15]


def in_hosts_lab(cmdline: str | None = None) -> bool:
    """Whether this machine is a host of the hosts' lab (its kernel command line names it)."""
    words = (cmdline if cmdline is not None else _cmdline()).split()
    return any(word.startswith("lab.name=") for word in words)


def links(cmdline: str, nics: dict[str, str]) -> list[Link]:
    """This host's links, from its kernel command line and `nics` (MAC to interface name)."""
    networks: list[tuple[str, ipaddress.IPv4Network]] = []
    peers: list[tuple[str, ipaddress.IPv4Address]] = []
    for word in cmdline.split():
        key, _, value = word.partition("=")
        first, _, second = value.partition(",")
        if key == "lab.link":
            nic = nics.get(first.lower())
            if nic is None:
                raise RemirrorError(f"lab: no network interface has the MAC of lab.link={value}")
            networks.append((nic, ipaddress.IPv4Interface(second).network))
        elif key == "lab.peer":
            peers.append((first, ipaddress.IPv4Address(second)))
    return [
        Link(nic, tuple(name for name, address in peers if address in network)) for nic, network in networks
    ]


def my_links(to: str | None) -> list[Link]:
    """This host's links (the one to host `to`, if named); refused outside the hosts' lab."""
    cmdline = _cmdline()
    if not in_hosts_lab(cmdline):
        raise RemirrorError("lab: not a host of the hosts' lab (its kernel command line names none)")
    nics = {(path / "address").read_text().strip().lower(): path.name for path in NET.iterdir()}
    found = [link for link in links(cmdline, nics) if to is None or to in link.peers]
    if not found:
        raise RemirrorError(f"lab: no link of this host reaches {to}")
    return found


def set_link(up: bool, to: str | None = None) -> None:
    """Let everything cross this host's links again, or nothing (`to`: that host's link only)."""
    for link in my_links(to):
        for direction in ("ingress", "egress"):
            # Exit 2: there was no such filter (the link was not cut), which is what up wants.
            _run(["tc", "filter", "del", "dev", link.nic, direction, "prio", CUT], ok_codes=(0, 2))
            if not up:
                _clsact(link.nic)
                _run(["tc", "filter", "add", "dev", link.nic, direction, "prio", CUT, "matchall",
                      "action", "drop"])  # fmt: skip


def apply_wan(wan: Wan, to: str | None = None) -> list[str]:
    """Emulate `wan` on both directions of this host's links (`to`: that host's only); the
    netem arguments, as remirror.lab.net.apply_wan gives them."""
    args = wan.netem_args()
    for link in my_links(to):
        _run(["tc", "qdisc", "replace", "dev", link.nic, "root", "netem", *args])
        if not (NET / link.ifb).exists():
            _run(["ip", "link", "add", link.ifb, "type", "ifb"])
        _run(["ip", "link", "set", link.ifb, "up"])
        _run(["tc", "qdisc", "replace", "dev", link.ifb, "root", "netem", *args])
        _clsact(link.nic)
        _run(["tc", "filter", "del", "dev", link.nic, "ingress", "prio", SHAPE], ok_codes=(0, 2))
        _run(["tc", "filter", "add", "dev", link.nic, "ingress", "prio", SHAPE, "matchall",
              "action", "mirred", "egress", "redirect", "dev", link.ifb])  # fmt: skip
    return args


def clear_wan(to: str | None = None) -> None:
    """Back to the plain link (a cut stays as it is)."""
    for link in my_links(to):
        _run(["tc", "filter", "del", "dev", link.nic, "ingress", "prio", SHAPE], ok_codes=(0, 2))
        _run(["tc", "qdisc", "del", "dev", link.nic, "root"], ok_codes=(0, 2))
        if (NET / link.ifb).exists():
            _run(["ip", "link", "del", link.ifb])


def _clsact(nic: str) -> None:
    """The qdisc whose filters see a NIC's ingress and egress (made once, kept)."""
    shown = _run(["tc", "qdisc", "show", "dev", nic]).stdout
    if "clsact" not in shown:
        _run(["tc", "qdisc", "add", "dev", nic, "clsact"])


def _cmdline() -> str:
    return CMDLINE.read_text() if CMDLINE.exists() else ""
