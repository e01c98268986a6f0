"""The DR site on its own: it defends itself (docs/security.md), and it proves it can take
over (DR drills, docs/drill.md).

Site B's agent, reached over real SSH, speaks only remirror's closed protocol
(remirror.agent.policy): what an attacker holding the primary (and its SSH key) would send
site B, in the protocol's own format, is refused and changes nothing there; with the forced
command of the Ansible role's authorized_keys line, the key runs nothing but the agent. Site
B drills: it starts PostgreSQL on a throwaway copy of its own point while pgbench runs on the
primary, and the mirror never notices (TestDrills). Last, a ransomware run on the primary
leaves site B the point it took of its own leg, which it restores.

One small sync mirror (a 256 MiB disk) with site B's own points for all of it (its build costs
20 s under emulation: one for the module), and one agent on site B answers every attack.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.agent.client import AgentClient
from remirror.agent.digest import data_offset
from remirror.errors import CommandError, SiteError
from remirror.facts.cdp import stack_names
from remirror.lab import database
from remirror.lab.net import in_site_b
from remirror.lab.spec import IDENTITY_FILE, KNOWN_HOSTS, LAB_DIR, SITE_B_ADDRESS
from remirror.profile.model import Site, SshOptions
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import (
    lio_objects,
    md_digest,
    remirror,
    site_views,
    wait_in_sync,
    write_random,
)

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
      - site: site-b
        disk: /dev/lab/b3
        portal: "192.0.2.2:3260"
        points: {every: 1d, keep: 7d}
        drill:
          every: 7d
          run: ["/etc/remirror/lab/drill-check.sh"]
          hooks: {before: /etc/remirror/lab/drill-start.sh, after: /etc/remirror/lab/drill-stop.sh, timeout: 10m}
    replication: {mode: sync, bitmap_chunk: 1MiB}
    iscsi: {timeouts: lan}
"""
# The primary's: not in /etc/remirror, where the lab's site B (which shares /etc) would read it too.
SITE_A_PROFILE = Path("/run/remirror-security.yaml")
SITE_A_VIEW, SITE_B_VIEW = site_views("security", MIRROR, initiators=True)  # each names its initiator
IQN_B = "iqn.2026-11.org.remirror:security.sec0.site-b"  # the replica's target (Profile.replica_iqn)


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
        code, out, err = remirror("destroy", "--yes", str(SITE_A_PROFILE), "sec0", ok_codes=(0, 1))
        # Site B's points stay up after the primary's destroy: only site B takes them down.
        try:
            on_site_b("cdp", "down", str(SITE_B_PROFILE), "sec0", "--leg", ok_codes=(0, 3))  # 3: none there
        except CommandError as error:  # what the destroy before it said: the likely cause
            raise AssertionError(f"{error}; the destroy before it: exit {code}: {out}{err}") from None
        SITE_B_PROFILE.unlink(missing_ok=True)  # the next modules' site B holds no profile
        for disk in ("/dev/lab/a3", SCOPED_DISK):  # the points' metadata too: wipefs knows none of it
            sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=64", "oflag=direct", "status=none")


def points_stack() -> dict[str, str]:
    """The tables of site B's points' stack, by device (all of them there)."""
    names = stack_names("sec0.site-b")
    tables = {name: sh("dmsetup", "table", name, ok_codes=(0, 1)).stdout for name in names.values()}
    assert all(tables.values()), tables
    return tables


def devno(disk: str) -> str:
    """MAJOR:MINOR of a lab disk (site B's are this kernel's too); "0:0" where there is none (the
    module is collected outside the lab by lint)."""
    try:
        number = Path(disk).stat().st_rdev
    except OSError:
        return "0:0"
    return f"{os.major(number)}:{os.minor(number)}"


def dm_create(name: str, device: str) -> dict[str, Any]:
    """The command `dmsetup create NAME --table "0 8 linear DEVICE 0"` (remirror.protocol.commands.DmCreate)."""
    return {
        "kind": "dm_create",
        "name": name,
        "table": {"target": "linear", "sectors": 8, "devices": [device]},
    }


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
    # mdadm --monitor runs a PROGRAM line as root: no field of the catalogue's carries one there.
    "mdadm.conf's PROGRAM hook": {
        "op": "run",
        "steps": [
            {"kind": "mdadm_conf", "arrays": [{"uuid": f"1:2:3:4\nPROGRAM /bin/sh -c 'touch {MARKER}'"}]}
        ],
    },
    "zeroes over a disk it does not name": {
        "op": "run",
        "steps": [
            {"kind": "lio_save", "path": "/etc/target/saveconfig.json"},  # allowed, and not run
            {"kind": "zero_head", "device": OTHER_DISK},
        ],
    },
    "an export of a disk it does not name": {
        "op": "run",
        "steps": [{"kind": "lio_create_backstore", "name": "sec0-evil", "dev": OTHER_DISK}],
    },
    "a read of a disk it does not name": {"op": "digest", "disk": OTHER_DISK, "spans": [[0, 4096]]},
    # Issue 44. A relative path in a table of a device the scope names (sec0's cache at site B),
    # then the allowed cache-head dd on it: the kernel resolves the path from dmsetup's directory.
    "a relative device path in a device-mapper table": {
        "op": "run",
        "steps": [
            dm_create("remirror-sec0-site-b", f"..{OTHER_DISK}"),
            {"kind": "zero_head", "device": "/dev/mapper/remirror-sec0-site-b"},
        ],
    },
    # The same with a word the kernel splits where Python does not (0xA0, which JSON carries as a
    # lone surrogate and the agent's argv as the byte): `MAJ:MIN<0xA0>0` is, to the kernel,
    # the other disk at offset 0 (found by the review of the first fix).
    "a table word the kernel splits in two": {
        "op": "run",
        "steps": [
            dm_create("remirror-sec0-site-b-fast", f"{devno(OTHER_DISK)}\udca00"),
        ],
    },
    # rtslib writes a target parameter into the TPG's `param/NAME`: an absolute name is any file.
    "a file written through a target parameter's name": {
        "op": "run",
        "steps": [
            {
                "kind": "lio_set_parameters",
                "iqn": IQN_B,
                "parameters": {"/etc/cron.d/remirror-evil": f"* * * * * root touch {MARKER}\n"},
            }
        ],
    },
    # A node record's path made of the sender's address and port: lines appended to any file.
    "CHAP values written out of /etc/iscsi": {
        "op": "run",
        "steps": [
            {
                "kind": "node_secrets",
                "target": IQN_B,
                "address": "../../../../var/tmp/a",
                "port": "b/../../../root/.ssh",
                "values": {"node.session.auth.password": "x\nssh-ed25519 AAAA attacker"},
            }
        ],
    },
    "CHAP values written out of /etc/iscsi, with a port number": {
        "op": "run",
        "steps": [
            {
                "kind": "node_secrets",
                "target": IQN_B,
                "address": "../../../../root/.ssh",
                "port": 3260,
                "values": {"node.session.auth.password": "x\nssh-ed25519 AAAA attacker"},
            }
        ],
    },
    # The resolve step's directory, named by the sender: made and filled anywhere under /var.
    "saved writes into a directory the sender names": {
        "op": "run",
        "steps": [{"kind": "save_ranges", "leg": VOLUME, "save": MARKER, "mirror": "sec0", "site": "site-b"}],
    },
    # The lock of site B's own points, held for as long as the agent lives: no point taken meanwhile.
    "a lock on site B's own points": {"op": "lock", "name": "cdp-sec0.site-b", "holder": "backup", "wait": 0},
    # Site B's own points taken down (then, with LIO's export deleted, nothing brought them back).
    "site B's own points taken down": {
        "op": "run",
        "steps": [{"kind": "cdp_deactivate", "mirror": "sec0.site-b", "views": []}],
    },
    # Laid again over what they hold: a new, empty pool where the points were.
    "site B's own points laid fresh": {
        "op": "run",
        "steps": [
            {
                "kind": "cdp_stack",
                "mirror": "sec0.site-b",
                "md": SCOPED_DISK,
                "chunk": 64 * 1024,
                "history": 25,
                "fresh": True,
                "allow_data": True,
            }
        ],
    },
    "site B's own points taken down or up by its verbs": {
        "op": "cdp",
        "do": "down",
        "mirror": "sec0.site-b",
        "md": SCOPED_DISK,
    },
    # Site B's target widened: made again without CHAP, an ACL for another initiator under
    # another CHAP user, a portal on every address; `lio save` would make each permanent.
    "site B's target made again without CHAP": {
        "op": "run",
        "steps": [{"kind": "lio_create_target", "iqn": IQN_B, "chap": False, "parameters": {}}],
    },
    "an ACL on site B's target for another initiator and CHAP user": {
        "op": "run",
        "steps": [
            {
                "kind": "lio_set_acl",
                "iqn": IQN_B,
                "initiator": "iqn.2026-11.org.example:intruder",
                "lun": 0,
                "chap": {"username": "intruder", "password": "intruder-secret"},
            },
            {"kind": "lio_save", "path": "/etc/target/saveconfig.json"},
        ],
    },
    # The profile names site A's initiator (`sites.site-a.initiator`): no ACL for another one, even
    # under the CHAP user and the mutual user the profile gives the target (apply generated them).
    "an ACL on site B's target for an initiator its profile does not name": {
        "op": "run",
        "steps": [
            {
                "kind": "lio_set_acl",
                "iqn": IQN_B,
                "initiator": "iqn.2026-11.org.example:intruder",
                "lun": 0,
                "chap": {
                    "username": "remirror-security-sec0",
                    "password": "intruder-secret-1",
                    "mutual_username": "remirror-security-sec0",
                    "mutual_password": "intruder-secret-2",
                },
            },
        ],
    },
    # A step of a kind, or with a field, the protocol's catalogue does not have: refused as read.
    "a step the catalogue does not have": {"op": "run", "steps": [{"kind": "shell", "argv": ["sh"]}]},
    "a command with an argv of the sender's": {
        "op": "run",
        "steps": [{"kind": "md_stop", "md": MD, "argv": ["sh", "-c", f"touch {MARKER}"]}],
    },
    "site B's target on every address": {
        "op": "run",
        "steps": [{"kind": "lio_create_portal", "iqn": IQN_B, "address": "0.0.0.0", "port": 3260}],  # noqa: S104
    },
    # A name that shares a mirror's prefix: mirror sec0's scope does not reach a mirror sec0-2's.
    "another mirror's device under a shared prefix": {
        "op": "run",
        "steps": [{"kind": "dm_remove", "name": "remirror-sec0-2-cdp-pool"}],
    },
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_requests_outside_the_protocol_are_refused_and_change_nothing(
    attacked: AgentClient, attack: str
) -> None:
    before, saved = head_digest(OTHER_DISK), lio_saved()
    acls_before = sorted(
        p.name for p in Path(f"/sys/kernel/config/target/iscsi/{IQN_B}/tpgt_1/acls").iterdir()
    )
    points_before = head_digest(SCOPED_DISK), points_stack()
    message = refused(attacked, ATTACKS[attack])
    assert "\n" not in message
    left_no_trace()
    assert head_digest(OTHER_DISK) == before
    assert (head_digest(SCOPED_DISK), points_stack()) == points_before  # site B's points as they were
    assert lio_saved() == saved  # the request's allowed first step did not run either
    assert not list(Path("/sys/kernel/config/target/core").glob("*/sec0-evil"))
    tpg = Path(f"/sys/kernel/config/target/iscsi/{IQN_B}/tpgt_1")
    assert sorted(p.name for p in (tpg / "acls").iterdir()) == acls_before  # no ACL added
    assert sorted(p.name for p in (tpg / "np").iterdir()) == ["192.0.2.2:3260"]  # nor a portal
    for made in ("remirror-sec0-site-b", "remirror-sec0-site-b-fast"):  # the site's kernel: one for both
        assert not Path(f"/dev/mapper/{made}").exists()


def test_what_the_sites_profile_names_is_answered(attacked: AgentClient) -> None:
    assert SCOPED_DISK in str(attacked.observe([SCOPED_DISK]))


def authorized_key(tmp_path_factory: pytest.TempPathFactory, command: str) -> Iterator[str]:
    """A key of its own, site B's authorized_keys line for it running `command`, restricted."""
    key = str(tmp_path_factory.mktemp("forced") / "id_ed25519")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "remirror-forced", "-f", key)
    keys = Path(LAB_DIR) / "authorized_keys"
    lab_keys = keys.read_text()
    keys.write_text(lab_keys + f'command="{command}",restrict {Path(key + ".pub").read_text()}')
    try:
        yield key
    finally:
        keys.write_text(lab_keys)


@pytest.fixture(scope="module")
def forced_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A key whose authorized_keys line is the Ansible role's: command="remirror agent --serve",restrict."""
    yield from authorized_key(tmp_path_factory, "remirror agent --serve")


LEASE = 3  # seconds: site B's lease on a remote controller's hold, in the forced command below


@pytest.fixture(scope="module")
def leased_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The forced command with a short lease (REMIRROR_LOCK_LEASE, set by the site's operator)."""
    yield from authorized_key(tmp_path_factory, f"env REMIRROR_LOCK_LEASE={LEASE} remirror agent --serve")


def site_b_locked() -> bool:
    """Whether someone holds site B's `site` lock (its own lock directory, in its namespaces)."""
    return on_b("flock", "-n", "/run/lock/remirror/site.lock", "true", ok_codes=(0, 1)).returncode == 1


def test_a_remote_hold_of_the_site_lock_lasts_while_its_controller_keeps_it_and_lapses_when_it_goes_silent(
    attacked: AgentClient, leased_key: str
) -> None:
    client = site_b(leased_key)
    try:
        client.lock("site", "remirror apply", 0)
        time.sleep(3 * LEASE)  # the controller works elsewhere: its keepalives hold it
        assert site_b_locked()
        assert SCOPED_DISK in str(client.observe([SCOPED_DISK]))
        client._stop_keepalive()  # it goes silent (suspended, hung, or holding it on purpose)
        deadline = time.monotonic() + 120
        while site_b_locked():
            assert time.monotonic() < deadline, "site B's lock is still held"
            time.sleep(0.5)
        # The agent ended: the controller's next request says why, and its hold is not renewed.
        with pytest.raises(CommandError, match="its hold lapsed"):
            client.observe([SCOPED_DISK])
        with pytest.raises(SiteError, match="this command's hold of its lock there ended"):
            client.observe([SCOPED_DISK])
        assert not site_b_locked()
    finally:
        client.close()


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
        assert "step 'run' is not a step of the protocol" in refused(client, ATTACKS["a shell command"])
    finally:
        client.close()
    left_no_trace()


# --- DR drills (docs/drill.md) -------------------------------------------------------------

MOUNT = "/run/remirror-drill-a"
COPY = "/dev/mapper/remirror-sec0.site-b-cdp-drill"
FS_SIZE = 150 * MiB  # the file system (the mirror holds 169 MiB); past it, a tail written once
TAIL = (152 * MiB, 4 * MiB)
CHECK = Path(LAB_DIR) / "drill-check.sh"
START, STOP = Path(LAB_DIR) / "drill-start.sh", Path(LAB_DIR) / "drill-stop.sh"
RECORDS = "/var/lib/remirror/drills/sec0.site-b"
# The operator's drill: the database started on the copy (the before-hook), pgbench's invariant
# checked (the check), the database stopped (the after-hook, whatever the check did). The copy is
# of a running cluster: its postmaster.pid names a process that may exist here (in the lab, the
# primary's own), so it goes first, as on any restore of a running cluster's files.
START_SCRIPT = """#!/bin/sh
set -e
PG=@PG_BIN@
D="$REMIRROR_DRILL_MOUNT/pg"
S=/run/remirror-drill-socket
install -d -o postgres -m 0755 $S
rm -f "$D/postmaster.pid"
runuser -u postgres -- $PG/pg_ctl -D "$D" -w -t 600 -o "-p 5439 -k $S" -l $S/pg.log start || { tail -20 $S/pg.log; exit 1; }
""".replace("@PG_BIN@", str(database.PG_BIN))
STOP_SCRIPT = """#!/bin/sh
runuser -u postgres -- @PG_BIN@/pg_ctl -D "$REMIRROR_DRILL_MOUNT/pg" -m fast -w stop
""".replace("@PG_BIN@", str(database.PG_BIN))
CHECK_SCRIPT = """#!/bin/sh
set -e
PG=@PG_BIN@
S=/run/remirror-drill-socket
sums=$(runuser -u postgres -- $PG/psql -X -At -F ' ' -v ON_ERROR_STOP=1 -h $S -p 5439 -d postgres -c \
  "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(tbalance) FROM pgbench_tellers),
          (SELECT sum(bbalance) FROM pgbench_branches), (SELECT coalesce(sum(delta), 0) FROM pgbench_history),
          (SELECT count(*) FROM pgbench_history)")
set -- $sums
echo "accounts $1 tellers $2 branches $3 history $4 ($5 transactions)"
[ "$1" = "$4" ] && [ "$2" = "$4" ] && [ "$3" = "$4" ] && [ "$5" -gt 0 ]
""".replace("@PG_BIN@", str(database.PG_BIN))


@pytest.fixture(scope="class")
def workload(attacked: AgentClient) -> Iterator[database.Workload]:
    """PostgreSQL on the mirror at site A and pgbench running, for the drills' class; a tail
    past the file system written once; site B's check script in place."""
    on_b("rm", "-rf", RECORDS)
    for script, text in ((CHECK, CHECK_SCRIPT), (START, START_SCRIPT), (STOP, STOP_SCRIPT)):
        script.write_text(text)
        script.chmod(0o755)
    cluster = None
    running = None
    try:
        # Inode tables and journal written now, not by ext4's lazy init behind the tests' backs.
        sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", MD, f"{FS_SIZE // MiB}M")
        write_random(*TAIL, MD)
        sh("mkdir", "-p", MOUNT)
        sh("mount", MD, MOUNT)
        cluster = database.create("a", MOUNT)
        cluster.start()
        database.load(cluster)
        # Its files on the disks before any point, as a database's are that has run a while: ext4
        # may write an appended file's new size before its bytes, and a copy of a moment after
        # `initdb` can hold a postgresql.conf ending in zeros (seen in the lab: PG refuses it).
        sh("sync")
        # 20 transactions a second: what pgbench rewrites after a drill's point is copied in site
        # B's pool, which a 256 MiB lab disk keeps small (57 MiB for history; flat out, pgbench
        # filled it in a minute).
        running = database.Workload(cluster, f"{database.RUN_DIR}/drill").start(2, 3600, rate=20)
        yield running
    finally:
        if cluster is not None:
            cluster.kill()
        if running is not None and running.process.returncode is None:
            running.wait()
        # Unmounted before the tests after the class, which write over the mirror: a killed
        # server's processes may hold it for a moment.
        deadline = time.monotonic() + 60
        while (
            sh("umount", MOUNT, ok_codes=(0, 32)).returncode
            and "remirror-drill-a" in Path("/proc/self/mounts").read_text()
        ):
            assert time.monotonic() < deadline, f"{MOUNT} stays busy"
            time.sleep(1)
        on_b("rm", "-rf", RECORDS)


def status() -> dict[str, Any]:
    _, out, err = remirror("status", "-o", "json", str(SITE_A_PROFILE), ok_codes=(0, 1))
    shown = json.loads(out)
    assert "mirrors" in shown, out + err
    (mirror,) = shown["mirrors"]
    return dict(mirror)


def tail_on_the_replica() -> str:
    """The digest of the tail as it lies on site B's leg (past md's data offset)."""
    return md_digest(data_offset(VOLUME) + TAIL[0], TAIL[1], VOLUME)


def drill_on_b(*args: str) -> subprocess.Popen[str]:
    argv = in_site_b(["remirror", "drill", str(SITE_B_PROFILE), "sec0", "-o", "json", *args])
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(drill: subprocess.Popen[str], codes: tuple[int, ...]) -> dict[str, Any]:
    out, err = drill.communicate(timeout=900)
    assert drill.returncode in codes, f"exit {drill.returncode}: {out}{err}"
    record: dict[str, Any] = json.loads(out)
    return record


def copy_is_gone() -> None:
    for name in (COPY, f"{COPY}-data"):
        assert on_b("test", "-e", name, ok_codes=(0, 1)).returncode == 1, f"{name} was left"
    assert "remirror/drill" not in on_b("cat", "/proc/self/mounts").stdout


def wait_for_copy(drill: subprocess.Popen[str], timeout: float = 300) -> None:
    """Until the drill's copy is there (a drill that ended first fails the test, saying why)."""
    deadline = time.monotonic() + timeout
    while on_b("test", "-e", f"{COPY}-data", ok_codes=(0, 1)).returncode != 0:
        if drill.poll() is not None:
            out, err = drill.communicate()
            pytest.fail(f"the drill ended (exit {drill.returncode}) before its copy appeared: {out}{err}")
        assert time.monotonic() < deadline, "the drill's copy never appeared"
        time.sleep(0.5)


@pytest.mark.usefixtures("attacked")
class TestDrills:
    """DR drills at site B (remirror.drill): PostgreSQL on a copy of its own point while pgbench
    runs at site A; a failing check; a killed drill. A tail of the mirror past the file system,
    written once before, proves by its digest on the replica leg that no drill wrote the leg."""

    def test_a_drill_starts_the_database_on_a_copy_while_pgbench_runs_and_the_mirror_never_notices(
        self, workload: database.Workload, record_property: Callable[[str, object], None]
    ) -> None:
        assert status()["state"] == "MIRRORED"
        tail, exported = tail_on_the_replica(), lio_objects()
        drill = drill_on_b()
        wait_for_copy(drill)
        try:
            during = status()
        except AssertionError as error:
            drill.kill()
            pytest.fail(f"{error}\nthe drill said: {drill.communicate()}")
        record = finished(drill, (0,))
        assert workload.running(), "pgbench stopped"
        assert during["state"] == "MIRRORED", during
        assert record["passed"], record
        assert record["kind"] == "remirror-drill"
        assert record["point_taken_by_drill"]
        # The database started by the before-hook, checked, stopped by the after-hook.
        start, check, stop = record["checks"]
        assert [start["command"], check["command"], stop["command"]] == [str(START), str(CHECK), str(STOP)]
        assert [start["exit_code"], check["exit_code"], stop["exit_code"]] == [0, 0, 0], record["checks"]
        assert "accounts" in check["output"], check
        assert record["rto_seconds"] > 0
        measured = {k: record[k] for k in ("rpo_seconds", "rto_seconds", "started", "finished")}
        record_property("drill", measured)
        assert record["rpo_seconds"] >= 0
        # Nothing reached the replica leg, nothing was exported, nothing resyncs.
        assert tail_on_the_replica() == tail
        assert lio_objects() == exported
        copy_is_gone()
        # pgbench and the database stop here: the later drills need no load, and writes after a
        # point take pool space (copy-on-write) that a 256 MiB lab disk is short of.
        sh("pkill", "-INT", "-x", "pgbench")
        workload.wait()
        workload.cluster.stop()
        # Every byte of the replica leg is the primary's: the drill wrote nothing to it (md would
        # not know: only a comparison shows a write that did not come through the mirror).
        _, compared, _ = remirror("verify", str(SITE_A_PROFILE), "sec0")
        assert "the legs match" in compared, compared
        after = status()
        assert after["state"] == "MIRRORED", after
        assert after["resync"] is None, after
        (replica,) = [leg for leg in after["legs"] if leg["role"] == "replica"]
        assert replica["drill"]["last_passed"] is True, replica
        record_property(
            "pool_used", replica["points"]["pool_used_bytes"] / replica["points"]["pool_total_bytes"]
        )
        # The record, dated, with its summary, on site B (`check` and `metrics` at site A: below).
        listed = on_b("ls", RECORDS).stdout.split()
        assert {"last.json", "last-pass.json"} <= set(listed)
        assert any(n.endswith(".txt") for n in listed)

    def test_a_killed_drill_is_cleaned_up_by_the_next_and_a_failing_check_still_cleans_up(
        self, workload: database.Workload
    ) -> None:
        tail = tail_on_the_replica()
        # A check that holds the copy's mount (its working directory) when the drill is killed.
        drill = drill_on_b("--run", 'cd "$REMIRROR_DRILL_MOUNT" && sleep 600')
        wait_for_copy(drill)
        time.sleep(2)  # the check has started
        drill.send_signal(signal.SIGKILL)  # nsenter execs the drill: this is the drill itself
        drill.wait()
        assert on_b("test", "-e", f"{COPY}-data", ok_codes=(0, 1)).returncode == 0  # left over
        # The next drill removes it (stopping the check left on its mount) before it starts; its
        # own check fails: it is reported failed, and its copy goes too.
        found = subprocess.run(
            in_site_b(
                [
                    "remirror",
                    "drill",
                    str(SITE_B_PROFILE),
                    "sec0",
                    "--at",
                    "1",
                    "--run",
                    "test -e no-such-file",
                ]
            ),
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert found.returncode == 1, found.stdout + found.stderr
        assert "removed what an earlier drill of sec0 left" in found.stdout
        assert "FAILED (exit 1)" in found.stdout
        assert "DR drill of sec0 at site-b: FAILED" in found.stdout
        assert "point    #1 of" in found.stdout
        assert "RTO      none" in found.stdout
        copy_is_gone()
        assert on_b("pgrep", "-f", "sleep 600", ok_codes=(0, 1)).returncode == 1
        assert tail_on_the_replica() == tail
        # Site B's records, seen from site A: the last drill failed, the one before passed.
        _code, out, _ = remirror("check", str(SITE_A_PROFILE), ok_codes=(1,))
        assert "the last drill at site-b FAILED" in out, out
        _, metrics, _ = remirror("metrics", str(SITE_A_PROFILE))
        labels = '{profile="security",mirror="sec0",leg="site-b",role="replica"}'
        assert f"remirror_drill_last_passed{labels} 0" in metrics
        assert f"remirror_drill_last_pass_timestamp_seconds{labels} " in metrics
        # The same observation says the mirror is still MIRRORED (no `status`: one observe less).
        assert 'remirror_mirror_state{profile="security",mirror="sec0",state="MIRRORED"} 1' in metrics

    def test_a_drill_is_refused_where_the_site_runs_the_mirror(self) -> None:
        # Site A's view: site A runs sec0, and has no replica of it to drill.
        _code, _, err = remirror("drill", str(SITE_A_PROFILE), "sec0", ok_codes=(3,))
        assert "no replica of sec0 is this host's" in err


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
    taken = on_site_b("cdp", "point", str(SITE_B_PROFILE), "sec0", "--leg", "--now")
    point = taken.split("point #")[1].split()[0]  # the drills before took points too
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
    # No step of the catalogue sends a pool a message (`delete 1`): the old `run` form is refused.
    refused(
        attacked,
        {"op": "run", "steps": [{"kind": "run", "argv": ["dmsetup", "message", pool, "0", "delete", "1"]}]},
    )
    refused(attacked, {"op": "run", "steps": [{"kind": "dm_remove", "name": pool}]})
    refused(attacked, {"op": "run", "steps": [{"kind": "zero_head", "device": SCOPED_DISK}]})
    refused(attacked, {"op": "run", "steps": [{"kind": "md_zero_superblock", "device": SCOPED_DISK}]})
    stack = {"kind": "cdp_stack", **points, "chunk": 64 * 1024, "history": 25}
    refused(attacked, {"op": "run", "steps": [{**stack, "fresh": True, "allow_data": True}]})
    refused(
        attacked,
        {"op": "run", "steps": [{"kind": "cdp_deactivate", "mirror": points["mirror"], "views": []}]},
    )
    # What the protocol lets it ask about the points, building them again, finds them there.
    assert attacked.run([{**stack, "fresh": False, "allow_data": False}]) == [{"ok": True}]
    # And the primary's own cdp verbs have no points of site B to reach.
    _, _, err = remirror("cdp", "list", str(SITE_A_PROFILE), "sec0", "--leg", ok_codes=(3,))
    assert "keeps no points of its own leg" in err
    # Site B still has yesterday's point, and restores it: the data as written before the attack.
    listed = on_site_b("cdp", "list", str(SITE_B_PROFILE), "sec0", "--leg")
    assert f"#{point} " in listed, listed
    shown = on_site_b("cdp", "restore", str(SITE_B_PROFILE), "sec0", "--leg", "--at", point, "--view")
    view = shown.split(" is ")[1].split()[0]
    assert leg_digests(view, regions) == written
