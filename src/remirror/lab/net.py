"""Control the lab's link between the sites, from site A inside the VM."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from remirror.errors import RemirrorError
from remirror.lab.model import LAN
from remirror.lab.spec import LAB_FILE, SITE_A_ADDRESS, SITE_B_ADDRESS, SITE_B_ANCHOR_PID, VETH_A, VETH_B, Wan
from remirror.runner.local import LocalRunner

_run = LocalRunner("lab").run


def require_lab() -> None:
    """Refuse to touch interfaces outside a lab VM."""
    if not Path(LAB_FILE).exists():
        raise RemirrorError(
            f"not inside a remirror lab ({LAB_FILE} is missing):"
            " use `remirror lab run` or `remirror lab shell`"
        )


def in_site_b(argv: list[str]) -> list[str]:
    """argv wrapped to run in site B's network, mount and UTS namespaces."""
    pid = Path(SITE_B_ANCHOR_PID).read_text().strip()
    return ["nsenter", "-t", pid, "--net", "--mount", "--uts", "--", *argv]


def set_link(up: bool) -> None:
    """Bring the veth link between the sites up or down, on both ends.

    Site B's own iSCSI sessions (after a promotion it logs in to site A's
    leg) go through the lab's one iscsid, in site A's namespace, to site A's
    address: over loopback, not the veth. So a cut also drops iSCSI traffic
    to site A's portal on loopback (remirror.lab.guest, _site_b_iscsiadm).
    """
    require_lab()
    state = "up" if up else "down"
    _run(["ip", "link", "set", VETH_A, state])
    _run(in_site_b(["ip", "link", "set", VETH_B, state]))
    if up:
        _run(["tc", "qdisc", "del", "dev", "lo", "root"], ok_codes=(0, 2))
        return
    _run(["tc", "qdisc", "replace", "dev", "lo", "root", "handle", "1:", "prio"])
    for direction in ("dport", "sport"):
        match = ["match", "ip", "dst", f"{SITE_A_ADDRESS}/32", "match", "ip", direction, "3260", "0xffff"]
        _run(
            [
                "tc",
                "filter",
                "add",
                "dev",
                "lo",
                "parent",
                "1:",
                "protocol",
                "ip",
                "u32",
                *match,
                "action",
                "drop",
            ]
        )


def performance() -> dict[str, Any] | None:
    """The lab's performance model and its dilation (lab.json), or None for a plain lab."""
    model: dict[str, Any] | None = json.loads(Path(LAB_FILE).read_text()).get("performance")
    return model


def dilation() -> float | None:
    """The lab's time dilation when it models hardware, else None."""
    model = performance()
    return float(model["dilation"]["factor"]) if model else None


def apply_wan(wan: Wan) -> list[str]:
    """Emulate a WAN in both directions (netem shapes egress, so both ends get it); the netem
    arguments. In a lab that models hardware, `wan` is the physical link: its delays are
    dilated and its rate (the modelled LAN's if it names none) scaled down with the lab."""
    require_lab()
    factor = dilation()
    args = wan.netem_args() if factor is None else wan.dilated_netem_args(factor, LAN.rate_bit_s)
    _netem(args)
    return args


def apply_lan() -> None:
    """The modelled LAN between the sites (a lab that models hardware)."""
    factor = dilation()
    if factor is None:
        raise RemirrorError("lab: this lab models no hardware (remirror lab run --disk-model)")
    _netem(LAN.netem(factor))


def clear_wan() -> None:
    """Back to the plain link: the modelled LAN, or the bare veth."""
    require_lab()
    if dilation() is not None:
        apply_lan()
        return
    # Exit 2: there was no netem qdisc to delete, which is what we want anyway.
    _run(["tc", "qdisc", "del", "dev", VETH_A, "root"], ok_codes=(0, 2))
    _run(in_site_b(["tc", "qdisc", "del", "dev", VETH_B, "root"]), ok_codes=(0, 2))


def _netem(args: list[str]) -> None:
    _run(["tc", "qdisc", "replace", "dev", VETH_A, "root", "netem", *args])
    _run(in_site_b(["tc", "qdisc", "replace", "dev", VETH_B, "root", "netem", *args]))


def round_trip_ms(count: int = 5) -> float:
    """Average ping round trip from site A to site B in milliseconds (inf if none came back)."""
    argv = ["ping", "-n", "-q", "-c", str(count), "-i", "0.2", "-W", "2", SITE_B_ADDRESS]
    done = _run(argv, ok_codes=(0, 1))
    match = re.search(r"= [\d.]+/([\d.]+)/", done.stdout)
    return float(match.group(1)) if match else float("inf")


def site_b_reachable() -> bool:
    """Whether one ping reaches site B within a second."""
    return _run(["ping", "-n", "-q", "-c", "1", "-W", "1", SITE_B_ADDRESS], ok_codes=(0, 1, 2)).ok


def wait_until_reachable(timeout: float = 15.0) -> bool:
    """Wait for site B to answer again (after link up); False if it did not in time."""
    deadline = time.monotonic() + timeout
    while not site_b_reachable():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True
