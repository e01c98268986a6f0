"""The hosts' lab: separate VMs joined by links, with remirror installed as a site installs it.

`HostsLab(work, {"site-a": ["a0"], "site-b": ["b0"]})` makes one host per site, each with its
data disks (virtio serials: /dev/disk/by-id/virtio-a0 inside), and a link between every two
hosts on its own TEST-NET subnet (RFC 5737: routed nowhere). `install` then does on every
host what README, "Install on your sites" says (and the Ansible role does): remirror's wheel
into its venv, LIO's restore and iscsid enabled, the modules loaded at boot, the units in
/etc/systemd/system, one SSH key for remirror on every site with its public half in root's
authorized_keys behind the agent's forced command, and known_hosts. The profile is the tests'
to write (`write_profile`: the same file on every host, each finding its own site by its host
name, remirror.profile.identity).
"""

from __future__ import annotations

import itertools
import shlex
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from remirror.lab.hosts.image import VENV, image_paths
from remirror.lab.hosts.machine import Host, Nic

SUBNETS = ("192.0.2", "198.51.100", "203.0.113")  # TEST-NET-1, -2, -3: one per link
DISK_SIZE = 256 * 1024**2
SITE_KEY = "/etc/remirror/id_ed25519"
KNOWN_HOSTS = "/etc/remirror/known_hosts"


class HostsLab:
    """Hosts by site name; `boot_all`, `install`, `stop` (every QEMU ends, the disks stay in `work`)."""

    def __init__(
        self,
        work: Path,
        disks: dict[str, list[str]],
        *,
        checkout: Path,
        sizes: Mapping[str, int] | None = None,
        memory: str = "1G",
    ):
        """`disks`: each host's data disks by serial; `sizes`: a disk's size by its serial where
        it is not DISK_SIZE; `memory`: each host's (the bench's modelled disks keep their data
        in it)."""
        self.work = work
        self.checkout = checkout
        image = image_paths(checkout)
        if not image["done"].exists():
            raise RuntimeError(
                f"the hosts' lab image is not built ({image['done'].parent}): run ./dev setup as root"
            )
        sizes = sizes or {}
        self.hosts = {
            name: Host(
                name, work, image, {serial: sizes.get(serial, DISK_SIZE) for serial in serials}, memory=memory
            )
            for name, serials in disks.items()
        }
        names = list(self.hosts)
        for index, (one, other) in enumerate(itertools.combinations(names, 2)):
            subnet = SUBNETS[index]
            ends = {one: f"{subnet}.{names.index(one) + 1}", other: f"{subnet}.{names.index(other) + 1}"}
            for me, peer in ((one, other), (other, one)):
                self.hosts[me].nics.append(
                    Nic(
                        netdev=f"link{index}",
                        mac=f"52:54:00:0{index + 1}:00:0{names.index(me) + 1}",
                        address=f"{ends[me]}/24",
                        local=work / f"link{index}-{me}.sock",
                        remote=work / f"link{index}-{peer}.sock",
                    )
                )
                self.hosts[me].peers[peer] = ends[peer]
        for host in self.hosts.values():
            host.create_disks()

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def boot_all(self) -> None:
        for host in self.hosts.values():
            host.start()
        for host in self.hosts.values():
            host.wait_up()

    def install(self, *, keys: bool = True) -> None:
        """remirror on every host as a site installs it (README, "Install on your sites");
        without `keys`, no SSH key for remirror nor known_hosts (what `remirror init` makes)."""
        wheels = sorted((self.checkout / "build" / "site").glob("remirror-*.whl"))
        if not wheels:
            raise RuntimeError("no wheel in build/site: ./dev builds it (make_site_install)")
        wheel = wheels[-1]
        key = self.site_key()
        forced = f'command="remirror agent --serve",restrict {key.with_suffix(".pub").read_text().strip()}\n'

        def install_on(host: Host) -> None:
            host.put(wheel, f"/root/{wheel.name}")
            host.run(
                f"{VENV}/bin/pip install -q --disable-pip-version-check --no-index --no-deps "
                f"--force-reinstall /root/{wheel.name} && "
                f"ln -sf {VENV}/bin/remirror /usr/local/bin/remirror && "
                f"cp {VENV}/share/remirror/contrib/modules-load.d/remirror.conf /etc/modules-load.d/ && "
                f"cp {VENV}/share/remirror/contrib/systemd/* /etc/systemd/system/ && "
                "systemctl daemon-reload && "
                f"systemctl enable --now iscsid rtslib-fb-targetctl"
            )
            if keys:
                host.put(key, SITE_KEY, "0600")
                host.run(f"echo {shlex.quote(forced.strip())} >> /root/.ssh/authorized_keys")

        # At once on every host: each is its own machine.
        with ThreadPoolExecutor(len(self.hosts)) as pool:
            list(pool.map(install_on, self.hosts.values()))
        for host in self.hosts.values() if keys else ():
            peers = " ".join(host.peers)
            host.run(f"ssh-keyscan -t ed25519 {peers} > {KNOWN_HOSTS} 2>/dev/null && test -s {KNOWN_HOSTS}")

    def site_key(self) -> Path:
        """The SSH key remirror reaches the other sites with, the same on every site (made once)."""
        key = self.work / "site_ed25519"
        if not key.exists():
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "remirror", "-f", str(key)], check=True
            )
        return key

    def write_profile(self, name: str, text: str) -> str:
        """The profile as /etc/remirror/NAME.yaml on every host, the same file; returns that path."""
        path = f"/etc/remirror/{name}.yaml"
        for host in self.hosts.values():
            host.write(path, text, "0600")
        return path

    def stop(self) -> None:
        for host in self.hosts.values():
            host.stop()
