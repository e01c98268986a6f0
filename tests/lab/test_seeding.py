"""`initial_sync: seeded` on a real kernel: a first copy carried by hand, then only what changed.

docs/seeding.md. Site A's disk holds ext4 and files (as in test_keep_data);
its seed is exported to a file and imported at site B, the primary's file
system changes after the seed, and `apply` over a 10 Mbit/s link makes the
mirror. The link's byte counters say what crossed it; `verify` says the legs
are the same, byte for byte; the files read back through the mirror and from
site B's leg directly.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.lab import net
from remirror.lab.spec import VETH_A, Wan
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import SLOW, lio_objects, remirror, variant
from tests.lab.test_keep_data import FAST, FILES, MD, MOUNT, A, B, business_disk, checksums

MiB = 1024 * 1024
DISK = 256 * MiB  # the lab's disks a2 and b2
RECORDS = "/var/lib/remirror/seeds/lab.lab2.*.json"


SITE_B_VIEW = """sites:
  site-a:
    host: ssh://root@site-a
    ssh: {identity_file: /etc/remirror/lab/id_ed25519, known_hosts: /etc/remirror/lab/known_hosts}
  site-b:
    host: local

mirrors:"""


def site_b_view(profile: str) -> str:
    """The profile as site B holds it (itself `local`): what its operator runs `seed import` with."""
    path = Path(profile).with_name("seeded-site-b.yaml")
    path.write_text(
        re.sub(r"sites:\n.*?\n\nmirrors:", SITE_B_VIEW, Path(profile).read_text(), count=1, flags=re.S)
    )
    return str(path)


def link_bytes() -> int:
    """Bytes that crossed the link between the sites, both ways (site A's veth counters)."""
    statistics = Path(f"/sys/class/net/{VETH_A}/statistics")
    return sum(int((statistics / name).read_text()) for name in ("tx_bytes", "rx_bytes"))


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[str]:
    """The lab profile's mirror on a2 and b2, keeping a2's data and seeded; whatever a test
    leaves of it is destroyed, the disks wiped and the sites' seed records removed afterwards."""
    path = variant(
        tmp_path,
        "seeded.yaml",
        **{
            "name: lab0": "name: lab2",
            "      disk: /dev/lab/a0\n": f"      disk: {A}\n      keep_data: true\n",
            "/dev/lab/b0": B,
            "/dev/md/lab0": MD,
            "      on_link_loss: degrade\n": "      on_link_loss: degrade\n      initial_sync: seeded\n",
        },
    )
    yield path
    net.clear_wan()
    sh("umount", MOUNT, ok_codes=(0, 1, 32))
    if Path(MD).exists() or [name for name in lio_objects() if "lab2" in name]:
        remirror("destroy", "--yes", path, "lab2", ok_codes=(0, 1))
    sh("wipefs", "--all", "--quiet", A)
    on_b("wipefs", "--all", "--quiet", B)
    sh("dd", "if=/dev/zero", f"of={FAST}", "bs=1M", "count=1", "oflag=direct", "status=none")
    sh("sh", "-c", f"rm -f {RECORDS}")
    on_b("sh", "-c", f"rm -f {RECORDS}")


def test_a_seeded_mirror_sends_only_what_changed_since_the_seed_and_its_legs_are_the_same(
    seeded: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    business_disk("seeded")
    # No seed yet: refused with what to do, nothing made.
    _, _, err = remirror("apply", "--yes", seeded, ok_codes=(1,))
    assert "site site-a has made no seed of lab2: run `remirror seed export lab lab2" in err, err
    assert not Path(MD).exists()

    # The seed: made at site A (a file, as for a disk carried by hand), taken at site B.
    seed = tmp_path / "lab2.seed"
    _, _, said = remirror("seed", "export", seeded, "lab2", "--to", str(seed))
    carried = re.search(r"\((\d+) of (\d+) chunks all zeros\)", said)
    assert carried is not None, said
    zeros, chunks = int(carried.group(1)), int(carried.group(2))
    record_property("seed_file_bytes", seed.stat().st_size)
    # A chunk of zeros in a byte, a chunk of data with its tag and digest, and the header and end.
    assert seed.stat().st_size <= zeros + (chunks - zeros) * (MiB + 17) + 4096, (zeros, chunks)
    at_b = site_b_view(seeded)
    # Site B's disk holds a file system: refused, nothing written, until it is blank.
    # (Its last MiB cleared first: the tests before leave their mirrors' leg records there.)
    on_b("dd", "if=/dev/zero", f"of={B}", "bs=1M", "seek=255", "count=1", "oflag=direct", "status=none")
    on_b("mkfs.ext4", "-q", "-F", "-L", "old", B, "64M")
    head = on_b("sh", "-c", f"head -c 1048576 {B} | sha256sum").stdout
    refused = on_b(
        "remirror", "seed", "import", at_b, "lab2", "--from", str(seed), ok_codes=(3,), timeout=SLOW
    )
    assert f"{B} holds ext4 filesystem labelled 'old'" in refused.stderr, refused
    assert on_b("sh", "-c", f"head -c 1048576 {B} | sha256sum").stdout == head
    on_b("dd", "if=/dev/zero", f"of={B}", "bs=1M", "count=1", "oflag=direct", "status=none")
    done = on_b("remirror", "seed", "import", at_b, "lab2", "--from", str(seed), timeout=SLOW)
    assert "imported" in done.stderr, done
    # All of it but the first chunk, which the catch-up copies last: no file system shows yet.
    on_b("blkid", "-p", B, ok_codes=(2,))
    (record,) = [json.loads(line) for line in on_b("sh", "-c", f"cat {RECORDS}").stdout.splitlines()]
    assert record["role"] == "import"  # site B's own record only: site A's stays at site A

    # The primary's file system goes on changing after the seed: a new file.
    sh("mount", A, MOUNT)
    try:
        Path(MOUNT, "after-the-seed.bin").write_bytes(os.urandom(4 * 1024 * 1024))
    finally:
        sh("umount", MOUNT)
    names = (*FILES, "after-the-seed.bin")
    expected = checksums(A, names=names)

    # Over a 10 Mbit/s link: the chunks that differ cross it, and the digests, nothing else.
    net.apply_wan(Wan(rate="10mbit"))
    before = link_bytes()
    _, out, err = remirror("apply", "--yes", seeded)
    crossed = link_bytes() - before
    net.clear_wan()
    record_property("seeded_apply_link_bytes", crossed)
    found = re.search(r"(\d+) of (\d+) chunks differed from the seed", out + err)
    assert found is not None, out + err
    differed = int(found.group(1))
    record_property("seeded_chunks_differing", differed)
    # What changed since the seed (a 4 MiB file, its metadata, the first chunk the import left
    # out), not what the seed carried: the catch-up compared, it did not copy all it could.
    assert 5 <= differed < chunks - zeros, (differed, chunks - zeros)
    assert "no initial sync (the replicas hold the seed, caught up)" in out + err
    assert crossed < DISK // 10, crossed
    assert (Path("/sys/block") / Path(MD).resolve().name / "md/sync_action").read_text().strip() == "idle"

    # The legs are the same: verify compares every chunk of the mirror.
    code, out, err = remirror("verify", seeded, "lab2")
    assert code == 0, out + err
    assert checksums("-o", "ro", MD, names=names) == expected
    # Site B's leg holds it at byte 0 (through a read-only loop device: LIO holds the disk).
    assert checksums("-t", "ext4", "-o", "ro,noload,loop", B, site_b=True, names=names) == expected
