"""The reconciler: one level-based pass over a profile's mirrors (observe, assess, repair).

Level-based: a pass looks only at what is, never at what happened, so that
a missed event or a crash in the middle costs nothing but a later pass.
`remirror reconcile` runs one pass (cron, a timer); `remirror watch` runs
passes on udev events and a timer (reconcile/watch.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from remirror.controller import ApplyError, Controller
from remirror.errors import RemirrorError
from remirror.health import MirrorHealth, State, assess
from remirror.health.seen import Seen
from remirror.monitor import load_seen, record_in_sync
from remirror.plan import Action, Plan
from remirror.plan.actions import Verb
from remirror.plan.repair import make_repair
from remirror.profile.model import Mirror, Profile

EXIT_OK, EXIT_REPAIRING, EXIT_CANNOT = 0, 1, 2
# A pass waits this long for a site another remirror command is changing, then gives up
# (the next pass tries again): an operator's apply goes first.
PASS_LOCK_WAIT = 5.0


class ProfileChanged(Exception):
    """An apply recorded a new text before a pass held the sites' locks: the pass did nothing."""


@dataclass(frozen=True)
class Pass:
    """One mirror's pass: its state before and after, and what was done."""

    mirror: str
    before: MirrorHealth
    after: MirrorHealth
    repaired: tuple[Action, ...] = ()
    error: str = ""  # a repair failed (its message)
    blocked: str = ""  # a needed repair cannot be made now (why)

    @property
    def exit_code(self) -> int:
        """0: as the profile wants; 1: repairs under way; 2: cannot repair (see `why`)."""
        if self.error:
            return EXIT_CANNOT
        if self.after.state is State.MIRRORED:
            return EXIT_OK
        if self.after.state is State.SYNCING or self.repaired:
            return EXIT_REPAIRING
        return EXIT_CANNOT

    @property
    def why(self) -> str:
        """The words an operator needs: the error, what blocks, or the state's reason."""
        return self.error or self.blocked or self.after.reason


def reconcile_once(
    controller: Controller,
    secrets: dict[str, str],
    say: Callable[[str], None],
    retry: bool = False,
    unchanged: Callable[[], bool] = lambda: True,
) -> list[Pass]:
    """One pass over every mirror of the controller's profile, holding each site's lock from the
    first look until the pass ends (nothing else changes a site between observe and repair).
    `retry`: re-add legs left out after too many re-adds (an operator who fixed their disk).
    `unchanged`: asked once the locks are held; False raises ProfileChanged before any repair."""
    with controller.locked("reconcile", PASS_LOCK_WAIT):
        return _pass(controller, secrets, say, retry, unchanged)


def _pass(
    controller: Controller,
    secrets: dict[str, str],
    say: Callable[[str], None],
    retry: bool,
    unchanged: Callable[[], bool],
) -> list[Pass]:
    facts = controller.observe_reachable()  # takes the locks
    if not unchanged():
        raise ProfileChanged
    seen = load_seen(controller.profile)
    passes = []
    readded: list[tuple[str, str]] = []
    for name in [m.name for m in controller.profile.mirrors]:
        # As it runs now: a promotion moves the primary (docs/failover.md).
        profile = controller.running(facts)
        mirror = profile.mirror(name)
        before = assess(profile, mirror, facts)
        held = {} if retry else _held(seen, mirror, time.time())
        try:
            repair = make_repair(profile, mirror, facts, secrets, before, held)
        except RemirrorError as cannot:
            passes.append(Pass(mirror.name, before, before, error=cannot.one_line()))
            continue
        if not repair.actions:
            passes.append(Pass(mirror.name, before, before, blocked=repair.blocked))
            continue
        failure = ""
        ran: tuple[Action, ...] = repair.actions
        try:
            controller.apply(Plan(repair.actions), say)
        except RemirrorError as failed:
            failure = failed.one_line()
            ran = tuple(o.action for o in failed.outcomes) if isinstance(failed, ApplyError) else ()
        readded += [(mirror.name, site) for site in _readded(profile, mirror, ran)]
        facts = controller.observe_reachable()
        after = assess(profile, mirror, facts)
        passes.append(Pass(mirror.name, before, after, repair.actions, failure, repair.blocked))
    # Dates the replicas for status's RPO, and counts the re-adds of legs not back in sync.
    record_in_sync(controller.profile, [p.after for p in passes], readded)
    return passes


def _held(seen: Seen, mirror: Mirror, now: float) -> dict[str, str]:
    """The replica legs the pass leaves out (re-added READD_TRIES times without coming back in
    sync, the last less than HELD_RETRY ago), with the words that say why."""
    held = {}
    for replica in mirror.replicas:
        until = seen.held_until(mirror.name, replica.site)
        if until is not None and now < until:
            tries = seen.failed_readds(mirror.name, replica.site)
            held[replica.site] = (
                f"the replica leg on {replica.site} failed again after {tries} re-adds (its disk fails"
                f" writes, or its points' pool is full): left out until"
                f" {time.strftime('%H:%M', time.localtime(until))}, then tried once more; after fixing"
                " it, `remirror reconcile --retry` puts it back now"
            )
    return held


# Repairs that take a replica leg back into the array: each counts as a try (health/seen.py).
_READDS = (Verb.RE_ADD_LEG, Verb.DROP_BAD_BLOCK_LOG)


def _readded(profile: Profile, mirror: Mirror, ran: tuple[Action, ...]) -> list[str]:
    """The replica sites whose leg the repairs that ran (a failed one included) put back."""
    iqns = {profile.replica_iqn(mirror, replica): replica.site for replica in mirror.replicas}
    return [iqns[a.target] for a in ran if a.verb in _READDS and a.target in iqns]
