"""The lab's contract, which later tests and benchmarks rely on exactly."""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.lab import net
from remirror.lab.spec import IDENTITY_FILE, KNOWN_HOSTS, SITE_B_ADDRESS
from remirror.profile import load_profile
from remirror.runner.sites import runner_for_site
from tests.conftest import PROFILES
from tests.lab.conftest import on_b, sh


def test_both_sites_have_their_disks_with_the_right_sizes(lab: dict[str, Any]) -> None:
    paths = {d["path"] for d in lab["disks"]}
    assert {
        "/dev/lab/a0",
        "/dev/lab/a3",
        "/dev/lab/b0",
        "/dev/lab/b3",
        "/dev/lab/a-fast0",
        "/dev/lab/b-fast0",
    } <= paths
    for disk in lab["disks"]:
        assert stat.S_ISBLK(Path(disk["path"]).stat().st_mode), disk["path"]
        size = int(sh("blockdev", "--getsize64", disk["path"]).stdout)
        expected = 64 * 1024**2 if "fast" in disk["path"] else 256 * 1024**2
        assert size == expected == disk["size"], disk["path"]


def test_disks_start_empty() -> None:
    # A fresh lab: no leftover signature a test could mistake for data.
    assert sh("wipefs", "--no-act", "/dev/lab/b1").stdout.strip() == ""


def test_site_b_resolves_and_answers_ssh_with_the_lab_key() -> None:
    assert sh("getent", "hosts", "site-b").stdout.split()[0] == SITE_B_ADDRESS
    done = sh(
        "ssh", "-i", IDENTITY_FILE, "-o", f"UserKnownHostsFile={KNOWN_HOSTS}", "root@site-b", "hostname"
    )
    assert done.stdout.strip() == "site-b"


def test_the_lab_profile_reaches_site_b_over_ssh() -> None:
    profile = load_profile(PROFILES / "lab.yaml")
    remote = runner_for_site("site-b", profile.sites["site-b"])
    try:
        assert remote.run(["hostname"]).stdout.strip() == "site-b"
        # The same checkout's remirror runs on site B too.
        # Python starts slowly under emulation, the more so when the host is busy.
        assert remote.run(["remirror", "validate", str(PROFILES / "lab.yaml")], timeout=600).ok
    finally:
        remote.close()


def test_initiator_names_differ_per_site() -> None:
    a = Path("/etc/iscsi/initiatorname.iscsi").read_text().strip()
    b = on_b("cat", "/etc/iscsi/initiatorname.iscsi").stdout.strip()
    assert a.startswith("InitiatorName=iqn.")
    assert b.startswith("InitiatorName=iqn.")
    assert a != b


def test_no_network_device_leaves_the_vm() -> None:
    site_a = re.findall(r"^\d+: ([^:@]+)", sh("ip", "-o", "link").stdout, flags=re.M)
    site_b = re.findall(r"^\d+: ([^:@]+)", on_b("ip", "-o", "link").stdout, flags=re.M)
    assert sorted(site_a) == ["lo", "veth-a"]
    assert sorted(site_b) == ["lo", "veth-b"]
    # Nothing routes anywhere but the lab's own /24.
    assert "default" not in sh("ip", "route").stdout


def test_kernel_stack_is_ready() -> None:
    modules = Path("/proc/modules").read_text()
    for module in (
        "raid1",
        "dm_writecache",
        "dm_era",
        "dm_delay",
        "iscsi_target_mod",
        "iscsi_tcp",
        "sch_netem",
    ):
        assert re.search(rf"^{module} ", modules, flags=re.M), module
    assert Path("/sys/kernel/config/target").is_dir()
    # iscsid answers (21: no sessions); `sh` raises on anything else, 20 (cannot reach iscsid) too.
    sh("iscsiadm", "-m", "session", ok_codes=(0, 21))


@pytest.fixture
def link_restored() -> Iterator[None]:
    """Whatever a test does to the link, the next test gets it back plain."""
    yield
    net.set_link(True)
    net.clear_wan()
    net.wait_until_reachable()


@pytest.mark.usefixtures("link_restored")
def test_link_down_cuts_site_b_off_and_up_restores_it() -> None:
    assert net.site_b_reachable()
    sh("remirror", "lab", "link", "down")
    assert not net.site_b_reachable()
    assert sh("ssh", "-o", "ConnectTimeout=3", "root@site-b", "true", ok_codes=(255,)).returncode == 255
    sh("remirror", "lab", "link", "up")
    assert net.wait_until_reachable(), "site B did not come back after link up"
    assert sh("ssh", "root@site-b", "hostname").stdout.strip() == "site-b"


@pytest.mark.usefixtures("link_restored")
def test_wan_delay_raises_the_round_trip_in_both_directions() -> None:
    plain = net.round_trip_ms()
    sh("remirror", "lab", "wan", "--delay", "40ms")
    delayed = net.round_trip_ms()
    # netem on both ends: a round trip crosses two delayed egress queues.
    assert delayed >= 80, (plain, delayed)
    assert delayed > plain + 60
    sh("remirror", "lab", "wan", "--clear")
    assert net.round_trip_ms() < delayed - 60


def test_bad_wan_settings_are_refused_before_touching_anything() -> None:
    done = sh("remirror", "lab", "wan", "--delay", "seven", ok_codes=(3,))
    assert "delay 'seven': expected a time such as 7ms" in done.stderr
    assert "netem" not in sh("tc", "qdisc", "show", "dev", "veth-a").stdout
