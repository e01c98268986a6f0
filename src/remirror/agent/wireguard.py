"""`transport: wireguard` on this site: its key and its end of the tunnel, with `ip` and `wg`.

The private key is made here (`wg genkey`) and never leaves: not in a
step, a fact, a log line or an argv. `wg` reads it from its file
(`private-key FILE`); what is reported is the public key and the
interface's state, with the private key blanked out of `wg show dump`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.facts.wireguard import INTERFACE_PREFIX, KEY_DIR
from remirror.files import write_private_once
from remirror.runner.local import LocalRunner

if TYPE_CHECKING:  # the agent imports the catalogue where it decodes a step
    from remirror.protocol.steps import WireguardKey, WireguardTunnel

_run = LocalRunner("agent").run


def observe() -> dict[str, Any] | None:
    """The public key of each key in KEY_DIR (by interface) and each of remirror's interfaces
    (their `wg show dump`, addresses, up or down); None when wg(8) is not installed."""
    if shutil.which("wg") is None:
        return None
    keys = {}
    for key in sorted(Path(KEY_DIR).glob(f"{INTERFACE_PREFIX}*.key")):
        private = key.read_text().strip()
        keys[key.stem] = _run(["wg", "pubkey"], stdin=private + "\n", secrets=[private]).stdout.strip()
    interfaces = {}
    for name, up in _interfaces().items():
        dump = _run(["wg", "show", name, "dump"]).stdout
        head, _, peers = dump.partition("\n")
        fields = head.split("\t")
        fields[0] = "(hidden)"  # the private key: it stays on this host
        interfaces[name] = {
            "dump": "\t".join(fields) + "\n" + peers,
            "addresses": _run(["ip", "-j", "address", "show", "dev", name]).stdout,
            "up": up,
        }
    return {"keys": keys, "interfaces": interfaces}


def _interfaces() -> dict[str, bool]:
    """remirror's WireGuard interfaces in this network namespace, and whether each is up. Asked
    of the kernel over netlink (`ip`): /sys/class/net shows the namespace /sys was mounted in."""
    links = json.loads(_run(["ip", "-j", "link", "show", "type", "wireguard"]).stdout or "[]")
    return {
        link["ifname"]: "UP" in link.get("flags", [])
        for link in links
        if link["ifname"].startswith(INTERFACE_PREFIX)
    }


def make_key_step(step: WireguardKey) -> None:
    """A private key in `path` (0600, in a 0700 directory), unless one is there already: a key
    that exists is the one its peers know."""
    write_private_once(step.path, lambda: _run(["wg", "genkey"]).stdout.strip() + "\n")


def tunnel_step(step: WireguardTunnel) -> None:
    """This site's end of the tunnel as the step says: the interface (made if missing), its key
    and port, exactly the peers named (others removed), its address, up."""
    name = step.interface
    if name not in _interfaces():
        _run(["ip", "link", "add", "dev", name, "type", "wireguard"])
    _run(["wg", "set", name, "listen-port", str(step.port), "private-key", step.key_file])
    wanted = {peer.public_key for peer in step.peers}
    for old in _run(["wg", "show", name, "peers"]).stdout.split():
        if old not in wanted:
            _run(["wg", "set", name, "peer", old, "remove"])
    for peer in step.peers:
        argv = ["wg", "set", name, "peer", peer.public_key, "allowed-ips", f"{peer.address}/32"]
        if peer.endpoint:
            argv += ["endpoint", peer.endpoint, "persistent-keepalive", str(step.keepalive)]
        _run(argv)
    _run(["ip", "address", "replace", step.address, "dev", name])
    _run(["ip", "link", "set", "dev", name, "up"])
