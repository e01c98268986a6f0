"""The CDP daemon: a recovery point at least every `cdp.every`, pruning after each.

Runs on the mirror's primary host (contrib/systemd/remirror-cdp@.service):
a point is a few dmsetup calls on the local kernel and must not wait on a
WAN. On a replica site, the same service keeps the points of the site's own
leg (`replicas[].points`), which no other site can reach (docs/security.md).
Each tick is the agent's `point_and_prune`, the same as `remirror cdp
point`: the decisions are remirror.retention's, the device work remirror.agent.cdp's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from remirror.agent import cdp as local
from remirror.agent import own_points
from remirror.agent.cdp_requests import point_and_prune
from remirror.agent.hooks import Hooks
from remirror.errors import RemirrorError
from remirror.facts.cdp import is_leg_points
from remirror.profile.layers import Cdp
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import points_key
from remirror.systemd import notify, watchdog_period

TICK_LOCK_WAIT = 5.0


@dataclass(frozen=True)
class Protected:
    """What keeps recovery points on this host: a mirror's `cdp` (its stack on the array), or a
    leg's own `points` (its stack on the leg's disk, under the volume md or LIO opens)."""

    name: str  # the stack's key: the mirror's name, or points_key (MIRROR.SITE)
    device: str  # where the stack's index starts: the array, or the leg's disk
    settings: Cdp
    site: str  # the site that keeps them: this host
    label: str  # for messages: the mirror, or `MIRROR (SITE's own leg)`

    @classmethod
    def of_mirror(cls, profile: Profile, mirror: Mirror) -> Protected:
        """A mirror's `cdp`, kept on whichever of its sites is this host (the one running it)."""
        if mirror.cdp is None:
            raise ValueError(f"{mirror.name} has no cdp")
        here = next((site for site in mirror.sites if profile.sites[site].is_local), mirror.primary.site)
        return cls(mirror.name, mirror.md_device, mirror.cdp, here, mirror.name)

    @classmethod
    def own_leg(cls, profile: Profile, mirror: Mirror) -> Protected | None:
        """The points this host (the profile's `local` site) keeps of its own leg, if any."""
        for leg in mirror.legs:
            if leg.points is not None and profile.sites[leg.site].is_local:
                label = f"{mirror.name} ({leg.site}'s own leg)"
                return cls(points_key(mirror, leg.site), leg.disk, leg.points, leg.site, label)
        return None

    def request(self) -> dict[str, str]:
        """How a `cdp` request names the stack (remirror.agent.cdp_requests)."""
        return {"mirror": self.name, "md": self.device}


def tick(protected: Protected, emit: Callable[[str], None], *, period: float) -> None:
    """One round: a point if due (within half the daemon's `period` of `every`: it is looked
    at again a period later), then pruning; one JSON line per thing done. `period` has no
    default: a caller that ticks once passes 0 (a point only once `every` has passed)."""
    if not Path(protected.device).exists():
        reason = "disk not here" if is_leg_points(protected.name) else "mirror not assembled here"
        emit(json.dumps({"event": "no_stack", "mirror": protected.label, "reason": reason}))
        return
    # A rollback or a restore holds the index for as long as it copies: this tick is then
    # reported as failed (busy), and the next one takes the point.
    with local.index_locked(protected.name, "cdp run", TICK_LOCK_WAIT):
        if is_leg_points(protected.name):
            # The site brings its own points back itself, after a reboot or a deactivation:
            # no other site can (docs/security.md, "What the DR site decides alone").
            state = own_points.activate_own(protected.name, protected.device)
            if state == "activated":
                emit(json.dumps({"event": "activated", "mirror": protected.label}))
            elif state == "taken_down":
                reason = "taken down by its operator (remirror cdp up --leg brings it back)"
                emit(json.dumps({"event": "no_stack", "mirror": protected.label, "reason": reason}))
                return
        _tick(protected, emit, period)


def _tick(protected: Protected, emit: Callable[[str], None], period: float) -> None:
    index = local.read_index(protected.device)
    if index is None:
        emit(json.dumps({"event": "no_stack", "mirror": protected.label}))
        return
    settings, name = protected.settings, protected.label
    hooks = Hooks.from_json(settings.hooks.as_json()) if settings.hooks is not None else None
    done = point_and_prune(
        protected.name,
        protected.device,
        index,
        settings.every,
        settings.retention,
        force=False,
        hooks=hooks,
        early=period / 2,
    )
    if done["owed_after_hook"] is not None:
        emit(json.dumps({"event": "owed_after_hook", "mirror": name, "exit_code": done["owed_after_hook"]}))
    taken = done["taken"]
    if taken is not None:
        emit(json.dumps({
            "event": "point", "mirror": name, "id": taken["id"], "era": taken["era"],
            "seconds": taken["seconds"], "hooks": taken["hooks"], "hook_failures": taken["hook_failures"],
        }))  # fmt: skip
    if done["expired"] or done["for_space"]:
        emit(json.dumps({
            "event": "pruned", "mirror": name,
            "expired": done["expired"], "for_space": done["for_space"],
        }))  # fmt: skip


def run(
    protected: list[Protected],
    stop: threading.Event,
    emit: Callable[[str], None],
    changed: Callable[[], bool] = lambda: False,
) -> None:
    """Tick until `stop` or the profile `changed`, about ten times per shortest `every` (a point
    is never much late).

    A mirror not assembled here (yet) is reported once per tick as `no_stack`
    and taken up when it appears.
    """
    intervals = [p.settings.every for p in protected]
    period = max(0.5, min(min(intervals, default=5.0) / 10, 5.0))
    ping = watchdog_period()
    notify("READY=1")
    while not stop.is_set() and not changed():
        for each in protected:
            try:
                tick(each, emit, period=period)
            except (RemirrorError, OSError) as error:
                text = error.one_line() if isinstance(error, RemirrorError) else str(error)
                emit(json.dumps({"event": "failed", "mirror": each.label, "error": text}))
        if ping is not None:
            notify("WATCHDOG=1")
        stop.wait(period)
    if stop.is_set():
        notify("STOPPING=1")
