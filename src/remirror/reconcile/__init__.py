"""The reconciler: one level-based pass over a profile's mirrors (observe, assess, repair).

Level-based: a pass looks only at what is, never at what happened, so that
a missed event or a crash in the middle costs nothing but a later pass.
`remirror reconcile` runs one pass (cron, a timer); `remirror watch` runs
passes on udev events and a timer (reconcile/watch.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from remirror.controller import Controller
from remirror.errors import RemirrorError
from remirror.health import MirrorHealth, State, assess
from remirror.monitor import record_in_sync
from remirror.plan import Action, Plan
from remirror.plan.repair import make_repair

EXIT_OK, EXIT_REPAIRING, EXIT_CANNOT = 0, 1, 2
# A pass waits this long for a site another remirror command is changing, then gives up
# (the next pass tries again): an operator's apply goes first.
PASS_LOCK_WAIT = 5.0


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


def reconcile_once(controller: Controller, secrets: dict[str, str], say: Callable[[str], None]) -> list[Pass]:
    """One pass over every mirror of the controller's profile, holding each site's lock from the
    first look until the pass ends (nothing else changes a site between observe and repair)."""
    with controller.locked("reconcile", PASS_LOCK_WAIT):
        return _pass(controller, secrets, say)


def _pass(controller: Controller, secrets: dict[str, str], say: Callable[[str], None]) -> list[Pass]:
    facts = controller.observe_reachable()
    passes = []
    for name in [m.name for m in controller.profile.mirrors]:
        # As it runs now: a promotion moves the primary (docs/failover.md).
        profile = controller.running(facts)
        mirror = profile.mirror(name)
        before = assess(profile, mirror, facts)
        try:
            repair = make_repair(profile, mirror, facts, secrets, before)
        except RemirrorError as cannot:
            passes.append(Pass(mirror.name, before, before, error=cannot.one_line()))
            continue
        if not repair.actions:
            passes.append(Pass(mirror.name, before, before, blocked=repair.blocked))
            continue
        failure = ""
        try:
            controller.apply(Plan(repair.actions), say)
        except RemirrorError as failed:
            failure = failed.one_line()
        facts = controller.observe_reachable()
        after = assess(profile, mirror, facts)
        passes.append(Pass(mirror.name, before, after, repair.actions, failure, repair.blocked))
    record_in_sync(controller.profile, [p.after for p in passes])  # dates the replicas for status's RPO
    return passes
