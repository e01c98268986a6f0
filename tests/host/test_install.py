"""Installing remirror as a site would (README, "Install on your sites"): a wheel built from
the checkout, into a fresh venv, run with nothing of the checkout in reach.

The host tier: ./dev builds and installs before it (build/site/, pip fetching the build
backend and the dependencies, as on a site); ./dev test runs it, the unit tier does not.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


SITE_INSTALL = REPO / "build/site"  # ./dev makes it: a wheel of the checkout in a fresh venv


def test_a_wheel_installs_into_a_fresh_venv_with_its_units_and_its_agent_answers(tmp_path: Path) -> None:
    # ./dev host builds the wheel and installs it (pip fetches the dependencies, as on a site);
    # the lab tier runs the same install on both lab sites (tests/lab/test_ansible.py).
    wheels = list(SITE_INSTALL.glob("remirror-*-py3-none-any.whl"))
    venv = SITE_INSTALL / "venv"
    assert len(wheels) == 1, f"{SITE_INSTALL}: no wheel, or more than one: run ./dev host, which makes it"
    assert (venv / "bin/remirror").exists(), f"{venv}: no remirror installed: run ./dev host, which makes it"

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
