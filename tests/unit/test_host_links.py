"""The hosts' lab's links as a host finds them inside (remirror.lab.hosts.link): which NIC
reaches which host, from its kernel command line."""

from __future__ import annotations

import pytest

from remirror.cli import main
from remirror.errors import RemirrorError
from remirror.lab.hosts.link import Link, in_hosts_lab, links

# site-a's command line in a three-host lab, as remirror.lab.hosts.machine writes it
# (HostsLab: the first pair on 192.0.2.0/24, then 198.51.100.0/24, 203.0.113.0/24).
SITE_A = (
    "root=LABEL=lab-root rw console=ttyS0 net.ifnames=0 mitigations=off lab.name=site-a"
    " lab.link=52:54:00:01:00:01,192.0.2.1/24 lab.link=52:54:00:02:00:01,198.51.100.1/24"
    " lab.peer=site-b,192.0.2.2 lab.peer=site-c,198.51.100.3"
)
NICS = {"52:54:00:01:00:01": "eth1", "52:54:00:02:00:01": "eth2", "52:54:00:00:00:99": "eth0"}


def test_each_link_is_the_nic_whose_subnet_holds_the_peer() -> None:
    assert links(SITE_A, NICS) == [Link("eth1", ("site-b",)), Link("eth2", ("site-c",))]
    assert Link("enp0s12345678", ()).ifb == "ifb-enp0s123456"  # an interface name: 15 bytes


def test_a_link_whose_nic_is_missing_is_named() -> None:
    with pytest.raises(RemirrorError, match=r"lab.link=52:54:00:02:00:01,198.51.100.1/24"):
        links(SITE_A, {"52:54:00:01:00:01": "eth1"})


def test_only_a_host_of_the_hosts_lab_is_one() -> None:
    assert in_hosts_lab(SITE_A)
    assert not in_hosts_lab("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet")


def test_to_is_refused_outside_the_hosts_lab(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["lab", "link", "down", "--to", "site-b"])
    assert done.value.code == 3  # bad input
    assert "--to is for a host of the hosts' lab" in capsys.readouterr().err
