"""A leg's own points, as only the site that keeps them handles them (docs/security.md, "What
the DR site decides alone"): brought back as the index on its disk says, after a reboot or a
deactivation, by its `cdp run` and its `cdp` verbs, with no word from another site; taken down
by its operator alone (`remirror cdp down --leg`), who brings them back (`cdp up --leg`).
Another site's controller can neither take them down nor lay them fresh (remirror.agent.policy).
"""

from __future__ import annotations

from remirror.agent import cdp
from remirror.agent.cdp import (
    CdpError,
    activate,
    deactivate,
    dm_exists,
    open_count,
    read_index,
    taken_down_mark,
)
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
    nothing brings them back until `cdp up --leg`; refused while md or LIO holds the volume."""
    names = stack_names(key)
    if dm_exists(names["volume"]) and open_count(names["volume"]) > 0:
        raise CdpError(
            f"{names['volume']} is in use (LIO exports it, or md holds it): remove the export"
            " or destroy the mirror first"
        )
    drill = [f"{names['volume']}-drill-data", f"{names['volume']}-drill"]  # its data first
    present = dm_names()
    views = [name for name in drill if name in present] + sorted(n for n in present if is_view(n, key))
    cdp.TAKEN_DOWN_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    taken_down_mark(key).write_text("taken down by the site's operator (remirror cdp down --leg)\n")
    deactivate(key, views)
    return [name for name in [*views, *reversed(list(names.values()))] if name in present]
