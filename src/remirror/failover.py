"""The controller's side of `remirror promote` and `resolve` (docs/failover.md): observe, hand
over, apply.

The decisions are pure (remirror.plan.promote); here is only the order: the
hand-over runs first, then, once every site can be reached, `apply` with
the new roles builds the rest (the old primary's leg exported to the new
primary, the sessions, write-mostly on the right leg).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from remirror.controller import Controller, Outcome
from remirror.errors import RemirrorError
from remirror.plan import Plan
from remirror.plan.promote import make_promotion
from remirror.plan.resolve import make_resolution, rebuild_actions


@dataclass(frozen=True)
class Promotion:
    """What a promotion did, and what it left for later."""

    handover: Plan
    outcomes: tuple[Outcome, ...]
    pending: str = ""  # why the new roles are not fully built yet (a site not reached)


def plan_promotion(
    controller: Controller, name: str, site: str, secrets: dict[str, str], force: bool
) -> Plan:
    """Observe what can be reached and plan the hand-over."""
    facts = controller.observe_reachable()
    return make_promotion(controller.profile, name, site, facts, secrets, force)


def carry_out(
    controller: Controller,
    handover: Plan,
    secrets: dict[str, str],
    say: Callable[[str], None],
) -> Promotion:
    """Run the hand-over, then apply the new roles where every site is reached."""
    outcomes = controller.apply(handover, say)
    facts = controller.observe_reachable()
    missing = sorted(name for name, f in facts.items() if f is None)
    if missing:
        return Promotion(
            handover,
            tuple(outcomes),
            f"site {', '.join(missing)} not reached: `remirror apply` builds the rest once it is"
            " (a former primary rejoins as a replica only if it took no writes since)",
        )
    try:
        outcomes += _apply_new_roles(controller, secrets, say)
    except RemirrorError as error:
        return Promotion(handover, tuple(outcomes), error.one_line())
    return Promotion(handover, tuple(outcomes))


def _apply_new_roles(
    controller: Controller, secrets: dict[str, str], say: Callable[[str], None]
) -> list[Outcome]:
    """`apply` with the roles the legs say now, twice at most: the second pass sets what needs the
    array running (write-mostly on the legs that changed roles). Never anything destructive."""
    outcomes: list[Outcome] = []
    for _ in range(2):
        rest = controller.plan(secrets)
        if rest.is_empty:
            break
        if rest.destructive:
            what = "; ".join(a.destructive for a in rest.destructive)
            raise RemirrorError(f"not applying the new roles: it would write over {what}")
        outcomes += controller.apply(rest, say)
    return outcomes


def plan_resolution(controller: Controller, name: str, keep: str, save: str | None) -> Plan:
    """Observe every site and plan part 1 of a resolution (remirror.plan.resolve)."""
    return make_resolution(controller.profile, name, keep, controller.observe_reachable(), save)


def carry_out_resolution(
    controller: Controller,
    name: str,
    first: Plan,
    secrets: dict[str, str],
    say: Callable[[str], None],
) -> tuple[Outcome, ...]:
    """Part 1, then `apply` with the roles the legs now say, then the full rebuild of the discarded legs."""
    outcomes = controller.apply(first, say)
    outcomes += _apply_new_roles(controller, secrets, say)
    facts = controller.observe()
    running = controller.running(facts)
    outcomes += controller.apply(Plan(tuple(rebuild_actions(running, running.mirror(name), facts))), say)
    return tuple(outcomes)
