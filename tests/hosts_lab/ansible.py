"""The Ansible playbooks (playbooks/, docs/ansible.md) run from here against the hosts' lab, as
an operator runs them from a laptop: the controller on this machine, each host reached over
SSH (its control link), the role doing on every site what README's steps do, then the apply
from the primary. The role copies the Debian package `./dev deb` built to each host and installs
it with apt (`remirror_deb`: the hosts have no network, and need none)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from remirror.lab.hosts.lab import HostsLab

PLAYBOOKS = Path(__file__).parents[2] / "playbooks"
APPLY_TASK = "TASK [remirror.remirror.remirror : Make the sites match the profile]"
PROFILE_TASK = "TASK [remirror.remirror.remirror : Write the profile (checked by remirror before it lands)]"


def inventory(lab: HostsLab, directory: Path, profile: dict[str, object], private_key: Path) -> Path:
    """An inventory as playbooks/inventory.example has it: site-a the primary, every other
    host a replica; the profile in group_vars (the same file for every site), one SSH key for
    remirror on every site, and known_hosts lines for every site by the name the profile gives
    it."""
    directory.mkdir(parents=True, exist_ok=True)
    debs = sorted((lab.checkout / "build" / "deb").glob("remirror_*.deb"))
    assert debs, "no package in build/deb: ./dev deb builds it"
    host_keys = {
        name: host.run("cat /etc/ssh/ssh_host_ed25519_key.pub").stdout.split()[:2]
        for name, host in lab.hosts.items()
    }
    known_hosts = "".join(f"{name} {kind} {key}\n" for name, (kind, key) in host_keys.items())

    def reached(name: str) -> dict[str, object]:
        host = lab[name]
        return {
            "ansible_host": "127.0.0.1",
            "ansible_port": host.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(host.image["key"]),
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            "ansible_python_interpreter": "/usr/bin/python3",
        }

    hosts = {
        "remirror_primaries": {"hosts": {"site-a": reached("site-a")}},
        "remirror_replicas": {"hosts": {name: reached(name) for name in lab.hosts if name != "site-a"}},
        "all": {
            "vars": {
                "ansible_become": False,  # root already
                "remirror_deb": str(debs[-1]),  # copied to every site and installed with apt
                "remirror_apt_cache_valid_time": 0,  # the packages are on the image: no index
                "remirror_profile_name": "m",
                "remirror_profile": profile,
                "remirror_ssh_private_key": private_key.read_text(),
                "remirror_ssh_public_key": private_key.with_suffix(".pub").read_text(),
                "remirror_ssh_known_hosts": known_hosts,
            }
        },
    }
    path = directory / "hosts.json"
    path.write_text(json.dumps(hosts, indent=1))
    return path


class Run:
    """One ansible-playbook run: its output and PLAY RECAP ({"site-a": {"changed": 0, ...}})."""

    def __init__(self, output: str, recap: dict[str, dict[str, int]]) -> None:
        self.output, self.recap = output, recap

    def changed(self) -> set[tuple[str, str]]:
        """(task title, site) of every task that reported changed."""
        return {
            ("TASK [" + chunk.split("]", 1)[0] + "]", site)
            for chunk in re.split(r"^TASK \[", self.output, flags=re.M)[1:]
            for site in re.findall(r"^changed: \[(site-[a-z])\]", chunk, flags=re.M)
        }

    def task(self, title: str) -> str:
        """What a task reported: its lines up to the next task."""
        after = self.output.split(title, 1)[1]
        return after.split("\nTASK [", 1)[0]


def playbook(lab: HostsLab, hosts: Path, *args: str, out: Path) -> Run:
    """Run site.yml, as an operator would; it must end without a failure. Each task's duration
    lands in `out` (Ansible's JUnit callback)."""
    home = lab.work / "ansible-home"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": f"{home}/tmp",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": f"{home}/cp",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit",
        "JUNIT_OUTPUT_DIR": str(out),
        "JUNIT_TASK_CLASS": "true",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(hosts), str(PLAYBOOKS / "site.yml"), *args],
        capture_output=True, text=True, env=env, timeout=1200, check=False,
    )  # fmt: skip
    recap = {
        m["host"]: {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m["counts"])}
        for m in re.finditer(r"^(?P<host>site-[a-z])\s+:\s+(?P<counts>.*)$", done.stdout, flags=re.M)
    }
    expected = {"site-a"} if "--limit" in args else set(lab.hosts)
    assert set(recap) == expected, done.stdout[-4000:] + done.stderr[-2000:]
    failed = done.returncode != 0 or sum(counts["failed"] for counts in recap.values()) > 0
    assert not failed, done.stdout[-6000:] + done.stderr[-2000:]
    return Run(done.stdout, recap)
