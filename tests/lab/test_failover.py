"""Failover on a real kernel (docs/failover.md): promotions planned and forced, generations on the
legs, the old primary's return in the right direction, split brain held until someone decides,
and failback.

A mirror of its own (`lab3` on a3/b3, sync mode), with a portal for site A
so that site A can serve as a replica after a promotion. Lab stand-in: the
two sites share one kernel, so an md array of one name can run on one site
at a time; a site A that "goes down" has its array stopped (as its crash
would). Site B logs in through site A's iscsid with its own initiator name
(remirror.lab.guest).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.agent.client import AgentClient
from remirror.agent.digest import data_offset
from remirror.agent.generations import read_record
from remirror.lab.spec import IDENTITY_FILE, KNOWN_HOSTS
from remirror.profile.model import Site, SshOptions
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import LAB, MiB, Writer, md_digest, reconcile_until_mirrored, remirror, write_random

MD = "/dev/md/lab3"
A_LEG, B_LEG = "/dev/lab/a3", "/dev/lab/b3"
PROFILE = (
    Path(LAB)
    .read_text()
    .replace("  - name: lab0\n    device: /dev/md/lab0\n", "  - name: lab3\n    device: /dev/md/lab3\n")
    .replace("      disk: /dev/lab/a0\n", "      disk: /dev/lab/a3\n      portal: 192.0.2.1:3260\n")
    .replace("        disk: /dev/lab/b0\n", "        disk: /dev/lab/b3\n")
    .replace("mode: async", "mode: sync")
    .replace("      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", "")
)


B_IQN = "iqn.2026-11.org.remirror:lab.lab3.site-b"
# The same profile as site B's operator keeps it: site B local, site A over SSH (the lab runs no
# sshd on site A, so from site B it cannot be reached: right for a site that is down).
SITES_A = """  site-a:
    host: local
  site-b:
    host: ssh://root@site-b
    ssh:
      identity_file: /etc/remirror/lab/id_ed25519
      known_hosts: /etc/remirror/lab/known_hosts
"""
SITES_B = """  site-a:
    host: ssh://root@site-a
    ssh:
      identity_file: /etc/remirror/lab/id_ed25519
      known_hosts: /etc/remirror/lab/known_hosts
  site-b:
    host: local
"""


def lio_targets() -> str:
    return " ".join(p.name for p in Path("/sys/kernel/config/target/iscsi").glob("iqn.*"))


def leg_digest(leg: str, offset: int, size: int) -> str:
    """sha256 of a region of the mirror's data as it lies on one leg (past md's data offset)."""
    return md_digest(data_offset(leg) + offset, size, leg)


class Timed(Writer):
    """A Writer that remembers when each write was acknowledged."""

    def __init__(self, offset: int, size: int) -> None:
        super().__init__(offset, size)
        self.when: dict[int, float] = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            at = self.offset + self._random.randrange(self.size // self.block) * self.block
            try:
                digest = write_random(at, self.block, MD)
            except OSError as error:
                self.errors.append(f"write at {at}: {error}")
                return
            self.written[at] = digest
            self.when[at] = time.monotonic()
            self.writes += 1

    def acknowledged_before(self, moment: float) -> dict[int, str]:
        """The blocks whose last write was acknowledged before `moment`."""
        return {at: d for at, d in self.written.items() if self.when[at] < moment}

    def acknowledged_after(self, moment: float) -> int:
        return sum(1 for t in self.when.values() if t >= moment)

    def last_written_after(self, moment: float) -> dict[int, str]:
        """The blocks whose last write was acknowledged at or after `moment`."""
        return {at: d for at, d in self.written.items() if self.when[at] >= moment}


# What site B acknowledged alone after the cut (the forced-promotion test), for the resolve test.
B_ALONE: dict[int, str] = {}


def generation(leg: str) -> tuple[int, str, str]:
    """The newest generation on a leg: (number, site, how)."""
    record = read_record(leg)
    assert record is not None, f"no leg record on {leg}"
    return record.current.n, record.current.site, record.current.how


def status(profile: str) -> dict[str, object]:
    _, out, _ = remirror("status", profile, "-o", "json", ok_codes=(0, 1, 2, 3))
    mirrors: list[dict[str, object]] = json.loads(out)["mirrors"]
    return next(m for m in mirrors if m["mirror"] == "lab3")


def array_members(device: str = MD) -> dict[str, str]:
    """md's members of the running array and their states."""
    md = Path(device).resolve().name
    return {
        p.name.removeprefix("dev-"): (p / "state").read_text().strip()
        for p in Path(f"/sys/block/{md}/md").glob("dev-*")
    }


def when_a_member_fails(timeout: float = 120) -> float:
    """Wait until md marks a member of the running array faulty; the moment it was seen."""
    deadline = time.monotonic() + timeout
    while not any("faulty" in state for state in array_members().values()):
        assert time.monotonic() < deadline, array_members()
        time.sleep(0.5)
    return time.monotonic()


def dirty_chunks(leg: str) -> str:
    """What `mdadm --examine-bitmap` says of a leg's bitmap: "N bits (chunks), M dirty (P%)"."""
    out = sh("mdadm", "--examine-bitmap", leg).stdout
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if "Bitmap :" in line)


def write_blocks(seed: int, count: int = 16, block: int = 64 * 1024) -> dict[int, str]:
    """`count` blocks of random data through the mirror, 1 MiB apart from `seed` MiB; their digests."""
    return {(seed + n) * MiB: write_random((seed + n) * MiB, block, MD) for n in range(count)}


def fio(*, verify_only: bool) -> None:
    """fio's 4 KiB random writes with checksummed headers over 110-126 MiB of the mirror, or only
    the check of what they left (`--verify_only`, run on site B): every block as fio wrote it."""
    done = (on_b if verify_only else sh)(
        "fio", "--name=handover", f"--filename={MD}", "--rw=randwrite", "--bs=4k", "--offset=110M",
        "--size=16M", "--direct=1", "--ioengine=psync", "--verify=crc32c", "--verify_fatal=1",
        "--randrepeat=1", "--output-format=json", *(["--verify_only"] if verify_only else ["--do_verify=0"]),
        timeout=600,
    )  # fmt: skip
    assert json.loads(done.stdout)["jobs"][0]["error"] == 0, done.stdout


def reads_back(written: dict[int, str], block: int = 64 * 1024) -> bool:
    """Whether every block reads back through the mirror (wherever it runs now) as written."""
    return all(md_digest(at, block, MD) == digest for at, digest in written.items())


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """lab3 built with site A primary, MIRRORED; the profile's path."""
    path = tmp_path_factory.mktemp("failover") / "failover.yaml"
    path.write_text(PROFILE)
    assert SITES_A in PROFILE
    path.with_name("site-b.yaml").write_text(PROFILE.replace(SITES_A, SITES_B))
    code, out, err = remirror("apply", "--yes", str(path))
    assert code == 0, out + err
    reconcile_until_mirrored(600, str(path))
    yield str(path)
    remirror("lab", "link", "up", ok_codes=(0, 1))
    remirror("destroy", "--yes", str(path), "lab3", ok_codes=(0, 1))
    for disk in (A_LEG, B_LEG):
        sh("mdadm", "--stop", MD, ok_codes=(0, 1))
        sh("wipefs", "--all", "--quiet", disk, ok_codes=(0, 1))


def test_a_new_mirror_records_generation_one_on_every_leg(profile: str) -> None:
    assert generation(A_LEG) == (1, "site-a", "create")
    assert generation(B_LEG) == (1, "site-a", "create")


def test_planned_promotion_hands_over_without_loss(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    written = write_blocks(8)
    fio(verify_only=False)
    started = time.monotonic()
    code, out, err = remirror("promote", profile, "lab3", "--site", "site-b", "--yes")
    record_property("planned_promotion_seconds", round(time.monotonic() - started, 1))
    assert code == 0, out + err
    assert "StopArray" in out, out
    assert "RecordGeneration" in out, out
    assert generation(A_LEG) == (2, "site-b", "planned")
    assert generation(B_LEG) == (2, "site-b", "planned")
    assert reads_back(written), "data written before the promotion does not read back on site B"
    fio(verify_only=True)  # site B reads every block fio wrote on site A, as written
    report = status(profile)
    assert report["state"] == "MIRRORED", report
    assert report["primary"] == "site-b", report
    members = array_members()
    b_leg = Path(B_LEG).resolve().name
    assert "write_mostly" not in members[b_leg], members  # the new primary's own leg serves reads
    assert all("write_mostly" in s for m, s in members.items() if m != b_leg), members


def test_failback_returns_to_the_home_roles_with_identical_legs(profile: str) -> None:
    written = write_blocks(40)  # on site B, the primary now
    code, out, err = remirror("failback", profile, "lab3", "--yes")
    assert code == 0, out + err
    assert generation(A_LEG) == (3, "site-a", "planned")
    assert generation(B_LEG) == (3, "site-a", "planned")
    assert reads_back(written)
    assert status(profile)["primary"] == "site-a"
    code, out, err = remirror("verify", profile, "lab3")
    assert code == 0, out + err


def test_the_old_primary_without_writes_rejoins_as_a_replica(profile: str) -> None:
    before = write_blocks(60)
    # Site A goes down (its array stops, as a crash would stop it), then the link with it.
    sh("mdadm", "--stop", MD)
    remirror("lab", "link", "down")
    # On site B, as its operator would: site A cannot be reached.
    on_site_b = str(Path(profile).with_name("site-b.yaml"))
    done = on_b(
        "remirror", "promote", on_site_b, "lab3", "--site", "site-b", "--yes", ok_codes=(1,), timeout=900
    )
    assert "--force" in done.stdout + done.stderr, done  # planned needs site A
    # Site A's controller held site B's lock when the link went (an apply under way): its agent
    # there holds it on, for its lease. The forced promotion ends it and goes first.
    remirror("lab", "link", "up")
    cut_off = AgentClient(
        "site-b",
        Site(host="ssh://root@site-b", ssh=SshOptions(identity_file=IDENTITY_FILE, known_hosts=KNOWN_HOSTS)),
    )
    cut_off.lock("site", "remirror apply", 0)
    remirror("lab", "link", "down")
    assert on_b("flock", "-n", "/run/lock/remirror/site.lock", "true", ok_codes=(0, 1)).returncode == 1
    done = on_b("remirror", "promote", on_site_b, "lab3", "--site", "site-b", "--force", "--yes", timeout=900)
    out = done.stdout
    assert "Ended another host's controller's hold of this site's lock: pid" in out, out
    cut_off.close()
    assert "FenceTarget" in out, out
    assert "site-a not reached" in out, out
    assert generation(B_LEG) == (4, "site-b", "forced")
    assert generation(A_LEG) == (3, "site-a", "planned")  # not reached: the cut
    assert B_IQN not in lio_targets(), "site B's leg is still exported: not fenced"
    assert reads_back(before)
    since = write_blocks(90)  # on site B, while site A is away
    remirror("lab", "link", "up")
    code, out, err = remirror("apply", "--yes", profile)
    assert code == 0, out + err
    reconcile_until_mirrored(600, profile)
    assert generation(A_LEG) == (4, "site-b", "forced")  # joined the array's generation
    assert reads_back(since)
    code, out, err = remirror("verify", profile, "lab3")
    assert code == 0, out + err  # site A's leg got what site B wrote: the right direction


def test_forced_promotion_after_a_cut_keeps_every_write_acknowledged_before_it(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    # Site B runs lab3. An application writes through the cut: md stalls, fails site A's leg
    # (on_link_loss: degrade) and acknowledges the writes after that on site B's leg alone.
    with Timed(offset=150 * MiB, size=16 * MiB) as writer:
        writer.wait_writes(20)
        cut = time.monotonic()  # what was acknowledged before this is on both legs
        remirror("lab", "link", "down")  # (the cut itself lands a few seconds later)
        failed = when_a_member_fails()  # after this, writes are acknowledged by site B alone
        while writer.acknowledged_after(failed) < 8:
            assert time.monotonic() - failed < 120, "writes did not go on after md failed the leg"
            time.sleep(1)
    assert not writer.errors, writer.errors
    record_property("members_on_site_b_after_the_cut", array_members())
    sh("mdadm", "--stop", MD)  # site B goes down
    record_property("site_b_bitmap_after_the_cut", dirty_chunks(B_LEG))
    started = time.monotonic()
    code, out, err = remirror("promote", profile, "lab3", "--site", "site-a", "--force", "--yes")
    record_property("forced_promotion_seconds", round(time.monotonic() - started, 1))
    assert code == 0, out + err
    assert generation(A_LEG) == (5, "site-a", "forced")
    before = writer.acknowledged_before(cut)
    B_ALONE.update(writer.last_written_after(failed))
    record_property("writes_acknowledged_before_the_cut", len(before))
    record_property("writes_acknowledged_by_site_b_alone", writer.acknowledged_after(failed))
    assert before, "nothing was acknowledged before the cut"
    assert reads_back(before, writer.block), "a write acknowledged before the cut is missing"


def test_both_sides_writing_is_split_brain_and_nothing_is_overwritten(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    # Site B wrote on its own after the cut (previous test); now site A does too.
    a_side = write_blocks(150, count=4)
    b_leg_before = leg_digest(B_LEG, 150 * MiB, 16 * MiB)
    remirror("lab", "link", "up")
    report = status(profile)
    assert report["state"] == "SPLIT_BRAIN", report
    assert report["primary"] == "site-a", report
    record_property("split_brain_reason", report["reason"])
    _, out, _ = remirror("reconcile", profile, ok_codes=(2,))
    assert "split brain" in out, out
    remirror("apply", "--yes", profile, ok_codes=(0, 1))  # exports site B's leg, re-adds nothing
    remirror("reconcile", profile, ok_codes=(2,))
    record_property("site_b_bitmap_after_apply", dirty_chunks(B_LEG))
    assert reads_back(a_side)
    assert leg_digest(B_LEG, 150 * MiB, 16 * MiB) == b_leg_before, "site B's own writes were overwritten"


def test_split_brain_with_both_arrays_stopped_is_held_until_resolve(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    # Both sites restart: site A's array stops and its session to site B's leg ends (site B's
    # array is not running: it stopped when site B went down). docs/safety.md, flow 2.
    legs_before = {leg: leg_digest(leg, 150 * MiB, 16 * MiB) for leg in (A_LEG, B_LEG)}
    sh("mdadm", "--stop", MD)
    sh("iscsiadm", "-m", "node", "-T", B_IQN, "--logout", ok_codes=(0, 21))
    # What boot runs: open-iscsi logs in to the node records marked automatic. remirror's are
    # manual, so no remote leg is there for udev's incremental assembly to put together.
    sh("iscsiadm", "-m", "node", "--loginall=automatic", ok_codes=(0, 15, 21))
    assert B_IQN not in sh("iscsiadm", "-m", "session", ok_codes=(0, 21)).stdout
    report = status(profile)
    assert report["state"] == "SPLIT_BRAIN", report
    record_property("split_brain_stopped_reason", report["reason"])
    _, out, err = remirror("plan", profile, ok_codes=(1,))
    record_property("plan_output", out + err)  # quoted in the note
    assert "split brain" in err, out + err
    _, out, err = remirror("apply", "--yes", profile, ok_codes=(1,))
    assert "split brain" in err, out + err
    _, out, _ = remirror("check", profile, ok_codes=(2,))
    assert "SPLIT_BRAIN" in out, out
    assert not Path(MD).exists(), "an array was assembled from legs in split brain"
    assert {leg: leg_digest(leg, 150 * MiB, 16 * MiB) for leg in (A_LEG, B_LEG)} == legs_before


def test_resolve_keeps_one_side_rebuilds_the_other_and_saves_its_writes(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    # From the previous test's state: both arrays stopped, the split brain held.
    # On site B its writes are set aside in remirror's own directory for them, under this name.
    save, saved = "lab3-resolve", "/var/lib/remirror/saved/lab3-resolve"
    a_side = {at: leg_digest(A_LEG, at, 64 * 1024) for at in range(150 * MiB, 154 * MiB, MiB)}
    record_property("site_b_bitmap_before_resolve", dirty_chunks(B_LEG))
    started = time.monotonic()
    code, out, err = remirror("resolve", profile, "lab3", "--keep", "site-a", "--save", save, "--yes")
    assert code == 0, out + err
    record_property("resolve_output", out)
    assert "ForgetArray" in out, out
    reconcile_until_mirrored(900, profile)
    record_property("resolve_to_mirrored_seconds", round(time.monotonic() - started, 1))
    assert status(profile)["state"] == "MIRRORED"
    assert reads_back(a_side)  # site A's data kept
    code, out, err = remirror("verify", profile, "lab3")
    assert code == 0, out + err  # site B's leg rebuilt from site A's
    assert generation(B_LEG) == generation(A_LEG) == (5, "site-a", "forced")
    # Every block site B acknowledged alone is in the saved ranges, with its data.
    manifest = json.loads(on_b("cat", f"{saved}/lab3-site-b.json").stdout)
    assert on_b("stat", "-c", "%a", saved).stdout.strip() == "700"
    covered = [(o, o + n) for o, n in manifest["ranges"]]
    assert B_ALONE, "the forced-promotion test recorded no write of site B's alone"
    image = f"{saved}/lab3-site-b.img"
    for at, digest in B_ALONE.items():
        assert any(o <= at and at + 64 * 1024 <= e for o, e in covered), f"{at} not saved: {covered}"
        done = on_b("sh", "-c", f"dd if={image} bs=64K skip={at // 65536} count=1 status=none | sha256sum")
        assert done.stdout.split()[0] == digest, f"the saved copy of {at} is not what site B wrote"
    record_property("saved_ranges", len(covered))


def test_async_mode_loses_at_most_write_behind_writes_in_a_forced_promotion(
    profile: str, record_property: Callable[[str, object], None]
) -> None:
    # Site A runs lab3 again, MIRRORED (previous test). Asynchronous now, over a slow link, so
    # that writes trail to site B; then site A goes down with the link.
    asynchronous = Path(profile).with_name("async.yaml")
    asynchronous.write_text(Path(profile).read_text().replace("mode: sync", "mode: async"))
    Path(profile).with_name("async-site-b.yaml").write_text(
        asynchronous.read_text().replace(SITES_A, SITES_B)
    )
    code, out, err = remirror("apply", "--yes", str(asynchronous))
    assert code == 0, out + err
    limit = int(Path(f"/sys/block/{Path(MD).resolve().name}/md/bitmap/backlog").read_text())
    remirror("lab", "wan", "--delay", "40ms")
    try:
        with Timed(offset=170 * MiB, size=16 * MiB) as writer:
            writer.wait_writes(40)  # over the 40 ms WAN: some are still behind at the cut
            cut = time.monotonic()
            remirror("lab", "link", "down")
        sh("mdadm", "--stop", MD)  # site A goes down at the cut
    finally:
        remirror("lab", "wan", "--clear")
    on_site_b = str(Path(profile).with_name("async-site-b.yaml"))
    on_b("remirror", "promote", on_site_b, "lab3", "--site", "site-b", "--force", "--yes", timeout=900)
    acknowledged = writer.acknowledged_before(cut)
    missing = [at for at, digest in acknowledged.items() if md_digest(at, writer.block, MD) != digest]
    record_property("async_write_behind_limit", limit)
    record_property("async_writes_acknowledged_before_the_cut", len(acknowledged))
    record_property("async_writes_missing_on_site_b", len(missing))
    assert acknowledged
    assert len(missing) <= limit, f"{len(missing)} acknowledged writes missing, write-behind allows {limit}"
    remirror("lab", "link", "up")
