"""The DR site defends itself: site B's agent, reached over real SSH, speaks only remirror's
closed protocol (remirror.agent.policy, docs/security.md).

What an attacker holding the primary (and its SSH key) would send site B, in the protocol's
own format, is refused and changes nothing there; with the forced command of the Ansible
role's authorized_keys line, the key runs nothing but the agent; and a ransomware run on the
primary leaves site B the point it took of its own leg, which it restores. About 80 s: one
small sync mirror (a 256 MiB disk), and one agent on site B answers every attack.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.agent.client import AgentClient
from remirror.agent.digest import data_offset
from remirror.errors import SiteError
from remirror.lab.spec import IDENTITY_FILE, KNOWN_HOSTS, LAB_DIR, SITE_B_ADDRESS
from remirror.profile.model import Site, SshOptions
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import md_digest, remirror, wait_in_sync, write_random

MiB = 1024 * 1024
OTHER_DISK = "/dev/lab/b1"  # not named by the profile site B holds in these tests
SCOPED_DISK = "/dev/lab/b3"  # the replica's disk, under site B's own points
MD = "/dev/md/sec0"
VOLUME = "/dev/mapper/remirror-sec0.site-b-cdp"  # site B's leg: the volume over its own points
MARKER = "/var/tmp/remirror-security-ran"
SITE_B_PROFILE = Path("/etc/remirror/security.yaml")  # site B's own view: itself local
MIRROR = """\
  - name: sec0
    primary: {site: site-a, disk: /dev/lab/a3}
    replicas:
      - {site: site-b, disk: /dev/lab/b3, portal: "192.0.2.2:3260", points: {every: 1d, keep: 7d}}
    replication: {mode: sync, bitmap_chunk: 1MiB}
    iscsi: {timeouts: lan}
"""
SITE_B_VIEW = f"""\
version: 1
name: security
sites:
  site-a: {{host: "ssh://root@site-a"}}
  site-b: {{host: local}}
mirrors:
{MIRROR}"""
# The primary's: not in /etc/remirror, where the lab's site B (which shares /etc) would read it too.
SITE_A_PROFILE = Path("/run/remirror-security.yaml")
SITE_A_VIEW = f"""\
version: 1
name: security
sites:
  site-a: {{host: local}}
  site-b:
    host: ssh://root@site-b
    ssh: {{identity_file: {IDENTITY_FILE}, known_hosts: {KNOWN_HOSTS}}}
mirrors:
{MIRROR}"""


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
    """A mirror whose DR leg lies under site B's own points, site B holding its own view of the
    profile (what it names is all a request may touch), and one agent there for every request:
    it goes on answering after a refusal."""
    on_b("rm", "-f", MARKER)
    for disk in ("/dev/lab/a3", SCOPED_DISK):  # blank heads: no --allow-destructive needed
        sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=64", "oflag=direct", "status=none")
    SITE_B_PROFILE.write_text(SITE_B_VIEW)
    SITE_A_PROFILE.write_text(SITE_A_VIEW)
    code, out, err = remirror("apply", "--yes", str(SITE_A_PROFILE))
    assert code == 0, out + err
    assert "CreatePoints" in out, out
    wait_in_sync(MD)
    client = site_b()  # the agent reads the site's profiles as it starts
    try:
        yield client
    finally:
        client.close()
        remirror("destroy", "--yes", str(SITE_A_PROFILE), "sec0", ok_codes=(0, 1))
        SITE_B_PROFILE.unlink(missing_ok=True)  # the next modules' site B holds no profile
        for disk in ("/dev/lab/a3", SCOPED_DISK):  # the points' metadata too: wipefs knows none of it
            sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=64", "oflag=direct", "status=none")


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


def on_site_b(*args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    """`remirror ARGS` run on site B itself, with its own view of the profile (as its operator would)."""
    return on_b("remirror", *args, ok_codes=ok_codes).stdout


def leg_digests(device: str, regions: dict[int, int]) -> dict[int, str]:
    """sha256 of each region of the mirror's data as it lies on a leg (past md's data offset)."""
    base = data_offset(device)
    return {offset: md_digest(base + offset, size, device) for offset, size in regions.items()}


def test_ransomware_on_the_primary_leaves_site_b_its_own_point_to_restore(attacked: AgentClient) -> None:
    regions = {0: 4 * MiB, 40 * MiB: 4 * MiB, 120 * MiB: 4 * MiB}
    written = {offset: write_random(offset, size, MD) for offset, size in regions.items()}
    # Yesterday's point, taken by site B itself (its `cdp run` would, on its own schedule).
    assert "point #1 taken" in on_site_b("cdp", "point", str(SITE_B_PROFILE), "sec0", "--leg", "--now")
    # The attack: the primary's root encrypts the data (random bytes over it, replicated at once:
    # a sync mirror), then asks site B's agent, in the protocol's own format, to delete every
    # point and wipe what holds them.
    for offset, size in regions.items():
        assert write_random(offset, size, MD) != written[offset]
    assert leg_digests(VOLUME, regions) != written  # site B's copy is encrypted too
    points = {"mirror": "sec0.site-b", "md": SCOPED_DISK}
    refused(attacked, {"op": "cdp", "do": "point", **points, "every": 1, "keep": 0, "force": True})
    refused(attacked, {"op": "cdp", "do": "list", **points})
    pool = "remirror-sec0.site-b-cdp-pool"
    refused(
        attacked,
        {"op": "run", "steps": [{"kind": "run", "argv": ["dmsetup", "message", pool, "0", "delete", "1"]}]},
    )
    refused(attacked, {"op": "run", "steps": [{"kind": "run", "argv": ["dmsetup", "remove", pool]}]})
    zero = ["dd", "if=/dev/zero", f"of={SCOPED_DISK}", "bs=4096", "count=1", "oflag=direct", "status=none"]
    refused(attacked, {"op": "run", "steps": [{"kind": "run", "argv": zero}]})
    refused(
        attacked,
        {"op": "run", "steps": [{"kind": "run", "argv": ["mdadm", "--zero-superblock", SCOPED_DISK]}]},
    )
    # What the protocol lets it ask about the points, building them again, finds them there.
    stack = {
        "kind": "cdp_stack",
        **points,
        "chunk": 64 * 1024,
        "history": 25,
        "fresh": True,
        "allow_data": True,
    }
    assert attacked.run([stack]) == [{"ok": True}]
    # And the primary's own cdp verbs have no points of site B to reach.
    _, _, err = remirror("cdp", "list", str(SITE_A_PROFILE), "sec0", "--leg", ok_codes=(3,))
    assert "keeps no points of its own leg" in err
    # Site B still has yesterday's point, and restores it: the data as written before the attack.
    listed = on_site_b("cdp", "list", str(SITE_B_PROFILE), "sec0", "--leg")
    assert listed.startswith("#1 "), listed
    shown = on_site_b("cdp", "restore", str(SITE_B_PROFILE), "sec0", "--leg", "--at", "1", "--view")
    view = shown.split(" is ")[1].split()[0]
    assert leg_digests(view, regions) == written
