"""`remirror init` from nothing: two hosts with remirror installed and nothing else (no profile,
no key, no known hosts), init at the primary, the steps it prints carried out as printed, and
apply to MIRRORED with `remirror check` OK. Each host finds its own site in the one profile
init wrote by its host name (site-a, site-b)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts.lab import HostsLab
from tests.hosts_lab.conftest import CHECKOUT
from tests.hosts_lab.mirror import SLOW, wait_mirrored

A_DISK, B_DISK = "/dev/disk/by-id/virtio-a0", "/dev/disk/by-id/virtio-b0"
PROFILE = "/etc/remirror/data.yaml"
SHARED = ("/etc/remirror/data.yaml", "/etc/remirror/id_ed25519", "/etc/remirror/known_hosts")


@pytest.fixture(scope="module")
def lab(work: Path) -> Iterator[HostsLab]:
    hosts = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"]}, checkout=CHECKOUT)
    try:
        hosts.boot_all()
        hosts.install(keys=False)
        yield hosts
    finally:
        hosts.stop()


def test_init_then_its_printed_steps_then_apply_make_a_mirror_that_checks_ok(lab: HostsLab) -> None:
    a, b = lab["site-a"], lab["site-b"]
    assert a.run("test -e /etc/remirror/id_ed25519", check=False).returncode != 0  # nothing yet
    # A disk that holds something is named for what it holds (apply would refuse it).
    a.run(f"mkfs.ext4 -q -L old {A_DISK}")
    said = a.run(
        f"remirror init --yes --primary site-a --primary-disk {A_DISK} --dr site-b --dr-disk {B_DISK}",
        timeout=SLOW,
    ).stdout
    assert f"{A_DISK}: holds ext4 filesystem labelled 'old'" in said, said
    assert "(apply refuses it unless told: docs/safety.md)" in said, said
    a.run(f"rm {PROFILE} && wipefs -q -a {A_DISK}")  # the operator clears it, and runs init again
    said = a.run(
        f"remirror init --yes --primary site-a --primary-disk {A_DISK} --dr site-b --dr-disk {B_DISK}",
        timeout=SLOW,
    ).stdout
    assert f"{A_DISK}: blank" in said, said
    assert "Kept remirror's SSH key" in said, said  # the first run made it
    assert a.run("stat -c %a /etc/remirror /etc/remirror/id_ed25519").stdout.split() == ["700", "600"]
    assert "site-a" in a.run("cat /etc/remirror/known_hosts").stdout
    assert "site-b" in a.run("cat /etc/remirror/known_hosts").stdout
    assert a.run("test -e /etc/remirror/site", check=False).returncode != 0  # found by its host name
    # The steps init printed for the DR host, done as printed: its three files copied over,
    # the authorized_keys line on both hosts (the DR host's and, for a failover, this one's).
    (line,) = [text.strip() for text in said.splitlines() if text.strip().startswith('command="remirror')]
    assert re.fullmatch(r'command="remirror agent --serve",restrict ssh-ed25519 \S+ remirror@site-a', line)
    b.run("mkdir -m 700 -p /etc/remirror")
    for path in SHARED:
        b.write(path, a.run(f"cat {path}").stdout, "0600")
    for host in (a, b):
        host.run(f"echo '{line}' >> /root/.ssh/authorized_keys")
    assert "systemctl enable --now iscsid rtslib-fb-targetctl\n" in said
    assert "systemctl enable remirror-start@data " in said
    b.run("systemctl enable remirror-start@data")
    # Both hosts hold the same file and each finds its own site in it.
    assert a.run(f"sha256sum < {PROFILE}").stdout == b.run(f"sha256sum < {PROFILE}").stdout
    assert "this host: site site-a (its host name site-a)" in a.run(f"remirror validate {PROFILE}").stdout
    assert "this host: site site-b (its host name site-b)" in b.run(f"remirror validate {PROFILE}").stdout
    # Then, as printed, at the primary: plan, apply, the units.
    planned = a.run(f"remirror plan {PROFILE}", timeout=SLOW).stdout
    assert "CreateArray /dev/md/data" in planned, planned
    a.run(f"remirror apply {PROFILE} --yes", timeout=SLOW)
    a.run("systemctl enable remirror-start@data")
    a.run("systemctl enable --now remirror-watch@data remirror-check@data.timer")
    wait_mirrored(a, profile=PROFILE, md="/dev/md/data")
    checked = a.run(f"remirror check {PROFILE}", check=False, timeout=SLOW)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("REMIRROR OK"), checked.stdout
