"""What a remirror service tells systemd (Type=notify, with a watchdog): `watch`, `destage`, `cdp run`.

The protocol is sd_notify(3)'s datagram on $NOTIFY_SOCKET; outside systemd
there is no socket and nothing is sent.
"""

from __future__ import annotations

import os
import socket


def notify(state: str) -> None:
    """Tell systemd (Type=notify) about this service; nothing outside systemd."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):  # an abstract socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(state.encode(), address)


def watchdog_period() -> float | None:
    """How often systemd wants WATCHDOG=1 (half its WatchdogSec), if it wants it."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    return int(usec) / 2e6 if usec.isdigit() else None
