"""Three sites: a primary with a replica at each of two DR sites, on separate hosts with systemd:
the N-way mirror of Mariner, in "Efficient Logging and Replication Techniques for Comprehensive
Data Protection" (Maohua Lu, Shibiao Lin and Tzi-cker Chiueh).

One DR site loses its power: the primary goes on with the other in sync. Then the primary
loses its power: the remaining DR site's leg alone holds every acknowledged write. Both boot
with nobody typing anything: the primary's start assembles the mirror, and the reconciler
brings the first DR site back by the bitmap.

The three hosts are installed as an operator with Ansible installs them: site.yml run from
this machine (the controller) against the hosts, which installs remirror on every site from
its Debian package, deploys the key and the one profile (each host told its site), applies the profile from
site-a and enables its units (docs/ansible.md). A last test runs it again in check mode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from remirror.lab.hosts.lab import SITE_KEY, HostsLab
from remirror.lab.hosts.machine import Host
from tests.hosts_lab.ansible import APPLY_TASK, PROFILE_TASK, Run, inventory, playbook
from tests.hosts_lab.conftest import CHECKOUT, OUT
from tests.hosts_lab.mirror import (
    B_LEG,
    MD,
    MD_SYSFS,
    MIRRORS,
    PROFILE,
    RECORDS,
    SSH,
    WRITER,
    Writer,
    boot_together,
    legs_agree,
    mirror_in_use,
    replica_holds,
    wait_mirrored,
    wait_started_and_mounted,
    written_sectors,
)

C_LEG = "/dev/disk/by-id/virtio-c0"
B_REPLICA = f'      - {{site: site-b, disk: {B_LEG}, portal: "192.0.2.2:3260"}}\n'
C_REPLICA = f'      - {{site: site-c, disk: {C_LEG}, portal: "198.51.100.3:3260"}}\n'
assert B_REPLICA in MIRRORS  # the two sites' mirror, with a replica at site-c too
THREE = MIRRORS.replace(B_REPLICA, B_REPLICA + C_REPLICA)


# One profile for the three sites, the same file on each: every site by the name the others
# reach it at (its host name, in /etc/hosts on each host's links).
ONE_PROFILE = (
    "version: 1\nname: m\nsites:\n"
    + "".join(f"  {site}: {{host: 'ssh://root@{site}', {SSH}}}\n" for site in ("site-a", "site-b", "site-c"))
    + THREE
)


@dataclass
class Deployed:
    """The three hosts as the playbook left them, and its first run."""

    lab: HostsLab
    inventory: Path
    first_run: Run

    def __getitem__(self, name: str) -> Host:
        return self.lab[name]


@pytest.fixture(scope="module")
def sites(work: Path) -> Iterator[Deployed]:
    """Three hosts, remirror installed and the mirror applied by the Ansible role (site.yml, run
    from here: the controller on this machine, as on an operator's laptop), then in use."""
    lab = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"], "site-c": ["c0"]}, checkout=CHECKOUT)
    try:
        lab.boot_all()
        hosts = inventory(lab, work / "inventory", YAML(typ="safe").load(ONE_PROFILE), lab.site_key())
        first = playbook(lab, hosts, out=OUT / "ansible")
        mirror_in_use(lab)
        yield Deployed(lab, hosts, first)
    finally:
        lab.stop()


def test_the_playbook_installs_every_site_and_leaves_the_primary_its_units(sites: Deployed) -> None:
    """What the role did on each host: remirror from its Debian package, the key for root only
    and behind the agent's forced command, the same profile on every site and its site's name, LIO's restore
    and iscsid enabled, remirror-start@ enabled; at the primary, the units that reconcile the
    mirror and check it (docs/ansible.md)."""
    assert "changed: [site-a]" in sites.first_run.task(APPLY_TASK), sites.first_run.task(APPLY_TASK)
    deb = sorted((CHECKOUT / "build" / "deb").glob("remirror_*.deb"))[-1]
    for name, host in sites.lab.hosts.items():
        version = host.run("dpkg-query -W -f '${Version}' remirror").stdout
        assert deb.name.startswith(f"remirror_{version}_"), (name, version)
        assert host.run("readlink -f /usr/bin/remirror").stdout.strip() == "/opt/venvs/remirror/bin/remirror"
        assert host.run("test -e /etc/systemd/system/remirror-start@.service", check=False).returncode != 0
        assert host.run(f"stat -c %a {SITE_KEY} /etc/remirror").stdout.split() == ["600", "700"], name
        assert (
            'command="remirror agent --serve",restrict ' in host.run("cat /root/.ssh/authorized_keys").stdout
        )
        # The one profile, as every other site holds it (what a DR site's operator promotes
        # from), and which site of it this host is.
        deployed = YAML(typ="safe").load(host.run(f"cat {PROFILE}").stdout)
        assert deployed == YAML(typ="safe").load(ONE_PROFILE), (name, deployed)
        assert host.run("cat /etc/remirror/site").stdout == f"{name}\n"
        # Every site starts its part at boot: a primary its array, a DR site its export.
        enabled = host.run("systemctl is-enabled iscsid rtslib-fb-targetctl remirror-start@m.service")
        assert enabled.stdout.split() == ["enabled"] * 3, (name, enabled.stdout)
    a = sites["site-a"]
    assert (
        a.run("systemctl is-active remirror-watch@m.service remirror-check@m.timer").stdout.split()
        == ["active"] * 2
    )
    for replica in ("site-b", "site-c"):
        shown = sites[replica].run("systemctl is-enabled remirror-watch@m.service", check=False).stdout
        assert shown.strip() != "enabled", shown


def test_with_a_replica_at_each_of_two_sites_the_last_one_standing_holds_every_acknowledged_write(
    sites: Deployed, record_property: Callable[[str, object], None]
) -> None:
    a, b, c = sites["site-a"], sites["site-b"], sites["site-c"]
    wait_mirrored(a)
    load = Writer(a)
    load.wait_for_more(100)
    c.power_cut()
    cut_at = load.acknowledged
    load.wait_for(cut_at + 100)  # site-c's leg failed, site-b's in sync: the primary goes on
    assert a.run("cat /sys/block/md*/md/degraded").stdout.strip() == "1"
    a.power_cut()
    last = load.ended()
    assert replica_holds(b, last, B_LEG) == f"records 0..{last} are all in /mnt/leg/records"
    before_c = 0  # site-c's disk, written since its boot
    boot_together([a, c])
    wait_started_and_mounted(a)
    assert a.run(f"python3 {WRITER} --check {RECORDS} {last}").returncode == 0
    wait_mirrored(a)
    resynced = (written_sectors(c, C_LEG) - before_c) * 512
    record_property("site_c_bytes_written_by_the_rejoin", resynced)
    assert 0 < resynced < 256 * 1024**2 // 4, resynced
    assert legs_agree(a) == "0"


def test_a_second_run_in_check_mode_would_change_the_profile_and_the_mirror_and_nothing_else(
    sites: Deployed,
) -> None:
    """Check mode with a changed profile (async, write-behind 512): the one run shows both what a
    second run would do (change the profile, and the mirror it describes; every other task is
    already as it should be) and that check mode writes nothing. Ansible's check mode asks each
    module whether it would change anything, so a task that is not idempotent reports
    `changed` here too. From site-a alone: the DR sites run the same tasks of the same role."""
    a = sites["site-a"]
    wait_mirrored(a)
    profile = YAML(typ="safe").load(ONE_PROFILE)
    profile["mirrors"][0]["replication"].update({"mode": "async", "write_behind": 512})
    altered = inventory(sites.lab, sites.inventory.parent / "altered", profile, sites.lab.site_key())
    before = {name: host.run(f"cat {PROFILE}").stdout for name, host in sites.lab.hosts.items()}
    run = playbook(sites.lab, altered, "--check", "--diff", "--limit", "site-a", out=OUT / "ansible")
    assert run.changed() == {(PROFILE_TASK, "site-a"), (APPLY_TASK, "site-a")}, run.output[-6000:]
    # The module planned from the profile the run would write; its diff names the change.
    assert f"{MD} backlog 0 -> 512" in run.task(APPLY_TASK), run.task(APPLY_TASK)
    assert {name: host.run(f"cat {PROFILE}").stdout for name, host in sites.lab.hosts.items()} == before
    assert a.run(f"cat {MD_SYSFS}/bitmap/backlog").stdout.strip() == "0"  # still synchronous
    planned = a.run(f"remirror plan --detailed-exitcode {PROFILE}", check=False)
    assert planned.returncode == 0, planned.stdout  # the sites still match the deployed profile
