"""remirror's block of /etc/mdadm/mdadm.conf: read it, and make the file with it. Pure.

remirror owns one block of the file, between CONF_BEGIN and CONF_END; the
rest is the administrator's and is kept as it is. The planner decides the
block's lines (remirror.plan.mdadm_conf); the site writes the file from its
own copy with them (remirror.agent.steps), both through `merged_conf`.
"""

from __future__ import annotations

CONF_BEGIN = "# BEGIN remirror: managed by remirror apply, do not edit"
CONF_END = "# END remirror"


def managed_conf(current: str, lines: list[str]) -> str:
    """`current` with remirror's block replaced, appended, or removed when there are no lines."""
    block = "\n".join([CONF_BEGIN, *lines, CONF_END]) + "\n" if lines else ""
    if CONF_BEGIN in current and CONF_END in current:
        head, _, rest = current.partition(CONF_BEGIN)
        _, _, tail = rest.partition(CONF_END + "\n") if CONF_END + "\n" in rest else rest.partition(CONF_END)
        return head + block + tail
    if not block:
        return current
    separator = "" if not current or current.endswith("\n") else "\n"
    return current + separator + block


def merged_conf(current: str, lines: list[str]) -> str:
    """`current` with remirror's block made of `lines` (by their UUIDs) and, after them, every line
    of its block whose UUID they do not name, as it is: a mirror dropped from the profile keeps its
    line (its array may still run, its disks still hold it); only a person removes one."""
    named = {uuid for line in lines for uuid in managed_lines(f"{CONF_BEGIN}\n{line}\n{CONF_END}")}
    kept = [line for uuid, line in managed_lines(current).items() if uuid not in named]
    return managed_conf(current, [*lines, *kept])


def managed_lines(conf: str) -> dict[str, str]:
    """The ARRAY lines of remirror's block in an mdadm.conf, by the array UUID they name."""
    if CONF_BEGIN not in conf:
        return {}
    block = conf.partition(CONF_BEGIN)[2].partition(CONF_END)[0]
    found = {}
    for line in block.splitlines():
        words = line.split()
        uuid_ = next((w.removeprefix("UUID=") for w in words if w.startswith("UUID=")), "")
        if words[:1] == ["ARRAY"] and uuid_:
            found[uuid_] = line.strip()
    return found
