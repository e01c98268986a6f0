"""Run some of the role's tasks with ansible-playbook on this host (connection local), in a play
of their own: how the host tests try a task against scratch files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

COLLECTIONS = Path(__file__).parents[2] / "playbooks/collections"  # remirror.remirror
ROLE = COLLECTIONS / "ansible_collections/remirror/remirror/roles/remirror"


def run_tasks(tmp_path: Path, tasks: list[dict[str, Any]], variables: dict[str, Any]) -> None:
    """`tasks` with `variables` on localhost, the role's filters available; fails the test on an error."""
    run_play(tmp_path, {"vars": variables, "tasks": tasks})


def run_play(tmp_path: Path, play: dict[str, Any], *args: str) -> str:
    """One play on localhost (its `vars`, `tasks` or `roles`), the collection remirror.remirror
    found; its output, or the test fails on an error."""
    variables = {**play.get("vars", {}), "ansible_python_interpreter": sys.executable}
    whole = [{"hosts": "localhost", "connection": "local", "gather_facts": False, **play, "vars": variables}]
    (tmp_path / "play.yml").write_text(json.dumps(whole))  # JSON is YAML
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            str(tmp_path / "play.yml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
