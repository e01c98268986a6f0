"""The DR site defends itself: site B's agent, reached over real SSH, speaks only remirror's
closed protocol (remirror.agent.policy, docs/security.md).

What an attacker holding the primary (and its SSH key) would send site B, in the protocol's
own format, is refused and changes nothing there; with the forced command of the Ansible
role's authorized_keys line, the key runs nothing but the agent. About 30 s: no mirror is
built, and one agent on site B answers every attack.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.agent.client import AgentClient
from remirror.errors import SiteError
from remirror.lab.spec import IDENTITY_FILE, KNOWN_HOSTS, LAB_DIR, SITE_B_ADDRESS
from remirror.profile.model import Site, SshOptions
from tests.lab.conftest import on_b, sh

MiB = 1024 * 1024
OTHER_DISK = "/dev/lab/b1"  # not named by the profile site B holds in these tests
SCOPED_DISK = "/dev/lab/b3"
MARKER = "/var/tmp/remirror-security-ran"
SITE_B_PROFILE = Path("/etc/remirror/security.yaml")  # site B's own view: itself local
SITE_B_VIEW = f"""\
version: 1
name: security
sites:
  site-a: {{host: "ssh://root@site-a"}}
  site-b: {{host: local}}
mirrors:
  - name: sec0
    primary: {{site: site-a, disk: /dev/lab/a3}}
    replicas: [{{site: site-b, disk: {SCOPED_DISK}, portal: "192.0.2.2:3260"}}]
"""


def site_b(identity: str = IDENTITY_FILE) -> AgentClient:
    """The controller's side of site B's agent, as `remirror apply` on site A has it."""
    ssh = SshOptions(identity_file=identity, known_hosts=KNOWN_HOSTS)
    return AgentClient("site-b", Site(host="ssh://root@site-b", ssh=ssh))


def refused(client: AgentClient, request: dict[str, Any]) -> str:
    with pytest.raises(SiteError) as error:
        client.request(request)
    message = str(error.value)
    assert "refused: " in message, message
    return message


def head_digest(disk: str) -> str:
    return on_b("sh", "-c", f"dd if={disk} bs=1M count=1 status=none | sha256sum").stdout.split()[0]


def lio_saved() -> float:
    saved = Path("/etc/target/saveconfig.json")
    return saved.stat().st_mtime if saved.exists() else 0.0


def left_no_trace() -> None:
    assert on_b("test", "-e", MARKER, ok_codes=(0, 1)).returncode == 1, f"{MARKER} was made on site B"
    assert not Path("/etc/cron.d/remirror-evil").exists()


@pytest.fixture(scope="module")
def attacked() -> Iterator[AgentClient]:
    """Site B holding its own view of a profile (what it names is all a request may touch), and
    one agent there for every request: it goes on answering after a refusal."""
    on_b("rm", "-f", MARKER)
    SITE_B_PROFILE.write_text(SITE_B_VIEW)
    client = site_b()  # the agent reads the site's profiles as it starts
    try:
        yield client
    finally:
        client.close()
        SITE_B_PROFILE.unlink(missing_ok=True)  # the next modules' site B holds no profile


ATTACKS: dict[str, dict[str, Any]] = {
    "a shell command": {"op": "run", "steps": [{"kind": "run", "argv": ["sh", "-c", f"touch {MARKER}"]}]},
    "a cron entry": {
        "op": "run",
        "steps": [
            {
                "kind": "write_file",
                "path": "/etc/cron.d/remirror-evil",
                "content": f"* * * * * root touch {MARKER}\n",
            }
        ],
    },
    "mdadm.conf's PROGRAM hook": {
        "op": "run",
        "steps": [
            {
                "kind": "write_file",
                "path": "/etc/mdadm/mdadm.conf",
                "content": f"PROGRAM /bin/sh -c 'touch {MARKER}'\n",
            }
        ],
    },
    "zeroes over a disk it does not name": {
        "op": "run",
        "steps": [
            {"kind": "lio", "op": "save", "path": "/etc/target/saveconfig.json"},  # allowed, and not run
            {
                "kind": "run",
                "argv": [
                    "dd",
                    "if=/dev/zero",
                    f"of={OTHER_DISK}",
                    "bs=4096",
                    "count=1",
                    "oflag=direct",
                    "status=none",
                ],
            },
        ],
    },
    "an export of a disk it does not name": {
        "op": "run",
        "steps": [{"kind": "lio", "op": "create_backstore", "name": "sec0-evil", "dev": OTHER_DISK}],
    },
    "a read of a disk it does not name": {"op": "digest", "disk": OTHER_DISK, "spans": [[0, 4096]]},
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_requests_outside_the_protocol_are_refused_and_change_nothing(
    attacked: AgentClient, attack: str
) -> None:
    before, saved = head_digest(OTHER_DISK), lio_saved()
    message = refused(attacked, ATTACKS[attack])
    assert "\n" not in message
    left_no_trace()
    assert head_digest(OTHER_DISK) == before
    assert lio_saved() == saved  # the request's allowed first step did not run either
    assert not list(Path("/sys/kernel/config/target/core").glob("*/sec0-evil"))


def test_what_the_sites_profile_names_is_answered(attacked: AgentClient) -> None:
    assert SCOPED_DISK in str(attacked.observe([SCOPED_DISK]))


@pytest.fixture(scope="module")
def forced_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A key whose authorized_keys line is the Ansible role's: command="remirror agent --serve",restrict."""
    key = str(tmp_path_factory.mktemp("forced") / "id_ed25519")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "remirror-forced", "-f", key)
    keys = Path(LAB_DIR) / "authorized_keys"
    lab_keys = keys.read_text()
    keys.write_text(lab_keys + f'command="remirror agent --serve",restrict {Path(key + ".pub").read_text()}')
    try:
        yield key
    finally:
        keys.write_text(lab_keys)


def test_with_the_forced_command_the_key_runs_nothing_but_the_agent(
    attacked: AgentClient, forced_key: str
) -> None:
    # Only this key offered (-F /dev/null: not the lab's own, which the lab's ssh_config adds).
    argv = ["ssh", "-F", "/dev/null", "-i", forced_key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    argv += ["-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "-o", "HostKeyAlias=site-b"]
    done = subprocess.run(
        [*argv, f"root@{SITE_B_ADDRESS}", "sh", "-c", f"'touch {MARKER}; echo ran'"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert "ran" not in done.stdout
    assert "may only speak remirror's agent protocol" in done.stderr
    left_no_trace()
    # The controller speaks the protocol through it: the SSH runner's `env ... remirror agent --serve`.
    client = site_b(forced_key)
    try:
        assert SCOPED_DISK in str(client.observe([SCOPED_DISK]))
        assert "'sh'" in refused(client, ATTACKS["a shell command"])
    finally:
        client.close()
    left_no_trace()
