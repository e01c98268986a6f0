"""A leg's own points, as only the site that keeps them handles them (docs/security.md, "What
the DR site decides alone"): brought back as the index on its disk says, after a reboot or a
deactivation, by its `cdp run` and its `cdp` verbs, with no word from another site; taken down
by its operator alone (`remirror cdp down --leg`), who brings them back (`cdp up --leg`).
Another site's controller can neither take them down nor lay them fresh (remirror.agent.policy).
"""

from __future__ import annotations

from remirror.agent import lock
from remirror.agent.cdp import (
    CdpError,
    activate,
    deactivate,
    dm_exists,
    open_count,
    read_index,
)
from remirror.agent.taken_down import mark_taken_down, taken_down_mark
from remirror.facts.cdp import is_view, stack_names
from remirror.runner.local import LocalRunner

_runner = LocalRunner("cdp")


def activate_own(key: str, disk: str) -> str:
    """A site's own points brought back as the index on its disk says (after a reboot, or a
    deactivation): "activated", "active" (nothing to do), "taken_down" (the operator's mark),
    or "no_stack" (no index of `key` there). It never creates a stack, lays one fresh or writes
    the index: what is there is what the site keeps. The caller holds the index lock."""
    if taken_down_mark(key).exists():
        return "taken_down"
    index = read_index(disk)
    if index is None or index.mirror != key:
        return "no_stack"
    if all(dm_exists(name) for name in stack_names(key).values()):
        return "active"
    activate(key, disk, index.layout, new=False)
    return "activated"


def dm_names() -> list[str]:
    """The names of every device-mapper device of this host."""
    out = _runner.run(["dmsetup", "info", "-c", "--noheadings", "-o", "name"]).stdout
    return [line.strip() for line in out.splitlines() if line.strip() and line.strip() != "No devices found"]


def take_down_own(key: str) -> list[str]:
    """The operator's `cdp down --leg`: the points' views and a drill's copies, then the stack,
    removed (the points and the leg's data stay on its disk), and the mark written so that
    nothing brings them back until `cdp up --leg`; refused while md or LIO holds the volume, a
    drill runs or a view is in use. The caller holds the index lock."""
    names = stack_names(key)
    drill = [f"{names['volume']}-drill-data", f"{names['volume']}-drill"]  # its data first
    present = dm_names()
    views = [name for name in drill if name in present] + sorted(n for n in present if is_view(n, key))
    with lock.holding(f"drill-{key}", lock.holder("cdp down"), 0.0):
        for name in [names["volume"], *views]:
            if name in present and open_count(name) > 0:
                raise CdpError(
                    f"{name} is in use (LIO exports it, md holds it, or a view or a drill's copy is"
                    " mounted): end that first, or destroy the mirror"
                )
        mark_taken_down(key, "operator (remirror cdp down --leg)")
        try:
            deactivate(key, views)
        except BaseException:
            if dm_exists(names["volume"]):  # still in service: points go on being taken
                taken_down_mark(key).unlink(missing_ok=True)
            raise
    return [name for name in [*views, *reversed(list(names.values()))] if name in present]
