"""What a `remirror` start costs on a host of the hosts' lab (one emulated CPU, its own kernel).

    ./dev setup   # once: the hosts' image
    .venv/bin/python bench/hosts_startup.py

Boots two hosts, installs remirror as README's steps do, applies the sites' two-site mirror
(tests/hosts_lab/mirror.py) and waits for MIRRORED; then, on site-a, the median of 3 runs of
each command below (less an SSH round trip from here), `remirror status` under cProfile
(cumulative) and the largest imports of the controller (`python -X importtime`), and what
each verb costs each site (seconds, agent requests, commands run there, answers' KiB: the
controller's own count, which -v logs). Prints it all; the hosts are stopped at the end. About
6 minutes on a usual day.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(CHECKOUT))

from basics import site_costs  # noqa: E402 - bench/'s own, beside this file
from tests.hosts_lab.mirror import ONE_PROFILE, PROFILE, install_sites, wait_mirrored  # noqa: E402

from remirror.lab.hosts.image import VENV  # noqa: E402 - after the checkout is on the path
from remirror.lab.hosts.lab import KNOWN_HOSTS, SITE_KEY, HostsLab  # noqa: E402
from remirror.lab.hosts.machine import Host  # noqa: E402

PYTHON = f"{VENV}/bin/python"
COMMANDS = {
    "python3 -c pass": "python3 -c pass",
    "import remirror.controller": f"{PYTHON} -c 'import remirror.controller'",
    "import remirror.agent.serve": f"{PYTHON} -c 'import remirror.agent.serve'",
    "remirror --help": "remirror --help",
    "remirror validate": f"remirror validate {PROFILE}",
    # The key's forced command starts the agent, which reads end-of-file and ends.
    "ssh to site-b, its agent started": f"ssh -i {SITE_KEY} -o UserKnownHostsFile={KNOWN_HOSTS}"
    " -o BatchMode=yes root@site-b true </dev/null",
    # One request, held to site-b's scope: its profiles read, or its compiled scope (issue 48).
    "ssh to site-b, its agent answering a request": 'echo \'{"op": "sink", "data": ""}\' |'
    f" ssh -i {SITE_KEY} -o UserKnownHostsFile={KNOWN_HOSTS} -o BatchMode=yes root@site-b",
    "remirror status": f"remirror status {PROFILE}",
    "remirror plan": f"remirror plan {PROFILE}",
}


# What each verb costs each site once the mirror is whole: the controller's own count, logged
# with -v when it ends (remirror.controller's close: requests to the site's agent, the commands
# the agent ran there, the answers' bytes).
VERBS = {
    "status": f"status {PROFILE}",
    "check": f"check {PROFILE}",
    "plan": f"plan {PROFILE}",
    "apply, nothing to do": f"apply --yes {PROFILE}",
}


def verb_costs(host: Host, ssh: float) -> list[str]:
    """A row per verb and site: seconds (median of 3, less an SSH round trip), requests,
    commands, KiB of answers (from the last of the three runs' -v log)."""
    lines = [
        "| verb | seconds, median of 3 | site | agent requests | commands run | KiB of answers |",
        "|---|---|---|---|---|---|",
    ]
    for name, args in VERBS.items():
        times, said = [], ""
        for _ in range(3):
            started = time.monotonic()
            said = host.run(f"remirror -v {args} 2>&1 >/dev/null", check=False, timeout=600).stdout
            times.append(time.monotonic() - started - ssh)
        costs = site_costs(said)
        if not costs:
            raise SystemExit(f"remirror -v {args} logged no site's cost: {said[-500:]}")
        for index, (site, cost) in enumerate(costs.items()):
            seconds = f"{statistics.median(times):.2f}" if index == 0 else ""
            shown = name if index == 0 else ""
            lines.append(
                f"| {shown} | {seconds} | {site} | {cost['requests']} | {cost['commands']}"
                f" | {cost['answer_bytes'] / 1024:.1f} |"
            )
    return lines


def median_seconds(
    host: Host, command: str, runs: int = 3, before: Callable[[], object] | None = None
) -> float:
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.monotonic()
        host.run(command, check=False, timeout=600)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="remirror-hosts-startup-"))
    lab = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"]}, checkout=CHECKOUT)
    try:
        install_sites(lab, ONE_PROFILE)
        a = lab["site-a"]
        a.run(f"remirror apply {PROFILE} --yes", timeout=600)
        wait_mirrored(a)
        ssh = median_seconds(a, "true")
        lines = [f"| on site-a, seconds (less an SSH round trip of {ssh:.2f}) | median of 3 |", "|---|---|"]
        lines += [
            f"| {name} | {median_seconds(a, command) - ssh:.2f} |" for name, command in COMMANDS.items()
        ]
        # The same request at a site that has no compiled scope (the first after a boot or a change).
        request = COMMANDS["ssh to site-b, its agent answering a request"]
        built = median_seconds(a, request, before=lambda: lab["site-b"].run("rm -f /run/remirror/scope.json"))
        row = f"| the same, site-b's scope built from its profiles | {built - ssh:.2f} |"
        lines.insert(lines.index(next(line for line in lines if "answering a request" in line)) + 1, row)
        lines += ["", *verb_costs(a, ssh), ""]
        profiled = f"{PYTHON} -m cProfile -s cumtime {VENV}/bin/remirror status {PROFILE} | head -70"
        lines.append(a.run(profiled, check=False, timeout=600).stdout)
        imports = f"{PYTHON} -X importtime -c 'import remirror.controller' 2>&1 | sort -t'|' -k2 -n"
        lines.append(a.run(f"{imports} | tail -15", check=False).stdout)
        sys.stdout.write("\n".join(lines) + "\n")
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
