"""docs/quickstart.md, run as written: two hosts with nothing of remirror's, the Debian package
installed on both, `remirror init` at the primary, its files and key carried to the DR host by
the page's commands, apply, and the mirror MIRRORED with `remirror check` OK.

The commands are read from the page itself (its blocks marked `<!-- quickstart: both -->` or
`primary`), with the page's example names put to the lab's: the page cannot drift from what
works. What init says and writes besides is checked on the way, and the one profile is the
same file on both hosts, each finding its own site in it by its host name.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts.lab import HostsLab
from remirror.lab.hosts.machine import Host
from tests.hosts_lab.conftest import CHECKOUT
from tests.hosts_lab.mirror import SLOW, wait_mirrored

PAGE = CHECKOUT / "docs" / "quickstart.md"
A_DISK, B_DISK = "/dev/disk/by-id/virtio-a0", "/dev/disk/by-id/virtio-b0"
# The page's example names (its table's "here" column), and the lab's.
NAMES = {
    "files.example.net": "site-a",
    "backup.example.net": "site-b",
    "/dev/disk/by-id/ata-EXAMPLE_DISK_0001": A_DISK,
    "/dev/disk/by-id/ata-EXAMPLE_DISK_0002": B_DISK,
}
PROFILE = "/etc/remirror/data.yaml"


def blocks(page: Path) -> list[tuple[str, str]]:
    """(where, commands) of each marked block, in the page's order, with the lab's names."""
    found = re.findall(r"<!-- quickstart: (both|primary) -->\n```sh\n(.*?)```", page.read_text(), re.S)
    assert len(found) >= 6, f"{page}: {len(found)} marked blocks"
    named = []
    for where, text in found:
        for example, lab in NAMES.items():
            text = text.replace(example, lab)
        named.append((where, text))
    return named


@pytest.fixture(scope="module")
def lab(work: Path) -> Iterator[HostsLab]:
    hosts = HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"]}, checkout=CHECKOUT)
    try:
        hosts.boot_all()
        yield hosts
    finally:
        hosts.stop()


def run_block(host: Host, text: str) -> str:
    """A block's commands as an administrator pastes them, stopping at the first that fails."""
    return host.run(f"bash -e -c {shlex.quote(text)}", timeout=SLOW).stdout


def test_the_quickstart_as_written_from_nothing_to_a_checked_mirror(lab: HostsLab) -> None:
    a, b = lab["site-a"], lab["site-b"]
    page = blocks(PAGE)
    debs = sorted((CHECKOUT / "build" / "deb").glob("remirror_*.deb"))
    assert debs, "no package in build/deb: ./dev deb builds it"
    named = re.search(r"apt-get install \./(remirror_\S+\.deb)", page[0][1])
    assert named, page[0][1]
    for host in (a, b):
        assert host.run("command -v remirror", check=False).returncode != 0  # nothing of remirror's
        host.put(debs[-1], f"/root/{named.group(1)}")  # downloaded under the page's name
    # The administrator's own SSH access from the primary to the DR host (the page asks for it).
    a.run("ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519 && ssh-keyscan -t ed25519 site-b"
          " >> /root/.ssh/known_hosts 2>/dev/null")  # fmt: skip
    b.run(
        f"echo {shlex.quote(a.run('cat /root/.ssh/id_ed25519.pub').stdout.strip())} >> /root/.ssh/authorized_keys"
    )
    # Before the page: a disk that holds something is named for what it holds.
    a.run("apt-get install -y -q ./" + named.group(1), timeout=SLOW)
    a.run(f"mkfs.ext4 -q -L old {A_DISK}")
    said = a.run(
        f"remirror init --yes --profile /root/first.yaml --primary site-a --primary-disk {A_DISK}"
        f" --dr site-b --dr-disk {B_DISK}",
        timeout=SLOW,
    ).stdout
    assert f"{A_DISK}: holds ext4 filesystem labelled 'old'" in said, said
    assert "(apply refuses it unless told: docs/safety.md)" in said, said
    a.run(f"rm /root/first.yaml && wipefs -q -a {A_DISK}")  # the administrator clears it

    outputs: dict[tuple[int, str], str] = {}
    for number, (where, text) in enumerate(page, 1):
        for host in (a, b) if where == "both" else (a,):
            outputs[number, host.name] = run_block(host, text)
        if number == 2:  # init: what it wrote and says, before its files go to the DR host
            init = outputs[number, "site-a"]
            assert f"{A_DISK}: blank" in init, init
            assert "Kept remirror's SSH key" in init, init  # made by the first run
            resolved = a.run("getent ahostsv4 site-b").stdout.split()[0]  # as the primary finds it
            assert f"iSCSI: site-b's target will listen on {resolved}:3260" in init, init
            (line,) = [t.strip() for t in init.splitlines() if t.strip().startswith('command="remirror')]
            assert re.fullmatch(
                r'command="remirror agent --serve",restrict ssh-ed25519 \S+ remirror@site-a', line
            )
            assert a.run("stat -c %a /etc/remirror /etc/remirror/id_ed25519").stdout.split() == ["700", "600"]
            assert a.run("test -e /etc/remirror/site", check=False).returncode != 0  # its host name says it
        if number == 4:  # apply done and the units enabled: the initial sync, then the page's look
            wait_mirrored(a, profile=PROFILE, md="/dev/md/data")
    # The same file on both hosts, each finding its own site in it.
    assert a.run(f"sha256sum < {PROFILE}").stdout == b.run(f"sha256sum < {PROFILE}").stdout
    assert "this host: site site-a (its host name site-a)" in a.run(f"remirror validate {PROFILE}").stdout
    assert "this host: site site-b (its host name site-b)" in b.run(f"remirror validate {PROFILE}").stdout
    for unit in ("remirror-watch@data.service", "remirror-check@data.timer"):
        assert a.run(f"systemctl is-active {unit}").stdout.strip() == "active", unit
    assert a.run("systemctl is-enabled remirror-start@data.service").stdout.strip() == "enabled"
    assert b.run("systemctl is-enabled remirror-start@data.service").stdout.strip() == "enabled"
    checked = a.run(f"remirror check {PROFILE}", check=False, timeout=SLOW)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.startswith("REMIRROR OK"), checked.stdout
    # The mail line: cron runs it as written, and it says nothing while the mirror is OK.
    (cron,) = [t for t in a.run("cat /etc/cron.d/remirror-data").stdout.splitlines() if t.strip()]
    job = cron.split(" root ", 1)[1]
    quiet = a.run(f"sh -c {shlex.quote(job)}", timeout=SLOW)
    assert quiet.stdout == "", quiet.stdout
