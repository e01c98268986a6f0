"""Actions: one change on one site, with the steps that make it.

A plan is an ordered list: an action's dependencies come before it (on the
replica site the backstore before the target before the ACL; then on the
primary the node record before the login before the array). Apply runs
them in order and stops at the first failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CREATE, CHANGE, DELETE = "+", "~", "-"


@dataclass(frozen=True)
class Action:
    """A change on one site: `+ site-b CreateBackstore lab-lab0 on /dev/lab/b0`."""

    site: str
    verb: str
    subject: str
    symbol: str = CREATE
    steps: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    destructive: str = ""  # what it would destroy; empty when nothing
    # The reconciler may carry it out on its own (remirror.plan.repair): decided
    # where the action is built, so that a new verb is apply's alone until someone
    # decides a daemon may run it. Only re-creating what apply made, never what
    # assembles, rebuilds, reshapes, removes or stops.
    repair: bool = False

    def line(self) -> str:
        """One line for `remirror plan`."""
        warning = f"  [DESTROYS: {self.destructive}]" if self.destructive else ""
        return f"{self.symbol} {self.site}: {self.verb} {self.subject}{warning}"

    def as_json(self) -> dict[str, Any]:
        """The action as `-o json` shows it (steps omitted: they can hold secrets)."""
        return {
            "site": self.site,
            "verb": self.verb,
            "subject": self.subject,
            "symbol": self.symbol,
            "destructive": self.destructive or None,
        }


@dataclass(frozen=True)
class Plan:
    """The ordered actions that make the sites match the profile."""

    actions: tuple[Action, ...]

    @property
    def is_empty(self) -> bool:
        """Nothing to do: the sites match the profile."""
        return not self.actions

    @property
    def destructive(self) -> tuple[Action, ...]:
        """Actions that would write over data."""
        return tuple(a for a in self.actions if a.destructive)

    def summary(self) -> str:
        """`Plan: 3 to add, 1 to change, 0 to remove.`"""
        counts = {
            symbol: sum(a.symbol == symbol for a in self.actions) for symbol in (CREATE, CHANGE, DELETE)
        }
        return (
            f"Plan: {counts[CREATE]} to add, {counts[CHANGE]} to change, {counts[DELETE]} to remove."
            if self.actions
            else "No changes: the sites match the profile."
        )
