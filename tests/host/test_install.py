"""Installing remirror as a site would (README, "Install on your sites"): a wheel built from
the checkout, into a fresh venv, run with nothing of the checkout in reach.

The host tier: it builds and installs (pip fetches the build backend and the dependencies,
as on a site); ./dev test runs it, the unit tier does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_wheel_installs_into_a_fresh_venv_with_its_units_and_its_agent_answers(tmp_path: Path) -> None:
    # Without PYTHONPATH: a checkout on it (its src/remirror.egg-info) would pass for an install.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(REPO)], check=True, cwd=tmp_path, env=env
    )
    (wheel,) = wheels.glob("remirror-*-py3-none-any.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    install = [str(venv / "bin/pip"), "install", "--disable-pip-version-check", "-q", str(wheel)]
    subprocess.run(install, check=True, env=env)

    def remirror(*args: str, stdin: str | None = None) -> str:
        # From an empty directory with a bare PATH: nothing of the checkout can be imported.
        done = subprocess.run(
            [venv / "bin/remirror", *args], input=stdin, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return done.stdout

    assert remirror("--version").startswith("remirror, version ")
    where = subprocess.run(
        [venv / "bin/python", "-c", "import remirror; print(remirror.__file__)"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(venv)), where
    share = venv / "share/remirror"
    shipped = sorted(str(p.relative_to(share)) for p in share.rglob("*") if p.is_file())
    for wanted in (
        "contrib/systemd/remirror-watch@.service",
        "contrib/systemd/remirror-check@.timer",
        "contrib/cron.d/remirror",
        "contrib/prometheus/remirror-alerts.yml",
        "contrib/grafana/remirror-dashboard.json",
        "profiles/two-site.yaml",
    ):
        assert wanted in shipped, shipped
    assert "valid profile 'acme'" in remirror("validate", str(share / "profiles/two-site.yaml"))
    # The agent a remote site runs: one request on stdin, one answer (here: "no such request").
    answer = json.loads(remirror("agent", stdin=json.dumps({"op": "nothing-of-the-sort"})))
    assert answer["error"] == "unknown op 'nothing-of-the-sort'", answer
