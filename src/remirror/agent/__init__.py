"""The agent: the only code that looks at and changes a site's storage stack.

A request is a JSON object: `{"op": "observe", "disks": [...]}`,
`{"op": "run", "steps": [...]}`, `{"op": "digest", "disk": ..., "spans":
[...]}`, `{"op": "cdp", "do": ...}` (a `remirror cdp` verb,
remirror.agent.cdp_requests), `{"op": "seed", "do": ...}` (`remirror seed`, only from the site's
own controller: remirror.agent.seed), `{"op": "lock"|"unlock", "name": "site", ...}` (held for as long
as the agent runs, remirror.agent.lock), or `remirror estimate`'s `{"op": "block_stats",
"devices": [...]}` and `{"op": "sink", "data": "..."}` (a timed transfer that measures the
link; the data is dropped); the answer is a JSON object. The local site calls `handle`
in-process; a remote site runs `remirror agent --serve` over SSH, once per
controller command, with one request per line on stdin (never in argv:
steps can carry CHAP secrets), because rtslib, sysfs and mdadm act only on
their own host.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from remirror.agent import lock
from remirror.agent.digest import digests
from remirror.agent.observe import observe as observe_site  # the package keeps `observe`, the module
from remirror.agent.protocol import PROTOCOL_VERSION
from remirror.errors import RemirrorError
from remirror.runner.base import commands_started


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request, with the number of commands it ran on the site (`commands`)."""
    before = commands_started()
    answer = _answer(request)
    answer["commands"] = commands_started() - before
    return answer


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    """Errors in steps come back in the answer, not as exceptions."""
    op = request.get("op")
    if op == "observe":
        disks, portals = list(request.get("disks", [])), list(request.get("portals", []))
        return {
            "protocol": PROTOCOL_VERSION,
            "facts": observe_site(
                disks, portals, list(request.get("probe", [])), list(request.get("records", []))
            ),
        }
    if op == "digest":
        try:
            return {"protocol": PROTOCOL_VERSION, **digests(request)}
        except (RemirrorError, OSError) as error:
            return {"protocol": PROTOCOL_VERSION, "error": str(error)}
    if op == "lock":
        try:
            taken = lock.take(
                str(request["name"]), str(request.get("holder", "")), float(request.get("wait", 0))
            )
        except lock.Busy as busy:
            return {"protocol": PROTOCOL_VERSION, "error": str(busy), "busy": True}
        return {"protocol": PROTOCOL_VERSION, "locked": taken}
    if op == "unlock":
        lock.release(str(request["name"]))
        return {"protocol": PROTOCOL_VERSION}
    if op == "run":
        # Imported here: the typed steps (remirror.protocol) are a third of the agent's imports,
        # and most agents started (status, check, a reconcile pass with nothing to do) only observe.
        from remirror.agent.steps import run_steps

        return {"protocol": PROTOCOL_VERSION, "results": run_steps(list(request.get("steps", [])))}
    if op == "block_stats":
        return {"protocol": PROTOCOL_VERSION, "stats": block_stats(list(request.get("devices", [])))}
    if op == "sink":
        return {"protocol": PROTOCOL_VERSION, "received": len(str(request.get("data", "")))}
    if op == "seed":
        from remirror.agent.seed import answer as seed_answer  # an operator's, at the site

        return {"protocol": PROTOCOL_VERSION, **seed_answer(request)}
    if op == "cdp":
        from remirror.agent.cdp_requests import answer  # only the primary's verbs need it

        return {"protocol": PROTOCOL_VERSION, **answer(request)}
    return {"protocol": PROTOCOL_VERSION, "error": f"unknown op {op!r}"}


def block_stats(devices: list[str]) -> dict[str, str | None]:
    """Each device's /sys/class/block/DEV/stat line (`remirror estimate` samples them), or None
    for one that does not exist."""
    stats: dict[str, str | None] = {}
    for path in devices:
        stat = Path("/sys/class/block") / Path(os.path.realpath(path)).name / "stat"
        stats[path] = stat.read_text() if Path(path).exists() and stat.exists() else None
    return stats
