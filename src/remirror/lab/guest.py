"""Set up the two sites inside the lab VM, then run the operator's command.

Runs as PID 1's child in the VM (`vng --exec`), as root. Writes progress to
the run directory shared with the host: `setup.log`, then `ready`, then
`status` (`exit N`), which is how the host tells "the command failed" from
"the lab never came up".
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from remirror.agent.lock import LOCK_DIR
from remirror.facts.seed import SEED_DIR
from remirror.facts.wireguard import KEY_DIR
from remirror.lab import disks, net
from remirror.lab.spec import (
    CACHED_ROOT_TAG,
    IDENTITY_FILE,
    INITIATOR_NAMES,
    KNOWN_HOSTS,
    LAB_DIR,
    LAB_FILE,
    PREFIX_LENGTH,
    RUN_DIR,
    SITE_A_ADDRESS,
    SITE_B_ADDRESS,
    SITE_B_ANCHOR_PID,
    SITE_B_NETNS,
    SSHD_KEX,
    VETH_A,
    VETH_B,
    LabSpec,
)
from remirror.runner.local import LocalRunner

log = logging.getLogger("remirror.lab")

MODULES = [
    "loop",
    "raid1",
    "dm-mod",
    "dm-writecache",
    "dm-cache",
    "dm-cache-smq",
    "dm-era",
    "dm-delay",  # the lab tests slow a disk live (tests/lab/mirror.py)
    "dm-flakey",
    "dm-thin-pool",
    "dm-snapshot",
    "configfs",
    "target_core_mod",
    "target_core_iblock",
    "target_core_file",
    "iscsi_target_mod",
    "iscsi_tcp",
    "sch_netem",
    "sch_prio",  # with cls_u32 and act_gact: a cut drops site B's iSCSI traffic on loopback (lab.net)
    "cls_u32",
    "act_gact",
    "veth",
    "wireguard",  # transport: wireguard (profile.wireguard)
]
# Site B keeps its own copies of these under /etc/remirror/lab/site-b: its own
# initiator name and node records, its own saved LIO config and mdadm.conf.
SITE_B_PRIVATE_ETC = ["iscsi", "target", "rtslib-fb-target", "mdadm"]

run = LocalRunner("lab").run


def main(spec_path: str) -> int:
    """Build the lab, run the command, report how it ended to the host."""
    run_dir = Path(spec_path).parent
    logging.basicConfig(
        filename=run_dir / "setup.log",
        level=logging.DEBUG,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    spec = LabSpec.from_json(Path(spec_path).read_text())
    started = time.monotonic()
    try:
        setup(spec)
    except Exception:
        log.exception("lab setup failed")
        (run_dir / "status").write_text("setup-failed\n")
        return 124
    log.info("lab ready after %.1fs of guest time", time.monotonic() - started)
    (run_dir / "ready").write_text("ready\n")
    env = {
        **os.environ,
        "PATH": f"{Path(spec.python).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LAB_OUT": str(run_dir / "out"),
        "REMIRROR_LAB": LAB_FILE,
        "HOME": "/root",
    }
    command = ["bash", "-i"] if spec.interactive else list(spec.command)
    try:
        returncode = subprocess.call(command, cwd=spec.checkout, env=env)
    except OSError as error:
        sys.stderr.write(f"lab: cannot run {command[0]}: {error.strerror}\n")
        returncode = 127
    (run_dir / "status").write_text(f"exit {returncode}\n")
    return returncode


def setup(spec: LabSpec) -> None:
    """Everything between a bare VM and two usable sites."""
    _use_cached_root(spec)
    _clean_login_shells()
    run(["modprobe", "-a", *MODULES])
    if not os.path.ismount("/sys/kernel/config"):
        run(["mount", "-t", "configfs", "none", "/sys/kernel/config"])
    for directory in (LAB_DIR, RUN_DIR, "/etc/target", "/etc/rtslib-fb-target", "/run/sshd", "/dev/lab"):
        Path(directory).mkdir(parents=True, exist_ok=True)
    _put_remirror_on_path(spec)
    _site_b_iscsiadm()
    performance = disks.performance_model(spec)
    disks.make_disks(spec, performance)
    _make_network()
    _make_site_b()
    _start_site_b_sshd()
    _start_iscsid()
    _write_chap_secrets()
    _describe(spec, performance)
    if performance is not None:
        net.apply_lan()
    if spec.wan is not None:
        net.apply_wan(spec.wan)
    run(["udevadm", "settle", "--timeout=30"])


def _use_cached_root(spec: LabSpec) -> None:
    """Serve programs, libraries and Python from a cached mount of the host's root.

    virtme mounts the host's root over 9p without caches: under emulation
    each stat or open then costs milliseconds, and a Python start that
    imports pydantic makes thousands of them (half a minute
    for one `remirror status`). The host's trees do not change during a lab
    run, so a second mount of the same tree with cache=loose is safe, and
    bind mounts put it where the programs are looked up. /etc, /var, /tmp
    and the run directory stay as virtme made them (writable overlays).
    """
    cached = Path(RUN_DIR) / "cached-root"
    cached.mkdir(parents=True, exist_ok=True)
    options = "trans=virtio,version=9p2000.L,cache=loose,msize=524288,ro"
    run(["mount", "-t", "9p", "-o", options, CACHED_ROOT_TAG, str(cached)])
    trees = ["/usr/bin", "/usr/sbin", "/usr/lib", sys.base_prefix, spec.checkout]
    for tree in dict.fromkeys(trees):  # in order, once each
        # A Python under /usr (Debian's) is served by the /usr binds above;
        # /usr itself stays as virtme made it (/usr/local/bin is written to).
        if tree == "/usr" or not Path(tree).is_dir():
            continue
        run(["mount", "--bind", f"{cached}{tree}", tree])


# What bash reads when sshd starts it, even for a command (Debian builds bash so).
LOGIN_DOTFILES = ("/root/.bashrc", "/root/.profile", "/root/.bash_profile", "/root/.bash_login")


def _clean_login_shells() -> None:
    """Hide the host root's shell dotfiles from the sites' shells.

    The guest's /root is the host's. A development machine's ~/.bashrc may
    set up its own tools (found here: pyenv's init, 4.5 s of every SSH
    session under emulation, so of every remote agent and every Ansible
    task on site B); a site's root has none of that. Masked before site B's
    namespaces are made, so both sites get it.
    """
    for dotfile in LOGIN_DOTFILES:
        if Path(dotfile).is_file():
            run(["mount", "--bind", "/dev/null", dotfile])


def _put_remirror_on_path(spec: LabSpec) -> None:
    # Both sites (and SSH sessions into site B) find this checkout's remirror.
    Path("/usr/local/bin").mkdir(parents=True, exist_ok=True)
    link = Path("/usr/local/bin/remirror")
    link.unlink(missing_ok=True)
    link.symlink_to(Path(spec.python).parent / "remirror")
    helper = Path("/usr/local/bin/site-b")
    helper.write_text(
        "#!/bin/sh\n# Run a command on lab site B (its network, mount and UTS namespaces).\n"
        f'exec nsenter -t "$(cat {SITE_B_ANCHOR_PID})" --net --mount --uts -- "$@"\n'
    )
    helper.chmod(0o755)


# The iface of site B's node records: it carries site B's initiator name to the one iscsid.
SITE_B_IFACE = "site-b"


def _site_b_iscsiadm() -> None:
    """An `iscsiadm` in front of the real one, for site B.

    iscsid works only in the root network namespace (site A's), so site B
    cannot run one of its own. In site B this wrapper runs the real iscsiadm
    in site A's network namespace, so it reaches that iscsid, and keeps
    site B's mount namespace, so it uses site B's node records; node records
    it creates are bound to the iface that carries site B's initiator name.
    A lab stand-in for a second host: sessions stay global to the kernel
    (observe tells them apart by initiator name).
    """
    real = shutil.which("iscsiadm", path="/usr/sbin:/sbin:/usr/bin:/bin")
    wrapper = Path("/usr/local/sbin/iscsiadm")
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(
        "#!/bin/sh\n# remirror lab: site B's iscsiadm talks to site A's iscsid (see remirror.lab.guest).\n"
        f'if [ "$(readlink /proc/self/ns/net)" = "$(readlink /proc/1/ns/net)" ]; then exec {real} "$@"; fi\n'
        f'case " $* " in *" -o new "*) set -- "$@" -I {SITE_B_IFACE} ;; esac\n'
        f'exec nsenter --net=/proc/1/ns/net -- {real} "$@"\n'
    )
    wrapper.chmod(0o755)


def _make_network() -> None:
    run(["hostname", "site-a"])
    run(["ip", "link", "set", "lo", "up"])
    run(["ip", "netns", "add", SITE_B_NETNS])
    run(["ip", "link", "add", VETH_A, "type", "veth", "peer", "name", VETH_B])
    run(["ip", "link", "set", VETH_B, "netns", SITE_B_NETNS])
    run(["ip", "addr", "add", f"{SITE_A_ADDRESS}/{PREFIX_LENGTH}", "dev", VETH_A])
    run(["ip", "link", "set", VETH_A, "up"])
    run(["ip", "-n", SITE_B_NETNS, "link", "set", "lo", "up"])
    run(["ip", "-n", SITE_B_NETNS, "addr", "add", f"{SITE_B_ADDRESS}/{PREFIX_LENGTH}", "dev", VETH_B])
    run(["ip", "-n", SITE_B_NETNS, "link", "set", VETH_B, "up"])
    with Path("/etc/hosts").open("a") as hosts:
        hosts.write(f"\n{SITE_A_ADDRESS} site-a\n{SITE_B_ADDRESS} site-b\n")
    Path("/etc/iscsi/initiatorname.iscsi").write_text(f"InitiatorName={INITIATOR_NAMES['a']}\n")


def _make_site_b() -> None:
    """Site B: netns site-b plus its own mount and UTS namespaces, held open by an anchor process."""
    private = Path(LAB_DIR) / "site-b"
    mounts = []
    for name in SITE_B_PRIVATE_ETC:
        source = Path("/etc") / name
        copy = private / name
        copy.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            run(["cp", "-a", f"{source}/.", str(copy)])
        mounts.append(f"mount --bind {copy} {source}")
    # Its own remirror locks: the two sites share the VM's /run, and a site's lock is its own.
    locks = private / "locks"
    locks.mkdir(mode=0o700, parents=True, exist_ok=True)
    LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    mounts.append(f"mount --bind {locks} {LOCK_DIR}")
    # Its own WireGuard keys (transport: wireguard): each site makes its own, in the same place.
    keys = private / "wireguard"
    keys.mkdir(mode=0o700, parents=True, exist_ok=True)
    Path(KEY_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
    mounts.append(f"mount --bind {keys} {KEY_DIR}")
    # Its own seed records (remirror seed): a site's record says what its own disk holds.
    seeds = private / "seeds"
    seeds.mkdir(mode=0o755, parents=True, exist_ok=True)
    Path(SEED_DIR).mkdir(mode=0o755, parents=True, exist_ok=True)
    mounts.append(f"mount --bind {seeds} {SEED_DIR}")
    (private / "iscsi" / "initiatorname.iscsi").write_text(f"InitiatorName={INITIATOR_NAMES['b']}\n")
    # Site B as an initiator (after a promotion it logs in to site A's leg): see _site_b_iscsiadm.
    ifaces = private / "iscsi" / "ifaces"
    ifaces.mkdir(parents=True, exist_ok=True)
    (ifaces / SITE_B_IFACE).write_text(
        f"iface.iscsi_ifacename = {SITE_B_IFACE}\niface.transport_name = tcp\n"
        f"iface.initiatorname = {INITIATOR_NAMES['b']}\n"
    )
    ready = Path(RUN_DIR) / "site-b.ready"
    script = " && ".join([*mounts, "hostname site-b", f"touch {ready}", "exec sleep infinity"])
    anchor = subprocess.Popen(
        [
            "nsenter",
            f"--net=/run/netns/{SITE_B_NETNS}",
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
        ],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if anchor.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("site B's namespaces did not come up")
        time.sleep(0.1)
    Path(SITE_B_ANCHOR_PID).write_text(f"{anchor.pid}\n")


def _start_site_b_sshd() -> None:
    lab = Path(LAB_DIR)
    host_key = lab / "ssh_host_ed25519_key"
    for key in (host_key, Path(IDENTITY_FILE)):
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "remirror-lab", "-f", str(key)])
    (lab / "authorized_keys").write_text(Path(f"{IDENTITY_FILE}.pub").read_text())
    host_public = (lab / "ssh_host_ed25519_key.pub").read_text().split()
    Path(KNOWN_HOSTS).write_text(f"site-b,{SITE_B_ADDRESS} {host_public[0]} {host_public[1]}\n")
    config = lab / "sshd_config"
    config.write_text(
        f"ListenAddress {SITE_B_ADDRESS}\n"
        f"HostKey {host_key}\n"
        f"AuthorizedKeysFile {lab / 'authorized_keys'}\n"
        f"PidFile {RUN_DIR}/sshd-site-b.pid\n"
        "PermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "UsePAM no\n"
        "StrictModes no\n"
        "PrintMotd no\n"
        f"{SSHD_KEX}"  # X25519 only: lab.spec says why
    )
    # virtme-ng presents root as locked ("root:!"), and sshd refuses even key
    # logins into a locked account. The VM's /etc is a throwaway overlay.
    shadow = Path("/etc/shadow")
    shadow.write_text(shadow.read_text().replace("root:!", "root:*", 1))
    Path("/etc/ssh/ssh_config.d").mkdir(parents=True, exist_ok=True)
    Path("/etc/ssh/ssh_config.d/remirror-lab.conf").write_text(
        f"Host site-b {SITE_B_ADDRESS}\n"
        "    User root\n"
        f"    IdentityFile {IDENTITY_FILE}\n"
        f"    UserKnownHostsFile {KNOWN_HOSTS}\n"
        "    StrictHostKeyChecking yes\n"
        "    BatchMode yes\n"
    )
    # -r: no re-exec of sshd for each connection. The re-exec (fresh address-space layout per
    # connection) costs the emulated CPU 0.35 s of the 1.2 s a connection takes (measured in
    # the lab, 5 connections each way), and every command that reaches site B connects once.
    # A real site keeps sshd's default.
    run(net.in_site_b(["/usr/sbin/sshd", "-r", "-f", str(config)]))
    run(["ssh", "-o", "ConnectTimeout=20", "root@site-b", "true"], timeout=60)


def _write_chap_secrets() -> None:
    """The secret files profiles/lab.yaml names: fresh random ones per lab, mode 0600."""
    for name in ("lab0.chap", "lab0.chap.mutual"):
        path = Path(LAB_DIR) / name
        path.write_text(secrets.token_urlsafe(18) + "\n")
        path.chmod(0o600)


def _start_iscsid() -> None:
    # iscsid must live in the root network namespace: started in another it
    # cannot talk to the kernel (lab notes). So site A is the initiator.
    run(["iscsid"])
    deadline = time.monotonic() + 20
    while run(["iscsiadm", "-m", "session"], ok_codes=(0, 20, 21)).returncode == 20:
        if time.monotonic() > deadline:
            raise RuntimeError("iscsid did not start")
        time.sleep(0.2)


def _describe(spec: LabSpec, performance: dict[str, Any] | None) -> None:
    description = {
        "sites": {
            "site-a": {
                "namespace": "root",
                "address": SITE_A_ADDRESS,
                "interface": VETH_A,
                "initiator": INITIATOR_NAMES["a"],
            },
            "site-b": {
                "namespace": SITE_B_NETNS,
                "address": SITE_B_ADDRESS,
                "interface": VETH_B,
                "initiator": INITIATOR_NAMES["b"],
                "enter": "/usr/local/bin/site-b",
            },
        },
        "disks": [
            {"path": d.path, "site": f"site-{d.site}", "size": d.size, "model": d.model} for d in spec.disks
        ],
        "performance": performance,
        "identity_file": IDENTITY_FILE,
        "known_hosts": KNOWN_HOSTS,
    }
    Path(LAB_FILE).write_text(json.dumps(description, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
