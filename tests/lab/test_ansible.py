"""The Ansible playbooks (playbooks/, docs/ansible.md) on a real kernel: from site A against site A
(local connection) and site B (SSH), on fresh lab disks, to a working mirror; then `--check` with a
changed profile: it reports that change and no other (every other task is already as it should
be), and makes none. Two playbook runs, not three: a run costs two to three minutes
under emulation (docs/lab.md, Cost), and check mode asks every module the question a second run
would answer.

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
from ruamel.yaml import YAML

from tests.lab.conftest import on_b, sh
from tests.lab.mirror import SLOW, md_sysfs, reconcile_until_mirrored, remirror

MD = "/dev/md/lab1"
PLAYBOOKS = Path(__file__).parents[2] / "playbooks"
PROFILE_PATH = "/etc/remirror/lab1.yaml"
# The lab's two sites share /etc but for iSCSI, LIO and mdadm (remirror.lab.guest): site B's own
# view of the profile lands beside site A's, where on a real DR host it would be in its own /etc.
SITE_B_PROFILE_PATH = "/etc/remirror/lab1.site-b.yaml"
KEYS = "/etc/remirror/lab"  # the lab's SSH key and known hosts for site B: the role deploys them
IDENTITY_FILE, KNOWN_HOSTS = "/etc/remirror/id_ed25519", "/etc/remirror/known_hosts"  # the role's defaults
GENERATED_CHAP = ("/etc/remirror/chap/lab.lab1", "/etc/remirror/chap/lab.lab1.mutual")
SITE_VENV = Path(__file__).parents[2] / "build/site/venv"  # ./dev: the wheel in a fresh venv
COMMAND = Path("/usr/local/bin/remirror")  # the role's link; the lab's own points into the checkout
CRON = "/etc/cron.d/remirror-lab1"  # the lab has no systemd: the role's cron path

# The profile as group_vars hold it, as its primary sees it: the lab's mirror on a1/b1,
# synchronous, with the CHAP secrets remirror makes itself (no `chap:`).
PROFILE = {
    "version": 1,
    "name": "lab",
    "sites": {
        "site-a": {"host": "local"},
        "site-b": {
            "host": "ssh://root@site-b",
            "ssh": {"identity_file": IDENTITY_FILE, "known_hosts": KNOWN_HOSTS},
        },
    },
    "mirrors": [
        {
            "name": "lab1",
            "device": MD,
            "primary": {"site": "site-a", "disk": "/dev/lab/a1"},
            "replicas": [{"site": "site-b", "disk": "/dev/lab/b1", "portal": "192.0.2.2:3260"}],
            "replication": {"mode": "sync", "bitmap_chunk": "1MiB", "on_link_loss": "degrade"},
            "iscsi": {"timeouts": "lan"},
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
                    "remirror_profile_path": SITE_B_PROFILE_PATH,
                }
            }
        },
        "all": {
            "vars": {
                "ansible_become": False,  # root already (no sudo in the lab)
                # remirror installed from its wheel into a fresh venv, as on a site: ./dev made
                # it on the host (the lab has no network for pip, and pip would take minutes
                # under emulation). The role's pip task finds remirror installed there, and
                # links it as /usr/local/bin/remirror: what both sites then run, the apply on
                # site A and the agent SSH starts on site B (the lab's sites share /usr).
                "remirror_venv": str(SITE_VENV),
                "remirror_pip_name": "remirror",
                "remirror_apt_cache_valid_time": 0,
                "remirror_profile_name": "lab1",
                "remirror_profile": profile,
                # One key for every site, as group_vars would hold it (the private half in Vault).
                "remirror_ssh_private_key": Path(f"{KEYS}/id_ed25519").read_text(),
                "remirror_ssh_known_hosts": Path(f"{KEYS}/known_hosts").read_text(),
            }
        },
    }
    path = directory / "hosts.json"
    path.write_text(json.dumps(hosts, indent=1))
    return path


APPLY_TASK = "TASK [remirror : Make the sites match the profile]"
PROFILE_TASK = "TASK [remirror : Write the profile (checked by remirror before it lands)]"


class Run:
    """One ansible-playbook run: its output and PLAY RECAP ({"site-a": {"changed": 0, ...}})."""

    def __init__(self, output: str, recap: dict[str, dict[str, int]]) -> None:
        self.output, self.recap = output, recap

    def changed(self) -> set[tuple[str, str]]:
        """(task title, site) of every task that reported changed."""
        return {
            ("TASK [" + chunk.split("]", 1)[0] + "]", site)
            for chunk in re.split(r"^TASK \[", self.output, flags=re.M)[1:]
            for site in re.findall(r"^changed: \[(site-[ab])\]", chunk, flags=re.M)
        }

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
    """Fresh disks; the inventory; the mirror destroyed and the disks wiped at the end, and
    remirror on PATH the checkout's again, for the modules after this one."""
    assert (SITE_VENV / "bin/remirror").exists(), f"{SITE_VENV} is missing: ./dev lab makes it"
    checkout_link = COMMAND.readlink()
    for disk in ("/dev/lab/a1", "/dev/lab/b1"):
        sh("wipefs", "--all", "--quiet", disk)
    yield inventory(tmp_path_factory.mktemp("ansible"), PROFILE)
    COMMAND.unlink()
    COMMAND.symlink_to(checkout_link)
    remirror("destroy", "--yes", PROFILE_PATH, "lab1", ok_codes=(0, 1, 3))  # 3: never deployed
    # The role's cron entry would reconcile lab1 under the next module's profile of the same name,
    # and site B's agent would hold the next modules' requests to lab1's profiles (remirror.agent.policy).
    for left in (CRON, PROFILE_PATH, SITE_B_PROFILE_PATH, IDENTITY_FILE, KNOWN_HOSTS, *GENERATED_CHAP):
        Path(left).unlink(missing_ok=True)
    for disk in ("/dev/lab/a1", "/dev/lab/b1"):
        sh("wipefs", "--all", "--quiet", disk, ok_codes=(0, 1))


def test_the_playbook_builds_a_working_mirror_on_fresh_disks(hosts: Path) -> None:
    run = playbook(hosts)
    assert "changed: [site-a]" in run.task(APPLY_TASK), run.task(APPLY_TASK)
    # A pass exits 0 only once the mirror is MIRRORED (remirror.reconcile: no `status` needed).
    lines = reconcile_until_mirrored(600, PROFILE_PATH)
    last = lines[-1].splitlines()[-1]  # after any `done:` lines of its repairs
    assert last.startswith("lab1: "), lines
    assert "MIRRORED" in last, lines
    # Both sites ran remirror as installed from its wheel, nothing of the checkout.
    for on_site in (sh, on_b):
        assert on_site("readlink", str(COMMAND)).stdout.strip() == str(SITE_VENV / "bin/remirror")
    installed = sh(
        "env",
        "-u",
        "PYTHONPATH",
        "-C",
        "/",
        f"{SITE_VENV}/bin/python",
        "-c",
        "import remirror; print(remirror.__file__)",
    )
    assert installed.stdout.startswith(f"{SITE_VENV}/lib/"), installed.stdout
    # The SSH key landed on both sites, for root only (the mirror's CHAP secrets are remirror's).
    for on_site in (sh, on_b):
        assert on_site("stat", "-c", "%a", IDENTITY_FILE, "/etc/remirror").stdout.split() == ["600", "700"]
    # Each site got its own view of the profile: itself local, the other over SSH with the
    # deployed key. Site B's is the copy its operator promotes from (docs/failover.md).
    a_view, b_view = (
        YAML(typ="safe").load(on_b("cat", path).stdout) for path in (PROFILE_PATH, SITE_B_PROFILE_PATH)
    )
    assert a_view["sites"] == PROFILE["sites"], a_view
    keys = {"identity_file": IDENTITY_FILE, "known_hosts": KNOWN_HOSTS}
    assert b_view["sites"] == {
        "site-a": {"host": "ssh://root@site-a", "ssh": keys},
        "site-b": {"host": "local"},
    }
    assert b_view["mirrors"] == a_view["mirrors"] == PROFILE["mirrors"]
    # No systemd in the lab: the reconciler and the check run from cron (on the primary only).
    cron = Path(CRON).read_text()
    assert f"remirror reconcile {PROFILE_PATH}" in cron, cron
    assert f"remirror check -t 120 {PROFILE_PATH}" in cron, cron


def test_a_second_run_in_check_mode_would_change_the_profile_and_the_mirror_and_nothing_else(
    hosts: Path, tmp_path: Path
) -> None:
    """Check mode with a changed profile: the one run shows both what a second run would do (change
    the profile, and the mirror it describes; every other task is already as it should be) and
    that check mode writes nothing. Ansible's check mode asks each module whether it would change
    anything, so a task that is not idempotent reports `changed` here too.

    Site A alone: the primary plans for both sites, and site B runs the same tasks of the same
    role (its view of the profile was read in the test before); under emulation it would add 40 s
    to the lab tier, which is at its budget (docs/lab.md, Cost)."""
    changed = json.loads(json.dumps(PROFILE))
    changed["mirrors"][0]["replication"].update({"mode": "async", "write_behind": 512})
    altered = inventory(tmp_path / "altered", changed)
    before = [sh("cat", path).stdout for path in (PROFILE_PATH, SITE_B_PROFILE_PATH)]
    run = playbook(altered, "--check", "--diff", "--limit", "site-a")
    # What a second run would change: the profile, and the mirror.
    assert run.changed() == {(PROFILE_TASK, "site-a"), (APPLY_TASK, "site-a")}, run.output[-6000:]
    # The module planned from the profile the run would write; its diff names the change.
    assert f"{MD} backlog 0 -> 512" in run.task(APPLY_TASK), run.task(APPLY_TASK)
    assert [
        sh("cat", path).stdout for path in (PROFILE_PATH, SITE_B_PROFILE_PATH)
    ] == before  # nothing written
    assert md_sysfs("bitmap/backlog", MD) == "0"  # still synchronous: no write-behind set
    code, _, _ = remirror("plan", "--detailed-exitcode", PROFILE_PATH, ok_codes=(0, 2))
    assert code == 0  # the sites still match the deployed profile
