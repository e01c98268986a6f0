"""`transport: wireguard` on the lab: the replica leg's iSCSI goes through a WireGuard tunnel.

A mirror of its own (`lab4` on a3/b3), taken apart at the end with the
tunnel and the keys. Its profile gives no CHAP: apply generates it. Its legs are blank and the profile says `initial_sync:
skip`: the test also shows that way of creating a mirror (each site proves
its leg blank, then no copy), and it has no initial sync to wait for. Built,
it also shows the reconciler stopping Debian's monthly md check.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from remirror.lab.probes import sectors_written
from remirror.lab.spec import INITIATOR_NAMES, VETH_A
from remirror.profile import load_profile
from remirror.profile.wireguard import interface_name, tunnel_address, tunnel_ends
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import SLOW, MiB, md_sysfs, remirror, variant


@contextmanager
def capture(interface: str, pcap: Path) -> Iterator[None]:
    """tcpdump on `interface` into `pcap` (whole packets, each written as it comes), stopped at the end."""
    # -Z root: tcpdump would otherwise drop to its own user, who cannot write here.
    tcpdump = subprocess.Popen(
        ["tcpdump", "-i", interface, "-w", str(pcap), "-U", "-s", "0", "-n", "-Z", "root"],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert tcpdump.stderr is not None
    ready = tcpdump.stderr.readline()  # "listening on IFACE, ..." once it captures
    assert "listening on" in ready, ready
    try:
        yield
    finally:
        time.sleep(1)  # the last packets written out
        tcpdump.terminate()
        tcpdump.wait(timeout=30)


def test_wireguard_carries_the_replica_leg_and_the_link_shows_none_of_the_data(tmp_path: Path) -> None:
    path = variant(
        tmp_path,
        "wireguard.yaml",
        **{
            # No CHAP in the profile: apply generates it (Profile.replica_chap). First: the next
            # replacement would change its username.
            "      chap:\n        username: lab0\n        password_file: /etc/remirror/lab/lab0.chap\n"
            "        mutual: true            # target secret in /etc/remirror/lab/lab0.chap.mutual\n": "",
            "name: lab0": "name: lab4",
            "/dev/lab/a0": "/dev/lab/a3",
            "/dev/lab/b0": "/dev/lab/b3",
            "/dev/md/lab0": "/dev/md/lab4",
            "    replication:\n": "    transport: wireguard\n    replication:\n",
            "      on_link_loss: degrade\n": "      on_link_loss: degrade\n      initial_sync: skip\n",
        },
    )
    profile = load_profile(path)
    mirror = profile.mirrors[0]
    iqn = profile.replica_iqn(mirror, mirror.replicas[0])
    interface, key = interface_name(profile), tunnel_ends(profile)["site-a"].key_file
    site_b_address = tunnel_address(profile, "site-b")
    sh("blkdiscard", "--zeroout", "/dev/lab/a3")
    on_b("blkdiscard", "--zeroout", "/dev/lab/b3")
    try:
        replica_before = sectors_written("/dev/lab/b3")
        _, out, err = remirror("apply", "--yes", path)
        # Two rounds: each site makes its key; then the tunnel, and the mirror through it.
        assert out.index("MakeTunnelKey") < out.index("SetTunnel") < out.index("CreateArray"), out
        # initial_sync: skip: each leg proved blank, then no copy. No recovery ran and none is
        # due: the replica got md's superblock and bitmap, and its leg record.
        assert out.index("ProveBlank") < out.index("CreateBackstore"), out
        assert "no initial sync" in out, out
        assert md_sysfs("sync_action", "/dev/md/lab4") == "idle"
        assert md_sysfs("degraded", "/dev/md/lab4") == "0"
        assert (sectors_written("/dev/lab/b3") - replica_before) * 512 < 8 * MiB
        for site in (sh, on_b):
            assert site("stat", "-c", "%a", key, str(Path(key).parent)).stdout.split() == ["600", "700"]
        private = {sh("cat", key).stdout.strip(), on_b("cat", key).stdout.strip()}
        assert len(private) == 2  # each site its own
        # The CHAP secrets apply generated, kept on the controller, set on the target's ACL.
        chap = [f"/etc/remirror/chap/lab.lab4{end}" for end in ("", ".mutual")]
        assert sh("stat", "-c", "%a", *chap, "/etc/remirror/chap").stdout.split() == ["600", "600", "700"]
        private |= {sh("cat", path).stdout.strip() for path in chap}
        assert not [k for k in private if k in out + err]
        acl = Path(f"/sys/kernel/config/target/iscsi/{iqn}/tpgt_1/acls/{INITIATOR_NAMES['a']}/auth")
        assert (acl / "userid").read_text().strip() == "remirror-lab-lab4"
        # Debian's monthly md `check`, as checkarray starts it (held slow, so that it outlasts an
        # observation): a reconciler pass stops it, and has nothing else to repair (the tunnel as
        # observed is the tunnel planned).
        md = f"/sys/block/{Path('/dev/md/lab4').resolve().name}/md"
        Path(f"{md}/sync_speed_max").write_text("1000\n")  # KiB/s
        Path(f"{md}/sync_action").write_text("check\n")
        try:
            _, out, _ = remirror("reconcile", path, ok_codes=(0, 1))
        finally:
            Path(f"{md}/sync_speed_max").write_text("system\n")
        assert [line for line in out.splitlines() if line.startswith("done:")] == [
            "done: ~ site-a: StopCheck /dev/md/lab4 (md's check reads the replica legs over the link:"
            " `remirror verify` instead)"
        ], out
        assert md_sysfs("sync_action", "/dev/md/lab4") == "idle"
        # Site B's target listens on its tunnel address alone, and site A's session goes there.
        portals = Path(f"/sys/kernel/config/target/iscsi/{iqn}/tpgt_1/np")
        assert [p.name for p in portals.iterdir()] == [f"{site_b_address}:3260"]
        assert f"{site_b_address}:3260" in sh("iscsiadm", "-m", "session").stdout
        # Random data written through the mirror, while the lab's link and the tunnel are captured.
        block = secrets.token_bytes(4096)
        data = tmp_path / "data"
        data.write_bytes(block * 1024)  # 4 MiB
        link, tunnel = tmp_path / "link.pcap", tmp_path / "tunnel.pcap"
        replica_before = sectors_written("/dev/lab/b3")
        with capture(VETH_A, link), capture(interface, tunnel):
            sh("dd", f"if={data}", "of=/dev/md/lab4", "bs=1M", "oflag=direct", "conv=fsync", "status=none")
            deadline = time.monotonic() + SLOW
            while (sectors_written("/dev/lab/b3") - replica_before) * 512 < 4 * MiB:  # async: behind
                assert time.monotonic() < deadline, "the writes never reached the replica"
                time.sleep(0.5)
        on_link, in_tunnel = link.read_bytes(), tunnel.read_bytes()
        pieces = [block[at : at + 64] for at in range(0, len(block), 64)]
        # Inside the tunnel the data is in clear: the capture sees what iSCSI carries.
        assert any(piece in in_tunnel for piece in pieces)
        # On the link it crossed, as WireGuard's UDP, and none of it can be read.
        assert len(on_link) > 4 * MiB, len(on_link)
        assert not [piece for piece in pieces if piece in on_link]
    finally:
        remirror("destroy", "--yes", path, "lab4", ok_codes=(0, 1, 3))
        for site in (sh, on_b):
            site("ip", "link", "del", interface, ok_codes=(0, 1))
            site("rm", "-f", key)
        sh("rm", "-rf", "/etc/remirror/chap")
        sh("blkdiscard", "--zeroout", "/dev/lab/a3")
        on_b("blkdiscard", "--zeroout", "/dev/lab/b3")
