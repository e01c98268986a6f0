"""The role's DR drill tasks (tasks/drills.yml), run by ansible-playbook on this host into a
scratch directory: a DR site whose replica has `drill:` gets its timer's schedule, or without
systemd a cron line; a site without one gets neither. What the timer runs is `remirror drill
PROFILE`, shown on a real kernel in tests/lab/test_security.py (TestDrills)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.host.ansible_play import ROLE, run_tasks

PROFILE = {
    "mirrors": [
        {
            "name": "db",
            "primary": {"site": "hq", "disk": "/dev/sdb"},
            "replicas": [{"site": "dr", "disk": "/dev/sdb", "points": {"every": "1h", "keep": "7d"},
                          "drill": {"every": "7d"}}],
        },
        {"name": "files", "primary": {"site": "hq", "disk": "/dev/sdc"},
         "replicas": [{"site": "dr", "disk": "/dev/sdc"}]},
    ]
}  # fmt: skip


def _run(tmp_path: Path, site: str) -> None:
    tasks = []
    for task in YAML(typ="safe").load((ROLE / "tasks/drills.yml").read_text()):
        copy = task.get("ansible.builtin.copy")
        if copy is None or "content" not in copy:
            continue  # the unit files and systemctl: the host's own, not a scratch directory's
        copy.update(dest=str(tmp_path / Path(copy["dest"]).name), owner=None, group=None)
        task["when"] = "remirror_drill_mirrors | length > 0"
        tasks.append(task)
    variables: dict[str, Any] = {
        "remirror_profile_data": PROFILE,
        "remirror_drill_mirrors": f"{{{{ remirror_profile_data | remirror.remirror.drill_mirrors('{site}') }}}}",
        "remirror_profile_name": "remirror",
        "remirror_profile_path": "/etc/remirror/remirror.yaml",
        "remirror_command": "/usr/local/bin/remirror",
        "remirror_drill_on_calendar": "Sat *-*-* 02:00:00",
        "remirror_drill_cron": "0 2 * * 6",
    }
    run_tasks(tmp_path, tasks, variables)


def test_a_dr_site_with_a_drill_gets_its_schedule_and_cron_line(tmp_path: Path) -> None:
    _run(tmp_path, "dr")
    timer = (tmp_path / "schedule.conf").read_text()
    assert "OnCalendar=\nOnCalendar=Sat *-*-* 02:00:00\n" in timer
    assert "when to drill db\n" in timer  # `files` has no drill
    cron = (tmp_path / "remirror-remirror-drill").read_text()
    assert "0 2 * * 6 root out=$(/usr/local/bin/remirror drill /etc/remirror/remirror.yaml 2>&1)" in cron


def test_a_site_without_a_drilled_replica_gets_nothing(tmp_path: Path) -> None:
    _run(tmp_path, "hq")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["play.yml"]
