"""What a `remirror` command costs to start, inside the lab (docs/lab.md, "Cost").

    remirror lab run --out DIR -- python bench/startup.py [CHECKOUT]

Times, as the median of a few runs on site A: `python -c pass`, `remirror
--help`, `remirror validate`, `plan` and `status` of profiles/lab.yaml (on a
lab where nothing is built yet: both observe both sites, and plan has the
whole mirror to plan), one remote agent answering an observe over SSH, and
the imports of the CLI, the profile and the agent (`python -X importtime`:
the largest, cumulative). CHECKOUT (default: this one) is another checkout
of remirror to measure instead, with its own venv (the before of a change).
Writes startup.json to $LAB_OUT and prints a Markdown table.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = int(os.environ.get("STARTUP_RUNS", "3"))
OUT = Path(os.environ.get("LAB_OUT", "bench/out"))


def timed(argv: list[str], cwd: Path, stdin: str = "") -> float:
    """Seconds the command took (it must succeed or say why)."""
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1, 2):  # plan and status exit 1/2 on a lab with nothing built
        sys.exit(f"startup: {' '.join(argv)} failed ({done.returncode}): {done.stderr[-500:]}")
    return seconds


def median(argv: list[str], cwd: Path, stdin: str = "") -> float:
    return statistics.median(timed(argv, cwd, stdin) for _ in range(RUNS))


def imports(python: str, module: str, cwd: Path) -> dict[str, object]:
    """The total and the largest cumulative entries of `python -X importtime -c 'import MODULE'`."""
    done = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        rows.append((int(cumulative), name))
    top_level = {name: us for us, name in rows if not name.startswith(" ")}
    total = next((us for us, name in rows if name == module), 0)
    heavy = sorted(((us, name) for name, us in top_level.items()), reverse=True)[:8]
    return {"total_s": round(total / 1e6, 2), "largest": [[name, round(us / 1e6, 2)] for us, name in heavy]}


MODULES = ("remirror.cli", "remirror.cli.app", "remirror.profile", "remirror.agent", "paramiko")


def importable(python: str, module: str) -> bool:
    return (
        subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False).returncode == 0
    )


def main() -> None:
    checkout = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    python = str(checkout / ".venv" / "bin" / "python")
    remirror = str(checkout / ".venv" / "bin" / "remirror")
    profile = str(checkout / "profiles" / "lab.yaml")
    observe = json.dumps({"op": "observe", "disks": ["/dev/lab/b0"]}) + "\n"
    agent = ["ssh", "root@site-b", f"{checkout}/.venv/bin/remirror", "agent", "--serve"]
    seconds = {
        "python -c pass": median([python, "-c", "pass"], checkout),
        "ssh root@site-b true": median(["ssh", "root@site-b", "true"], checkout),
        "remirror --help": median([remirror, "--help"], checkout),
        "remirror validate": median([remirror, "validate", profile], checkout),
        "remirror plan": median([remirror, "plan", profile], checkout),
        "remirror status": median([remirror, "status", profile], checkout),
        "agent on site B: one observe": median(agent, checkout, observe),
    }
    found = {module: imports(python, module, checkout) for module in MODULES if importable(python, module)}
    commit = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    results = {"commit": commit.stdout.strip(), "runs": RUNS, "seconds": seconds, "imports": found}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "startup.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [f"| {results['commit']} ({RUNS} runs, median) | seconds |", "|---|---|"]
    lines += [f"| `{name}` | {value:.1f} |" for name, value in seconds.items()]
    lines += [f"| `import {module}` | {imported['total_s']} |" for module, imported in found.items()]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
