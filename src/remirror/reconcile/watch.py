"""`remirror watch`: reconcile passes on udev events and on a timer, as a systemd notify service.

Events say *when* to look, never *what* to do: every pass observes
everything again (level-based), so a missed or duplicated event costs at
most one timer interval (and a pass runs at each edge of a resync schedule's
windows, whatever the interval). Events come in bursts (a lost session changes
several block devices), so a pass starts only after `debounce` seconds
without new ones. Passes that fail back off exponentially, up to
`max_backoff`, so that a site that stays broken is not hammered; while a
site cannot be reached, no longer than `interval`: asking again costs a
connection attempt, and a DR site back from an outage (its power, its
link) is taken back within a minute of its return, however long it was
gone. No event at the primary says it returned.
"""

from __future__ import annotations

import json
import logging
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from remirror.controller import Controller, read_secrets
from remirror.errors import RemirrorError
from remirror.here import RunningProfile
from remirror.profile.model import Profile
from remirror.profile.schedule import resync_limit
from remirror.reconcile import EXIT_CANNOT, EXIT_OK, ProfileChanged, reconcile_once
from remirror.systemd import notify, watchdog_period

log = logging.getLogger("remirror.watch")


@dataclass(frozen=True)
class Timing:
    """How often a watch looks, and how it backs off."""

    interval: float = 60.0  # between passes while all is well (events can be missed)
    busy: float = 10.0  # between passes while repairs are under way (a resync)
    debounce: float = 2.0  # quiet time after an event before a pass
    max_backoff: float = 600.0  # longest wait after repeated failures

    def after(self, code: int, failures: int, unreachable: bool = False) -> float:
        """Seconds until the next pass, given this pass's exit code, the failures in a row, and
        whether a site could not be reached."""
        if failures:
            backoff = min(self.interval * 2 ** (failures - 1), self.max_backoff)
            return float(min(backoff, self.interval) if unreachable else backoff)
        return self.interval if code == EXIT_OK else self.busy


@dataclass
class Running:
    """What a watch's passes run with: a controller of the profile, and its CHAP secrets."""

    controller: Controller
    secrets: dict[str, str]

    @classmethod
    def of(cls, profile: Profile) -> Running:
        """The secrets read (made where the profile wants them generated), then the controller:
        secrets that fail leave no controller to close."""
        secrets = read_secrets(profile)
        return cls(Controller(profile), secrets)


def watch(source: RunningProfile, timing: Timing, stop: threading.Event, emit: Callable[[str], None]) -> None:
    """Run passes until `stop` is set; one JSON line per mirror and pass through `emit`.

    Each pass runs on the profile as last applied on this host (RunningProfile): one the
    operator changed and applied is never undone by a pass on the text this watch started
    with, and one only edited is left for `apply`.
    """
    events = _udev_events()
    ping = watchdog_period()
    failures = 0  # passes in a row that could not repair: each doubles the wait
    running = Running.of(source.profile)
    notify("READY=1")
    try:
        while not stop.is_set():
            running = _current(source, running, emit)
            code = _one_pass(running, source, emit)
            if code is None:
                continue  # an apply came first, and the pass did nothing: again, on its text
            failures = failures + 1 if code >= EXIT_CANNOT else 0
            unreachable = sorted(running.controller.unreachable)  # as the pass observed them
            delay = timing.after(code, failures, unreachable=bool(unreachable))
            edge = next_window_edge(running.controller.profile, datetime.now().astimezone())
            delay = min(delay, edge) if edge is not None else delay
            emit(
                json.dumps(
                    {"event": "sleep", "seconds": delay, "failures": failures, "unreachable": unreachable}
                )
            )
            _wait(events, delay, timing.debounce, ping, stop)
    finally:
        running.controller.close()
    notify("STOPPING=1")


def next_window_edge(profile: Profile, now: datetime) -> float | None:
    """Seconds until a resync schedule's next window opens or closes (a second past it, so that
    the pass plans inside), by this host's clock: the watch runs at the primary, whose local
    time the windows are in. None: no mirror has a schedule."""
    edges = [
        limit.until
        for mirror in profile.mirrors
        if (limit := resync_limit(mirror.replication.resync_max, mirror.replication.schedule, now))
        and limit.until is not None
    ]
    return max(0.0, (min(edges) - now).total_seconds()) + 1.0 if edges else None


def _current(source: RunningProfile, running: Running, emit: Callable[[str], None]) -> Running:
    """`running`, or a new one on the text an apply recorded since (the old controller closed)."""
    renewed = source.follow(Running.of, running, emit)
    if renewed is not running:
        running.controller.close()
    return renewed


def _one_pass(running: Running, source: RunningProfile, emit: Callable[[str], None]) -> int | None:
    """One reconcile pass, logged; its exit code (`reconcile`'s), or None if an apply recorded a
    new text before the pass held the sites' locks (it then did nothing)."""
    started = time.monotonic()
    controller, secrets = running.controller, running.secrets
    controller.unreachable = {}  # this pass's: one that fails before it observes reached none
    try:
        # Looked at again once the locks are held: an apply that took them first has finished,
        # and has recorded its text.
        passes = reconcile_once(
            controller, secrets, lambda line: log.info("%s", line), unchanged=lambda: not source.changed()
        )
    except ProfileChanged:
        return None
    except RemirrorError as error:
        emit(json.dumps({"event": "pass", "error": error.one_line()}))
        return EXIT_CANNOT
    for done in passes:
        emit(
            json.dumps(
                {
                    "event": "pass",
                    "mirror": done.mirror,
                    "before": done.before.state.value,
                    "after": done.after.state.value,
                    "repaired": [f"{a.site} {a.verb}" for a in done.repaired],
                    "exit_code": done.exit_code,
                    "reason": done.why,
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
        )
    return max((p.exit_code for p in passes), default=EXIT_OK)


def _udev_events() -> Any:
    """A udev monitor for block devices and iSCSI sessions, or None where udev is not running."""
    try:
        import pyudev  # imported here: only the daemon needs it

        monitor = pyudev.Monitor.from_netlink(pyudev.Context())
        monitor.filter_by("block")
        monitor.filter_by("iscsi_session")
        monitor.start()
    except (ImportError, OSError) as error:
        log.warning("no udev events (%s): passes run on the timer only", error)
        return None
    return monitor


def _wait(events: Any, delay: float, debounce: float, ping: float | None, stop: threading.Event) -> None:
    """Until `delay` has passed, or an event burst has settled, or `stop`; pinging the watchdog."""
    deadline = time.monotonic() + delay
    quiet_until: float | None = None
    while not stop.is_set():
        now = time.monotonic()
        until = min(deadline, quiet_until) if quiet_until is not None else deadline
        if now >= until:
            return
        timeout = min(until - now, ping or until - now, 1.0)
        if events is not None and _event_within(events, timeout):
            quiet_until = time.monotonic() + debounce
        elif events is None:
            stop.wait(timeout)
        if ping is not None:
            notify("WATCHDOG=1")


def _event_within(monitor: Any, timeout: float) -> bool:
    """Whether an event arrived within `timeout` (all that arrived are consumed)."""
    ready, _, _ = select.select([monitor], [], [], timeout)
    if not ready:
        return False
    while monitor.poll(timeout=0) is not None:
        pass
    return True
