"""`remirror lab demo`: a narrated tour of remirror on the lab, for a newcomer.

It does as much as remirror can do today and says plainly what is not there
yet; each capability, as it lands, adds its step here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from remirror.lab import net
from remirror.lab.spec import LAB_FILE, Wan
from remirror.profile import load_profile
from remirror.runner.local import LocalRunner

PROFILE = "profiles/lab.yaml"

_run = LocalRunner("site-a").run


class Timeline:
    """Prints each step with the seconds since the tour began."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.started = time.monotonic()
        self.say = say

    def __call__(self, message: str) -> None:
        self.say(f"[{time.monotonic() - self.started:6.1f}s] {message}")


def tour(say: Callable[[str], None]) -> int:
    """Run the tour; return 0 when every step that exists worked."""
    net.require_lab()
    step = Timeline(say)
    step(f"the lab: site A is this VM's root namespace, site B is namespace site-b ({LAB_FILE})")
    profile = load_profile(PROFILE)
    mirror = profile.mirrors[0]
    step(
        f"validated {PROFILE}: mirror {mirror.name} from {mirror.primary.site}:{mirror.primary.disk}"
        f" to {mirror.replicas[0].site}:{mirror.replicas[0].disk} ({mirror.replication.mode})"
    )
    hostname, version = _run(["ssh", "root@site-b", "hostname && remirror --version"]).stdout.splitlines()
    step(f"ssh root@site-b answers as {hostname!r}, where {version} runs too")
    step(f"link round trip site A -> site B: {net.round_trip_ms():.2f} ms")
    wan = Wan(delay="7ms")
    net.apply_wan(wan)
    step(f"emulated WAN (netem delay 7ms each way): round trip {net.round_trip_ms():.1f} ms")
    net.clear_wan()
    step("not yet: `remirror apply` (issue #4) builds the mirror; then this tour writes data,")
    step("         cuts the link, shows the status, restores it and compares both legs")
    net.set_link(False)
    step(f"link cut: site B reachable? {net.site_b_reachable()}")
    net.set_link(True)
    step(f"link restored: site B reachable? {net.wait_until_reachable()}")
    step("done: the lab works; the mirror steps arrive with apply")
    return 0
