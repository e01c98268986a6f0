"""`remirror watch`: reconcile passes on udev events and on a timer, as a systemd notify service.

Events say *when* to look, never *what* to do: every pass observes
everything again (level-based), so a missed or duplicated event costs at
most one timer interval (and a pass runs at each edge of a resync schedule's
windows, whatever the interval). Events come in bursts (a lost session changes
several block devices), so a pass starts only after `debounce` seconds
without new ones. Passes that fail back off exponentially, up to
`max_backoff`, so that a site that stays broken is not hammered; while a
site cannot be reached, no longer than `interval`: asking again costs a
connection attempt. No udev event at the primary says a DR site returned
(its power, its link), so while the watch waits it knocks on the SSH port of
each site the last pass could not reach (a TCP connection opened and closed,
nothing sent, every `knock` seconds, in a thread of its own): a port that
failed a knock too and then answers one ends the wait `settle` seconds
later (the site's boot has its own services to start: LIO's restore,
remirror-start@), so the site is taken back within seconds of its return,
not at the next interval. Once per absence: if the site is still
unreachable after that pass, the next wait is the timer's alone (a site
whose SSH answers but fails, or whose port flaps, costs no more passes than
before). A site reached through a bastion is not knocked on (its port is not
the bastion's to tell).
"""

from __future__ import annotations

import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from remirror.controller import Controller, read_secrets
from remirror.errors import RemirrorError
from remirror.here import RunningProfile
from remirror.profile.model import Profile, SshOptions
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
    knock: float = 10.0  # between knocks on an unreachable site's SSH port while waiting
    settle: float = 15.0  # from a knock answered to the pass

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
    knocked_back: set[str] = set()  # sites a knock said were back, for the pass that followed
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
            knocked = sites_to_knock(unreachable, knocked_back)
            delay = timing.after(code, failures, unreachable=bool(unreachable))
            edge = next_window_edge(running.controller.profile, datetime.now().astimezone())
            delay = min(delay, edge) if edge is not None else delay
            emit(
                json.dumps(
                    {"event": "sleep", "seconds": delay, "failures": failures, "unreachable": unreachable}
                )
            )
            knocker = Knocker(ssh_ports(running.controller.profile, knocked), timing.knock, timing.settle)
            with knocker:
                _wait(events, delay, timing.debounce, ping, stop, knocker.back)
            knocked_back = {knocker.returned} if knocker.returned else set()
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


def sites_to_knock(unreachable: list[str], knocked_back: set[str]) -> list[str]:
    """The unreachable sites to knock on while waiting: a knock's word is taken once per
    absence, so one still away after the pass a knock brought waits for the timer."""
    return [name for name in unreachable if name not in knocked_back]


def ssh_ports(profile: Profile, sites: Iterable[str]) -> dict[str, tuple[str, int, float]]:
    """The SSH server's (host, port, connect timeout) of each of `sites` reached directly (not
    through a bastion), by site."""
    ports = {}
    for name in sites:
        site = profile.sites[name]
        options = site.ssh or SshOptions()  # as runner/sites.py reaches it
        if not site.is_local and not options.proxy_jump:
            ports[name] = (site.ssh_address.host, site.ssh_address.port, options.connect_timeout)
    return ports


class Knocker:
    """While a watch waits: knocks on the SSH ports of sites the last pass could not reach, and
    sets `back` (and `returned`, the site) `settle` seconds after a port that failed twice in a
    row (the pass, then a knock) answers a knock. A port that answers the first knock says
    nothing: a pass's failure with its port open is past SSH's connection (a key, the agent),
    and keeps the pass's backoff."""

    def __init__(self, ports: dict[str, tuple[str, int, float]], every: float, settle: float = 0.0) -> None:
        self.ports, self.every, self.settle = ports, every, settle
        self.back = threading.Event()
        self.returned: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._knock, name="remirror-watch-knock", daemon=True)

    def __enter__(self) -> Knocker:
        if self.ports:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        # The thread sees it before its next knock; one under way ends within its connect
        # timeout (a name's lookup within the resolver's), in its own thread.
        self._done.set()

    def _knock(self) -> None:
        # The pass that could not reach a site is its first miss: a knock that fails after it
        # makes two in a row, however early in the wait the site returns.
        missed = dict.fromkeys(self.ports, 1)
        while True:
            for name, (host, port, timeout) in self.ports.items():
                if self._done.is_set():
                    return
                if not answers((host, port), timeout):
                    missed[name] += 1
                elif missed[name] >= 2:
                    if not self._done.wait(self.settle):
                        self.returned = name
                        self.back.set()
                    return
                else:
                    missed[name] = 0
            if self._done.wait(self.every):
                return


def answers(port: tuple[str, int], timeout: float) -> bool:
    """Whether a TCP connection to `port` opens within `timeout` (closed at once)."""
    try:
        socket.create_connection(port, timeout=timeout).close()
    except OSError:
        return False
    return True


def _wait(
    events: Any,
    delay: float,
    debounce: float,
    ping: float | None,
    stop: threading.Event,
    back: threading.Event | None = None,
) -> None:
    """Until `delay` has passed, or an event burst has settled, or an unreachable site's SSH
    server answers (`back`), or `stop`; pinging the watchdog."""
    deadline = time.monotonic() + delay
    quiet_until: float | None = None
    while not stop.is_set():
        if back is not None and back.is_set():
            return
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
