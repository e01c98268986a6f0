"""The hosts' lab image: Debian 12 with systemd, built from Debian's packages and cached.

Each host of the hosts' lab boots its own copy of this image with the image's own kernel and
initramfs (Debian's, made inside it by initramfs-tools, mdadm's hook included), so a boot is
a real Debian boot: systemd, udev's incremental assembly, mdadm's last-resort timers,
iscsid, LIO's saved configuration. The image holds what a site installs (README, "Install on
your sites") and remirror's venv with its dependencies; the tests install remirror's own
wheel of the checkout into it at each run, as a site installs an upgrade.

Built by `./dev setup` (as root: mmdebstrap needs it) and kept under the cache directory,
named by a digest of what it is made of, so a change of the package list or of remirror's
dependencies builds a new one. Nothing is fetched but Debian's packages (from this machine's
apt sources) and remirror's dependencies (pip, as the development venv fetches them).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from remirror.lab.spec import SSHD_KEX  # the hosts' sshd: X25519 only, as site B's

# What every site runs (README, "Install on your sites"), what a boot needs (kernel, init,
# udev, the network, sshd), what Ansible's modules need on a site (python3-apt for apt,
# python3-packaging for pip: the role's package list), what the tests look with (e2fsprogs
# for fsck, procps), and the application a disaster is judged by (postgresql-15: the server,
# pgbench and amcheck); and the bench's (bench/peer.py): DRBD's tools for the peer it compares
# remirror with (remirror.lab.hosts.drbd; the module is in Debian's kernel), fio and PostMark.
PACKAGES = [
    *("systemd-sysv", "udev", "kmod", "dbus", "iproute2", "openssh-server", "ca-certificates"),
    *("linux-image-amd64", "initramfs-tools", "e2fsprogs", "util-linux", "procps"),
    *("mdadm", "open-iscsi", "python3-rtslib-fb", "thin-provisioning-tools", "python3-venv"),
    *("python3-apt", "python3-packaging", "postgresql-15"),
    *("drbd-utils", "fio", "postmark"),
]
SUITE = "bookworm"
IMAGE_SIZE = "3G"
ROOT_LABEL = "lab-root"
VENV = "/opt/remirror/venv"
# Bumped when the steps below change what an image holds.
RECIPE = 4

IDENTITY_SCRIPT = r"""#!/bin/sh
# The hosts' lab: who this host is, from the kernel command line the lab boots it with
# (lab.name=NAME lab.link=MAC,ADDRESS/PREFIX ... lab.peer=NAME,ADDRESS ...). Runs at every
# boot, before the network and sshd; writes only what differs.
set -eu
name=""
for word in $(cat /proc/cmdline); do
    case "$word" in
        lab.name=*) name=${word#lab.name=} ;;
    esac
done
[ -n "$name" ] || exit 0
[ "$(cat /etc/hostname 2>/dev/null)" = "$name" ] || echo "$name" > /etc/hostname
hostname "$name"
iqn="InitiatorName=iqn.2026-11.org.remirror.lab:$name"
names=/etc/iscsi/initiatorname.iscsi
[ "$(cat $names 2>/dev/null)" = "$iqn" ] || echo "$iqn" > $names
mkdir -p /etc/systemd/network
rm -f /etc/systemd/network/20-lab-*.network
hosts="127.0.0.1 localhost
127.0.1.1 $name"
for word in $(cat /proc/cmdline); do
    case "$word" in
        lab.link=*)
            spec=${word#lab.link=}; mac=${spec%%,*}; address=${spec#*,}
            printf '[Match]\nMACAddress=%s\n\n[Network]\nAddress=%s\nLinkLocalAddressing=no\n' \
                "$mac" "$address" > "/etc/systemd/network/20-lab-$(echo "$mac" | tr -d :).network" ;;
        lab.peer=*)
            spec=${word#lab.peer=}
            hosts="$hosts
${spec#*,} ${spec%%,*}" ;;
    esac
done
printf '%s\n' "$hosts" > /etc/hosts
# Only the key sshd serves (lab-hostkey.conf): with ssh-keygen -A's RSA and ECDSA keys too, this
# unit took 11.7 s of a host's first boot under emulation, on its critical path (3.1 s without).
[ -e /etc/ssh/ssh_host_ed25519_key ] || ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
"""

IDENTITY_UNIT = """[Unit]
Description=The hosts' lab: this host's name, addresses and peers (kernel command line)
DefaultDependencies=no
After=local-fs.target
Before=network-pre.target systemd-networkd.service ssh.service iscsid.service
Wants=network-pre.target

[Service]
Type=oneshot
ExecStart=/usr/local/sbin/lab-identity

[Install]
WantedBy=sysinit.target
"""

# The one host key (ed25519, what every client here asks for: ssh-keyscan -t ed25519).
HOSTKEY = "HostKey /etc/ssh/ssh_host_ed25519_key\n"

# What a boot runs that no test looks at, each a share of the one emulated CPU a host has while
# remirror's units start: e2scrub_reap took 6.8-14.5 s of a boot (systemd-analyze blame), and
# the timers (apt's, dpkg's backup, fstrim, e2scrub) could fire in the middle of a test; DRBD's
# own service (for sites without a cluster manager) brings up whatever drbd.d holds at boot,
# where the bench's peer brings its pair up itself.
QUIET = (
    *("e2scrub_reap.service", "e2scrub_all.timer", "fstrim.timer"),
    *("apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer"),
    "drbd.service",
)

# The control link: QEMU's user-mode network, restricted (nothing beyond the host's loopback
# forward of port 22), by DHCP from QEMU.
CONTROL_NETWORK = """[Match]
MACAddress=52:54:00:00:00:99

[Network]
DHCP=ipv4
LinkLocalAddressing=no
"""


def cache_dir() -> Path:
    """Where images are kept: $REMIRROR_HOSTS_CACHE, else ~/.cache/remirror/hosts."""
    override = os.environ.get("REMIRROR_HOSTS_CACHE")
    if override:
        return Path(override)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "remirror" / "hosts"


def _dependencies(checkout: Path) -> list[str]:
    project = tomllib.loads((checkout / "pyproject.toml").read_text())["project"]
    return sorted(project["dependencies"])


def image_key(checkout: Path) -> str:
    """A digest of what the image is made of: packages, recipe, remirror's dependencies."""
    made_of = [SUITE, str(RECIPE), *PACKAGES, *_dependencies(checkout), IDENTITY_SCRIPT, IDENTITY_UNIT]
    made_of += [SSHD_KEX, HOSTKEY, *QUIET]
    return hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:16]


def image_paths(checkout: Path) -> dict[str, Path]:
    """The files of the current image: root filesystem, kernel, initramfs, the control key."""
    base = cache_dir() / image_key(checkout)
    return {
        "root": base / "root.img",
        "kernel": base / "vmlinuz",
        "initrd": base / "initrd.img",
        "key": base / "control_ed25519",
        "done": base / "built",
    }


def build(checkout: Path, python: str) -> Path:
    """Build the image unless it is cached; return its directory."""
    paths = image_paths(checkout)
    home = paths["done"].parent
    if paths["done"].exists():
        return home
    if os.geteuid() != 0:
        raise SystemExit("hosts' lab image: building it needs root (run ./dev setup as root)")
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="remirror-image-", dir=home) as scratch:
        work = Path(scratch)
        tree = work / "tree"
        wheels = work / "wheels"
        # remirror's dependencies as wheels, fetched here (pip's cache) where it is fast.
        subprocess.run(
            [python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(wheels),
             *_dependencies(checkout)],
            check=True,
        )  # fmt: skip
        subprocess.run(
            ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={','.join(PACKAGES)}",
             "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
             SUITE, str(tree), "/etc/apt/sources.list.d/debian.sources"],
            check=True,
        )  # fmt: skip
        _customize(tree, wheels, paths["key"])
        kernels = sorted((tree / "boot").glob("vmlinuz-*"))
        initrds = sorted((tree / "boot").glob("initrd.img-*"))
        if not kernels or not initrds:
            raise SystemExit("hosts' lab image: no kernel or initramfs was installed")
        shutil.copy(kernels[-1], paths["kernel"])
        shutil.copy(initrds[-1], paths["initrd"])
        paths["root"].unlink(missing_ok=True)
        subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-d", str(tree), str(paths["root"]), IMAGE_SIZE],
            check=True,
        )
    paths["done"].write_text(image_key(checkout) + "\n")
    return home


def _customize(tree: Path, wheels: Path, key: Path) -> None:
    def write(path: str, text: str, mode: int = 0o644) -> None:
        target = tree / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)

    def chroot(*argv: str) -> None:
        subprocess.run(["chroot", str(tree), *argv], check=True)

    # Every host gets its own machine id, host keys and initiator name at its first boot.
    write("/etc/machine-id", "")
    for old in (tree / "etc/ssh").glob("ssh_host_*"):
        old.unlink()
    write("/usr/local/sbin/lab-identity", IDENTITY_SCRIPT, 0o755)
    write("/etc/systemd/system/lab-identity.service", IDENTITY_UNIT)
    chroot("systemctl", "enable", "lab-identity.service", "systemd-networkd.service")
    # No database at boot: the tests make their own cluster on the mirror's file system (Debian's
    # default cluster would take a boot's time and memory under emulation for nothing).
    chroot("pg_dropcluster", "15", "main")
    chroot("systemctl", "disable", "postgresql.service")
    chroot("systemctl", "disable", *QUIET)
    write("/etc/ssh/sshd_config.d/lab-kex.conf", SSHD_KEX)
    write("/etc/ssh/sshd_config.d/lab-hostkey.conf", HOSTKEY)
    write("/etc/systemd/network/10-control.network", CONTROL_NETWORK)
    write("/etc/fstab", f"LABEL={ROOT_LABEL} / ext4 defaults 0 1\n")
    # The hosts have no network beyond their links: pip (the role's install from a wheel on the
    # host) finds remirror's dependencies in its venv and never asks an index.
    write("/etc/pip.conf", "[global]\nno-index = true\ndisable-pip-version-check = true\n")
    # The lab's control key: the test runner logs in as root with it (over the control link).
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hosts-lab", "-f", str(key)], check=True
        )
    write("/root/.ssh/authorized_keys", key.with_suffix(".pub").read_text(), 0o600)
    # remirror's venv with its dependencies; the wheel of the checkout goes in at each run.
    shutil.copytree(wheels, tree / "root/wheels")
    chroot("python3", "-m", "venv", VENV)
    chroot(f"{VENV}/bin/pip", "install", "-q", "--disable-pip-version-check", "--no-index",
           *[f"/root/wheels/{w.name}" for w in wheels.iterdir()])  # fmt: skip
    shutil.rmtree(tree / "root/wheels")
    (tree / "usr/local/bin/remirror").symlink_to(f"{VENV}/bin/remirror")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path)
    args = parser.parse_args()
    home = build(args.checkout.resolve(), sys.executable)
    print(home)  # noqa: T201 - the caller's answer


if __name__ == "__main__":
    main()
