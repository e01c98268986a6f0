"""The Ansible playbooks (playbooks/, docs/ansible.md) on a real kernel: from site A against site A
(local connection) and site B (SSH), on fresh lab disks, to a working mirror; a second run changes
nothing; `--check` with a changed profile reports the change without making it.

A mirror of its own (`lab1` on a1/b1, sync mode), built by the playbook and destroyed at the end.
The lab has no systemd: the role's cron path is the one exercised (the units are not started).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.conftest import on_b, sh
from tests.lab.mirror import SLOW, md_sysfs, reconcile_until_mirrored, remirror

MD = "/dev/md/lab1"
PLAYBOOKS = Path(__file__).parents[2] / "playbooks"
PROFILE_PATH = "/etc/remirror/lab1.yaml"
SECRET = "/etc/remirror/lab1.chap"
KEYS = "/etc/remirror/lab"  # the lab's SSH key and known hosts for site B
CRON = "/etc/cron.d/remirror-lab1"  # the lab has no systemd: the role's cron path

# The profile as group_vars hold it: the lab's mirror on a1/b1, synchronous.
PROFILE = {
    "version": 1,
    "name": "lab",
    "sites": {
        "site-a": {"host": "local"},
        "site-b": {
            "host": "ssh://root@site-b",
            "ssh": {"identity_file": f"{KEYS}/id_ed25519", "known_hosts": f"{KEYS}/known_hosts"},
        },
    },
    "mirrors": [
        {
            "name": "lab1",
            "device": MD,
            "primary": {"site": "site-a", "disk": "/dev/lab/a1"},
            "replicas": [{"site": "site-b", "disk": "/dev/lab/b1", "portal": "192.0.2.2:3260"}],
            "replication": {"mode": "sync", "bitmap_chunk": "1MiB", "on_link_loss": "degrade"},
            "iscsi": {
                "chap": {"username": "lab1", "password_file": SECRET, "mutual": True},
                "timeouts": "lan",
            },
        }
    ],
}


def inventory(directory: Path, profile: dict[str, object]) -> Path:
    """An inventory like playbooks/inventory.example: site A local, site B over SSH."""
    directory.mkdir(parents=True, exist_ok=True)
    python = "/usr/bin/python3"
    hosts = {
        "remirror_primaries": {
            "hosts": {"site-a": {"ansible_connection": "local", "ansible_python_interpreter": python}}
        },
        "remirror_replicas": {
            "hosts": {
                "site-b": {
                    "ansible_host": "site-b",
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": f"{KEYS}/id_ed25519",
                    "ansible_ssh_common_args": f"-o UserKnownHostsFile={KEYS}/known_hosts",
                    "ansible_python_interpreter": python,
                }
            }
        },
        "all": {
            "vars": {
                "ansible_become": False,  # root already (no sudo in the lab)
                # This checkout's venv: the lab has no network to install from, and the same
                # filesystem on both sites. The role's pip task finds remirror there.
                "remirror_venv": sys.prefix,
                "remirror_apt_cache_valid_time": 0,
                "remirror_profile_name": "lab1",
                "remirror_profile": profile,
                "remirror_secret_files": {SECRET: "lab1-secret-12", f"{SECRET}.mutual": "lab1-target-16ch"},
            }
        },
    }
    path = directory / "hosts.json"
    path.write_text(json.dumps(hosts, indent=1))
    return path


APPLY_TASK = "TASK [remirror : Make the sites match the profile]"


class Run:
    """One ansible-playbook run: its output and PLAY RECAP ({"site-a": {"changed": 0, ...}})."""

    def __init__(self, output: str, recap: dict[str, dict[str, int]]) -> None:
        self.output, self.recap = output, recap

    def task(self, title: str) -> str:
        """What a task reported: its lines up to the next task."""
        after = self.output.split(title, 1)[1]
        return after.split("\nTASK [", 1)[0]


def playbook(hosts: Path, *args: str) -> Run:
    """Run site.yml from site A, as an operator would; it must end without a failure."""
    home = "/tmp/ansible-home"
    env = {
        "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
        "ANSIBLE_HOME": home,
        "ANSIBLE_LOCAL_TEMP": f"{home}/tmp",
        "ANSIBLE_REMOTE_TEMP": "/tmp/ansible-remote",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": f"{home}/cp",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        # Each task's duration, one JUnit file per run, in the lab's results (lab-out/ansible/).
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit",
        "JUNIT_OUTPUT_DIR": f"{os.environ.get('LAB_OUT', '/tmp')}/ansible",
        "JUNIT_TASK_CLASS": "true",
    }
    # Ansible refuses the C locale that remirror's runner sets: C.UTF-8 for it.
    argv = [
        "env",
        "LC_ALL=C.UTF-8",
        "LANG=C.UTF-8",
        *(f"{k}={v}" for k, v in env.items()),
    ]
    done = sh(
        *argv, str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(hosts), str(PLAYBOOKS / "site.yml"), *args,
        ok_codes=(0, 1, 2, 4), timeout=SLOW,
    )  # fmt: skip
    recap = {
        m["host"]: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m["counts"])}
        for m in re.finditer(r"^(?P<host>site-[ab])\s+:\s+(?P<counts>.*)$", done.stdout, flags=re.M)
    }
    expected = {"site-a"} if "--limit" in args else {"site-a", "site-b"}
    assert set(recap) == expected, done.stdout[-4000:] + done.stderr[-2000:]
    failed = done.returncode != 0 or sum(counts["failed"] for counts in recap.values()) > 0
    assert not failed, done.stdout[-4000:] + done.stderr[-2000:]
    return Run(done.stdout, recap)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Fresh disks; the inventory; the mirror destroyed and the disks wiped at the end."""
    for disk in ("/dev/lab/a1", "/dev/lab/b1"):
        sh("wipefs", "--all", "--quiet", disk)
    yield inventory(tmp_path_factory.mktemp("ansible"), PROFILE)
    remirror("destroy", "--yes", PROFILE_PATH, "lab1", ok_codes=(0, 1, 3))  # 3: never deployed
    # The role's cron entry would reconcile lab1 under the next module's profile of the same name.
    Path(CRON).unlink(missing_ok=True)
    for disk in ("/dev/lab/a1", "/dev/lab/b1"):
        sh("wipefs", "--all", "--quiet", disk, ok_codes=(0, 1))


def test_the_playbook_builds_a_working_mirror_on_fresh_disks(hosts: Path) -> None:
    run = playbook(hosts)
    assert "changed: [site-a]" in run.task(APPLY_TASK), run.task(APPLY_TASK)
    reconcile_until_mirrored(600, PROFILE_PATH)
    _, out, _ = remirror("status", PROFILE_PATH, "-o", "json")
    (report,) = json.loads(out)["mirrors"]
    assert report["state"] == "MIRRORED", report
    # The profile and the secrets landed, secrets for root only. (The lab's site B shares site
    # A's /etc but for iSCSI, LIO and mdadm: what the role writes there lands in the same place.)
    for on_site in (sh, on_b):
        assert on_site("stat", "-c", "%a", SECRET).stdout.strip() == "600"
        assert on_site("stat", "-c", "%a", "/etc/remirror").stdout.strip() == "700"
        assert "lab1" in on_site("cat", PROFILE_PATH).stdout
    # No systemd in the lab: the reconciler and the check run from cron (on the primary only).
    cron = Path(CRON).read_text()
    assert f"remirror reconcile {PROFILE_PATH}" in cron, cron
    assert f"remirror check -t 120 {PROFILE_PATH}" in cron, cron


def test_a_second_run_changes_nothing(hosts: Path) -> None:
    run = playbook(hosts)
    assert run.recap["site-a"]["changed"] == run.recap["site-b"]["changed"] == 0, run.output[-6000:]
    assert "ok: [site-a]" in run.task(APPLY_TASK)


def test_check_mode_reports_a_changed_profile_without_making_the_change(hosts: Path, tmp_path: Path) -> None:
    changed = json.loads(json.dumps(PROFILE))
    changed["mirrors"][0]["replication"].update({"mode": "async", "write_behind": 512})
    altered = inventory(tmp_path / "altered", changed)
    before = sh("cat", PROFILE_PATH).stdout
    # Site A alone: the primary plans for both sites, and site B's part of the first play (the
    # packages, the profile) would only repeat, at the cost of a minute under emulation, what the
    # first two tests showed.
    run = playbook(altered, "--check", "--diff", "--limit", "site-a")
    # The module planned from the profile the run would write, and found the change.
    assert "changed: [site-a]" in run.task(APPLY_TASK), run.task(APPLY_TASK)
    assert sh("cat", PROFILE_PATH).stdout == before  # nothing written
    assert md_sysfs("bitmap/backlog", MD) == "0"  # still synchronous: no write-behind set
    code, _, _ = remirror("plan", "--detailed-exitcode", PROFILE_PATH, ok_codes=(0, 2))
    assert code == 0  # the sites still match the deployed profile
